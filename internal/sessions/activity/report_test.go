package activity

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodReports and badReports are wire lines; testdata/ holds more of
// both, and they seed the fuzz target.
var goodReports = []string{
	`{"event":"Stop","session_id":"5f0c3a8e-1111-4222-8333-944455556666"}`,
	`{"event":"SessionStart","session_id":"abc","source":"startup"}`,
	`{"event":"SessionEnd","session_id":"abc","reason":"prompt_input_exit"}`,
	`{"event":"Notification","session_id":"abc","notification":"idle_prompt"}`,
	`{"event":"pane-died"}`,
	`{"event":"reaped"}`,
	` {"event":"Stop"} `,
}

var badReports = []string{
	``,
	`null`,
	`[]`,
	`{}`,
	`{"event":"Explode"}`,
	`{"event":"Stop","extra":1}`,
	`{"event":"Stop"}{"event":"Stop"}`,
	`{"event":"Stop","session_id":"../../etc"}`,
	`{"event":"Stop","session_id":"` + strings.Repeat("a", 65) + `"}`,
	`{"event":"SessionStart","source":"Startup"}`,
	`{"event":"SessionStart","source":"a b"}`,
	`{"event":"Stop","reason":"` + strings.Repeat("x", 600) + `"}`,
	`{"event":"Stop","session_id":1}`,
	`{"event":"Stop"`,
}

func TestParseReport(t *testing.T) {
	good, bad := append([]string(nil), goodReports...), append([]string(nil), badReports...)
	for dir, list := range map[string]*[]string{"good": &good, "bad": &bad} {
		files, _ := filepath.Glob(filepath.Join("testdata", "reports", dir, "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			*list = append(*list, strings.TrimSuffix(string(b), "\n"))
		}
	}
	for _, s := range good {
		r, err := ParseReport([]byte(s))
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if _, err := r.Marshal(); err != nil {
			t.Errorf("%s: parsed but does not marshal: %v", s, err)
		}
	}
	for _, s := range bad {
		if r, err := ParseReport([]byte(s)); err == nil || !errors.Is(err, ErrBadReport) {
			t.Errorf("%q accepted as %+v (%v)", s, r, err)
		}
	}
}

func TestFromHook(t *testing.T) {
	in := `{"session_id":"5f0c3a8e-1111-4222-8333-944455556666","transcript_path":"/x","cwd":"/workspace","hook_event_name":"SessionStart","source":"resume","tool_input":{"command":"` + strings.Repeat("y", 100000) + `"}}`
	r, err := FromHook(EventSessionStart, []byte(in))
	if err != nil || r.SessionID != "5f0c3a8e-1111-4222-8333-944455556666" || r.Source != "resume" {
		t.Fatalf("%+v %v", r, err)
	}
	// Hostile or broken input: the fields that do not fit are left out.
	r, err = FromHook(EventNotification, []byte(`{"session_id":"a b","notification_type":"`+strings.Repeat("z", 40)+`","reason":{"x":1}}`))
	if err != nil || r != (Report{Event: EventNotification}) {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := FromHook(EventStop, []byte("not json")); err != nil || r != (Report{Event: EventStop}) {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"pane-died", "reaped", "Explode", ""} {
		if _, err := FromHook(bad, nil); err == nil {
			t.Errorf("hook event %q accepted", bad)
		}
	}
}

// FuzzParseReport: the parser of box input never panics, and what it
// accepts survives a round trip and fits the wire bound.
func FuzzParseReport(f *testing.F) {
	for _, s := range append(append([]string(nil), goodReports...), badReports...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		if err != nil {
			return
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatalf("accepted %q but cannot marshal it: %v", b, err)
		}
		r2, err := ParseReport(out)
		if err != nil || r2 != r {
			t.Fatalf("round trip of %q: %+v %v", b, r2, err)
		}
	})
}

// FuzzFromHook: whatever Claude Code (or anything in the box) passes a
// hook, the report it makes is valid on the wire.
func FuzzFromHook(f *testing.F) {
	f.Add("Stop", []byte(`{"session_id":"abc","hook_event_name":"Stop"}`))
	f.Add("SessionStart", []byte(`{"session_id":"abc","source":"clear"}`))
	f.Add("Notification", []byte(`{"notification_type":"idle_prompt"}`))
	f.Add("SessionEnd", []byte(`{"reason":7}`))
	f.Fuzz(func(t *testing.T, event string, input []byte) {
		r, err := FromHook(event, input)
		if err != nil {
			return
		}
		b, err := r.Marshal()
		if err != nil {
			t.Fatalf("FromHook(%q, %q) = %+v, which does not marshal: %v", event, input, r, err)
		}
		if _, err := ParseReport(b); err != nil {
			t.Fatalf("FromHook(%q, %q) = %s, refused: %v", event, input, b, err)
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			t.Fatal("not JSON")
		}
	})
}
