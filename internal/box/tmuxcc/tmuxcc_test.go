package tmuxcc

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func readAll(t testing.TB, r io.Reader) ([]Event, []error) {
	rd := NewReader(r)
	var evs []Event
	var errs []error
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs, errs
		}
		var pe *Error
		if errors.As(err, &pe) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

// TestGolden parses real and hand-made control-mode output
// (testdata/*.txt) and compares the events with testdata/*.golden.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		evs, errs := readAll(t, bytes.NewReader(in))
		if len(errs) != 0 {
			t.Errorf("%s: %v", f, errs)
		}
		var got bytes.Buffer
		enc := json.NewEncoder(&got)
		for _, ev := range evs {
			// Pane output as readable text, not base64.
			type golden struct {
				Event
				Data string `json:"data,omitempty"`
			}
			g := golden{Event: ev}
			if ev.Data != nil {
				g.Data = strconv.Quote(string(ev.Data))
			}
			enc.Encode(g)
		}
		golden := strings.TrimSuffix(f, ".txt") + ".golden"
		if *update {
			os.WriteFile(golden, got.Bytes(), 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update once)", err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: events differ from %s:\n%s", f, golden, got.String())
		}
	}
}

func TestReplyAndOutput(t *testing.T) {
	evs, errs := readAll(t, strings.NewReader("%begin 1 5 0\nsome output\n%end 1 4 0\nmore\n%end 1 5 0\n%output %1 caf\\303\\251 \\134 done\n%exit detached\n"))
	if len(errs) != 0 || len(evs) != 3 {
		t.Fatalf("%v %v", evs, errs)
	}
	if evs[0].Kind != "reply" || evs[0].Number != 5 || strings.Join(evs[0].Lines, "|") != "some output|%end 1 4 0|more" {
		t.Fatalf("reply %+v", evs[0])
	}
	if evs[1].Pane != "%1" || string(evs[1].Data) != "café \\ done" {
		t.Fatalf("output %+v %q", evs[1], evs[1].Data)
	}
	if evs[2].Kind != "exit" || evs[2].Reason != "detached" {
		t.Fatalf("exit %+v", evs[2])
	}
}

func TestBadLines(t *testing.T) {
	for _, line := range []string{
		"plain text", "%", "%output", "%output %x data", "%output 3 data", "%output %1 bad\\9escape", "%output %1 trunc\\01",
		"%output %1 \\777", "%begin 1 2", "%begin a b c", "%end -1 2 3", "%layout-change", "%layout-change 1 x", "%window-pane-changed @1 5",
		"%extended-output %1 x : hi", "%extended-output %1 5", "%pane-mode-changed 4", "%Weird", "%session-window-changed @1",
	} {
		if ev, err := ParseLine(line); err == nil {
			t.Errorf("%q parsed as %+v", line, ev)
		}
	}
	// A bad line is an error for that line only; the reader goes on.
	evs, errs := readAll(t, strings.NewReader("%output %1 ok\ngarbage\n%output %1 again\n"))
	if len(evs) != 2 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "line 2") {
		t.Fatalf("%v %v", evs, errs)
	}
	// A reply that never ends, and a line cut at the end of the stream.
	if _, errs := readAll(t, strings.NewReader("%begin 1 2 0\nx\n")); len(errs) != 1 || !strings.Contains(errs[0].Error(), "never ends") {
		t.Fatalf("unterminated reply: %v", errs)
	}
	if _, errs := readAll(t, strings.NewReader("%output %1 half")); len(errs) != 1 {
		t.Fatalf("cut line: %v", errs)
	}
	// Overlong lines are refused, not buffered without end.
	long := "%output %1 " + strings.Repeat("x", MaxLine+10) + "\n%exit\n"
	evs, errs = readAll(t, strings.NewReader(long))
	if len(errs) != 1 || len(evs) != 1 || evs[0].Kind != "exit" {
		t.Fatalf("long line: %d events %v", len(evs), errs)
	}
	// A reply of many long lines stops at MaxReplyBytes, before its
	// lines fill memory: one error, with the reply's line number.
	var big strings.Builder
	big.WriteString("%begin 1 2 0\n")
	line := strings.Repeat("y", MaxLine-1) + "\n"
	for big.Len() < MaxReplyBytes+2*MaxLine {
		big.WriteString(line)
	}
	r := NewReader(strings.NewReader(big.String()))
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "reply larger than") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("huge reply: %v", err)
	}
}

func TestEscapesRoundTrip(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	got, err := DecodeOutput(EncodeOutput(all))
	if err != nil || !bytes.Equal(got, all) {
		t.Fatalf("%v", err)
	}
}

func FuzzReader(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte("%begin 1 1 0\n%end 1 1 0\n%output %0 \\033[1m\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := NewReader(bytes.NewReader(data))
		for i := 0; i < 100000; i++ {
			ev, err := rd.Next()
			if err == io.EOF {
				return
			}
			var pe *Error
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			if err == nil && ev.Kind == "" {
				t.Fatal("event without a kind")
			}
		}
	})
}

func FuzzEscapes(f *testing.F) {
	f.Add([]byte("a\\b\x1b[0m\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeOutput(EncodeOutput(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip: %v", err)
		}
		DecodeOutput(string(data))
	})
}
