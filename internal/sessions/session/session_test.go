package session

import (
	"regexp"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestCheckTable(t *testing.T) {
	states := []State{Created, Running, Asleep, Removed, Failed}
	want := map[Op]map[State]bool{
		OpStart:  {Created: true, Failed: true},
		OpSleep:  {Running: true, Failed: true},
		OpWake:   {Asleep: true, Failed: true, Created: true},
		OpRemove: {Created: true, Running: true, Asleep: true, Failed: true},
		OpSet:    {Running: true, Asleep: true},
		OpAttach: {Running: true},
		OpExec:   {Running: true},
	}
	for op, ok := range want {
		for _, st := range states {
			err := Check(op, "x", st)
			if (err == nil) != ok[st] {
				t.Errorf("%s from %s: %v", op, st, err)
			}
			if err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
				t.Errorf("%s from %s: not a conflict", op, st)
			}
		}
	}
	err := Check(OpWake, "x", Removed)
	if !strings.HasPrefix(err.Error(), `cannot wake session "x": it is removed`) {
		t.Fatal(err)
	}
	if err := Check(OpAttach, "x", Asleep); !strings.Contains(err.Error(), "paddock wake x") {
		t.Fatal(err)
	}
}

func TestValidation(t *testing.T) {
	for n, ok := range map[string]bool{"calm-otter": true, "a": false, "g": true, "cafe": false, "cafe-1": true, "0123abcdef01": false, "42": false, "x42": true, "A": false, "-x": false, "x y": false, "a/b": false, strings.Repeat("a", 64): false, "my_proj.2": true} {
		if (ValidName(n) == nil) != ok {
			t.Errorf("name %q", n)
		}
	}
	for m, ok := range map[string]bool{"": true, "claude-opus-5-5": true, "opus": true, "claude-sonnet-5-5[1m]": true, "x;rm": false, "a b": false, "--help": false} {
		if (ValidModel(m) == nil) != ok {
			t.Errorf("model %q", m)
		}
	}
	for e, ok := range map[string]bool{"": true, "low": true, "max": true, "extreme": false} {
		if (ValidEffort(e) == nil) != ok {
			t.Errorf("effort %q", e)
		}
	}
}

func TestIDs(t *testing.T) {
	u, _ := NewUUID()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u) {
		t.Fatal(u)
	}
	id, _ := NewID()
	if len(id) != 12 || ValidName(NewName()) != nil {
		t.Fatal(id)
	}
}

func TestResolve(t *testing.T) {
	all := []Session{
		{ID: "abc123000000", Name: "one", Observed: Running},
		{ID: "abd456000000", Name: "two", Observed: Asleep},
		{ID: "fff000000000", Name: "gone", Observed: Removed},
	}
	for ref, want := range map[string]string{"one": "abc123000000", "abd": "abd456000000", "abc1": "abc123000000", "gone": "fff000000000"} {
		s, err := Resolve(all, ref)
		if err != nil || s.ID != want {
			t.Errorf("%s: %v %v", ref, s.ID, err)
		}
	}
	if _, err := Resolve(all, "ab"); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := Resolve(all, "nope"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	if _, err := Resolve(all, "fff"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("prefix of a removed one: %v", err)
	}
}

// TestResolveExactIDWins (issue 31, item 3): a session named with another
// session's id (a record from before such names were refused) never takes
// a call made with that id; the name still finds it when no id is equal.
func TestResolveExactIDWins(t *testing.T) {
	all := []Session{
		{ID: "0d1e2f3a4b5c", Name: "decoy-owner-made-first", Observed: Running},
		{ID: "9a8b7c6d5e4f", Name: "0d1e2f3a4b5c", Observed: Running}, // the decoy
		{ID: "111111111111", Name: "0d1e", Observed: Running},
	}
	if s, err := Resolve(all, "0d1e2f3a4b5c"); err != nil || s.ID != "0d1e2f3a4b5c" {
		t.Fatalf("by the colleague's exact id, the decoy answered: %v %v", s.ID, err)
	}
	if err := ValidName("0d1e2f3a4b5c"); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "would read as a session id") {
		t.Fatalf("an id-shaped name: %v", err)
	}
}
