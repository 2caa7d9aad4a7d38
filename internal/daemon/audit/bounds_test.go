package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// counted is an entry with its count of refusals not recorded; it is read
// from the raw file so that this test builds against any Entry.
type counted struct {
	Entry
	Suppressed int `json:"suppressed"`
}

func rawEntries(t *testing.T, path string) []counted {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []counted
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var c counted
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("line %.80q: %v", line, err)
		}
		out = append(out, c)
	}
	return out
}

// TestAuditRefusalsAreBounded: one person's flood of refusals, each with
// long fields, writes a few KiB, not one line each: short lines, a rate per
// person, and the count of what was not recorded written after it, so that
// nothing is lost silently. Another person's refusals and everyone's
// accepted actions are all recorded. Past the default 32 MiB the file is
// rotated, whatever the lines.
func TestAuditRefusalsAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("w", 10<<10)
	const flood = 2000
	annRefused := 0
	for i := range flood {
		if err := l.Record(Entry{User: "ben", UID: 1002, Action: ActionCreate, SessionName: long,
			Detail: "workspace=/home/ann/" + long, Argv: []string{long, long, long, long, long, long},
			Error: "only a directory you own may be mounted: /home/ann/" + long}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			record(t, l, Entry{User: "ann", UID: 1001, Action: ActionAttach, Session: "aaaa1111", Error: "ann refused " + strconv.Itoa(i)})
			annRefused++
			record(t, l, Entry{User: "ann", UID: 1001, Action: ActionExec, Session: "aaaa1111", Detail: "ann ok " + strconv.Itoa(i)})
		}
		if i == flood/2 {
			record(t, l, Entry{User: "ben", UID: 1002, Action: ActionExec, Session: "bbbb2222", Detail: "ben ok"})
		}
	}
	if err := l.Close(); err != nil { // the count of the last refusals not recorded is written at close
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 96<<10 {
		t.Errorf("a flood of %d refusals wrote %d KiB", flood, fi.Size()>>10)
	}
	es := rawEntries(t, path)
	benRecorded, benSuppressed, annOK, annNo, benOK, longest := 0, 0, 0, 0, false, 0
	for i, e := range es {
		if line, _ := json.Marshal(e); e.Error != "" {
			longest = max(longest, len(line))
		}
		switch {
		case e.User == "ben" && e.Error != "":
			benRecorded++
		case e.User == "ben" && e.Detail == "ben ok":
			benOK = true
			if i == 0 || es[i-1].User != "ben" || es[i-1].Suppressed == 0 {
				t.Errorf("ben's accepted exec is not preceded by the count of his refusals not recorded: %+v", es[max(i-1, 0)])
			}
		case e.User == "ann" && e.Error != "":
			annNo++
		case e.User == "ann":
			annOK++
		}
		if e.User == "ben" {
			benSuppressed += e.Suppressed
		}
	}
	if longest > 1024 {
		t.Errorf("a refusal of %d bytes; want at most 1 KiB", longest)
	}
	if benRecorded+benSuppressed != flood || benSuppressed == 0 {
		t.Errorf("ben's refusals: %d recorded, %d counted as not recorded; want %d together, some not recorded", benRecorded, benSuppressed, flood)
	}
	if !benOK || annOK != annRefused || annNo != annRefused {
		t.Errorf("accepted by ben recorded %v; ann: %d accepted, %d refusals recorded, want %d each", benOK, annOK, annNo, annRefused)
	}

	// Accepted actions are never dropped, but the file is rotated at 32 MiB.
	l, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	argv := make([]string, 15) // 60 KB a line
	for i := range argv {
		argv[i] = strings.Repeat("a", 4000)
	}
	const big = 600 // 36 MB
	for i := range big {
		record(t, l, Entry{User: "ann", UID: 1001, Action: ActionExec, Argv: argv, Detail: "big " + strconv.Itoa(i)})
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 32<<20 {
		t.Errorf("after %d lines of 60 KB the file is %d MiB (%v); want at most 32", big, fi.Size()>>20, err)
	}
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() > 32<<20 {
		t.Errorf("the rotated file: %v", err)
	}
	got, _, err := l.Read(Filter{User: "ann", Since: time.Now().Add(-time.Hour)}, 0)
	n := 0
	for _, e := range got {
		if strings.HasPrefix(e.Detail, "big ") {
			if e.Detail != "big "+strconv.Itoa(n) {
				t.Fatalf("after rotation Read gives %q, want big %d", e.Detail, n)
			}
			n++
		}
	}
	if err != nil || n != big {
		t.Errorf("Read across the rotated file: %d of %d, %v", n, big, err)
	}
}

// TestAuditRotation: the file is rotated before a line would take it past
// the cap, path.1 the newest of Keep rotated files; Read reads them all,
// oldest first, and a follower gets every line once, in order, across
// rotations.
func TestAuditRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	// A file left from a larger Keep goes at Open.
	if err := os.WriteFile(path+".4", []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := OpenWith(path, Options{MaxBytes: 4096, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(path + ".4"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rotated file beyond Keep stays: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const total, asleep = 200, 60
	errDone := errors.New("done")
	followed := make(chan error, 1)
	started, resume := make(chan struct{}), make(chan struct{})
	got := make(chan int, total)
	go func() {
		next := 0
		followed <- l.ReadFollow(ctx, Filter{}, 0, func(e Entry) error {
			if e.Detail == "start" {
				close(started)
				<-resume // asleep while the file is rotated more than once
				return nil
			}
			if e.Detail != strconv.Itoa(next) {
				return fmt.Errorf("followed %s, want %d", e.Detail, next)
			}
			got <- next
			next++
			if next == total {
				return errDone
			}
			return nil
		})
	}()
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "start"})
	<-started
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	for i := range total {
		if i == asleep {
			l.mu.Lock()
			rotations := l.gen - gen
			l.mu.Unlock()
			if rotations < 2 || rotations > 3 {
				t.Fatalf("%d rotations while the follower slept; the test wants 2 or 3", rotations)
			}
			close(resume)
		}
		record(t, l, Entry{User: "ann", Action: ActionExec, Detail: strconv.Itoa(i), Argv: []string{strings.Repeat("x", 100)}})
		if i >= asleep { // in step: the follower wakes across each rotation
			for n := -1; n != i; {
				select {
				case n = <-got:
				case err := <-followed:
					if err != errDone || i != total-1 {
						t.Fatalf("follower stopped at %d: %v", i, err)
					}
					followed <- err
					n = i
				}
			}
		}
	}
	if err := <-followed; err != errDone {
		t.Errorf("follower: %v", err)
	}
	for _, p := range []string{path, path + ".1", path + ".2", path + ".3"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() > 4096 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", p, fi, err)
		}
	}
	if _, err := os.Stat(path + ".4"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("more than Keep rotated files: %v", err)
	}
	es, skipped, err := l.Read(Filter{}, 0)
	if err != nil || skipped != 0 || len(es) < 40 || es[len(es)-1].Detail != strconv.Itoa(total-1) {
		t.Fatalf("Read: %d entries, %d skipped, %v", len(es), skipped, err)
	}
	first, _ := strconv.Atoi(es[0].Detail)
	for i, e := range es {
		if e.Detail != strconv.Itoa(first+i) {
			t.Fatalf("Read across files: entry %d is %s, want %d", i, e.Detail, first+i)
		}
	}
	last, _, _ := l.Read(Filter{}, 3)
	if got := strings.Join(details(last), " "); got != "197 198 199" {
		t.Errorf("last 3: %q", got)
	}
	// Reopened, the Log goes on with the sizes it finds.
	l.Close()
	l, err = OpenWith(path, Options{MaxBytes: 4096, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 30 {
		record(t, l, Entry{User: "ann", Action: ActionExec, Argv: []string{strings.Repeat("x", 100)}})
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 4096 {
		t.Errorf("after reopening: %v, %v", fi, err)
	}
}

// TestAuditSuppressedFlushed: when a person stops after a flood, the count
// of their refusals not recorded is written once a token is back, with no
// further record to carry it; on one session, it names the session.
func TestAuditSuppressedFlushed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := OpenWith(path, Options{RefusalRate: 20, RefusalBurst: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 10 {
		record(t, l, Entry{User: "ben", UID: 7, Action: ActionSleep, Session: "aaaa1111", SessionName: "web", Owner: "ann", Error: "needs operator"})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		es, _, _ := l.Read(Filter{Session: "web"}, 0)
		if len(es) == 3 {
			s := es[2]
			if s.Action != ActionSuppressed || s.Suppressed != 8 || s.User != "ben" || s.UID != 7 || s.Owner != "ann" ||
				!strings.Contains(s.Detail, "8 refusals") || !strings.Contains(s.Detail, "sleep 8") {
				t.Fatalf("the count: %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no count of the refusals not recorded: %+v", es)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A negative rate records every refusal.
	l2, err := OpenWith(filepath.Join(t.TempDir(), "a.jsonl"), Options{RefusalRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for range 100 {
		record(t, l2, Entry{User: "ben", UID: 7, Action: ActionSleep, Error: "no"})
	}
	if es, _, _ := l2.Read(Filter{}, 0); len(es) != 100 {
		t.Fatalf("no limit: %d recorded", len(es))
	}
}
