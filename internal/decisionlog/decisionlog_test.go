package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRecordRead(t *testing.T) {
	d, err := OpenDir(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Record(Entry{Session: "s1", RequestID: fmt.Sprint(i), Status: 200})
		}()
	}
	wg.Wait()
	d.Record(Entry{Session: "", RequestID: "x"})
	d.Record(Entry{Session: "../evil", RequestID: "x"})
	all, err := d.Read("s1", 0)
	if err != nil || len(all) != 50 {
		t.Fatalf("%d %v", len(all), err)
	}
	last, _ := d.Read("s1", 5)
	if len(last) != 5 || last[4].RequestID != all[49].RequestID {
		t.Fatalf("tail wrong: %v", last)
	}
	if _, err := d.Read("../x", 0); err == nil {
		t.Fatal("path traversal accepted")
	}
	if e, err := d.Read("nobody", 0); err != nil || e != nil {
		t.Fatal(e, err)
	}
	fi, _ := os.Stat(filepath.Join(d.path, "s1.jsonl"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if err := d.Remove("s1"); err != nil {
		t.Fatal(err)
	}
	if e, _ := d.Read("s1", 0); len(e) != 0 {
		t.Fatal("not removed")
	}
}

// TestBoxFieldsCannotHideTheLog: a box chooses the model and tool-result
// ids of its requests and the names it asks the egress proxy for. Huge
// ones are cut when recorded, so every line stays short; and a line too
// long to read (as an older paddock could write) is skipped, with the
// entries after it read, instead of ending the read with an error.
func TestBoxFieldsCannotHideTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = strings.Repeat("é", 600)
	}
	d.Record(Entry{Session: "s1", RequestID: "1", Status: 200})
	d.Record(Entry{Session: "s1", RequestID: "2", Model: strings.Repeat("m", 2<<20), Host: strings.Repeat("h", 1<<20), ToolResultIDs: ids})
	if ids[0] != strings.Repeat("é", 600) {
		t.Fatal("Record wrote to the caller's slice")
	}
	d.Flush() // the lines so far, then an older paddock's below them
	f, err := os.OpenFile(filepath.Join(dir, "s1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"session":"s1","request_id":"old","model":"` + strings.Repeat("x", 3<<20) + "\"}\n{damaged\n")
	f.Close()
	d.Record(Entry{Session: "s1", RequestID: "3", Status: 200})
	d.Flush()

	raw, _ := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
	for i, l := range strings.Split(string(raw), "\n") {
		if len(l) > 64<<10 && !strings.Contains(l, `"old"`) {
			t.Fatalf("line %d is %d bytes long", i, len(l))
		}
	}
	all, err := d.Read("s1", 0)
	if err != nil || len(all) != 3 || all[2].RequestID != "3" {
		t.Fatalf("read %d entries, %v; want 1, 2 and 3", len(all), err)
	}
	e := all[1]
	if len(e.Model) > fieldMax || !strings.HasSuffix(e.Model, "…") || len(e.Host) > fieldMax ||
		len(e.ToolResultIDs) != idsMax || len(e.ToolResultIDs[0]) > fieldMax || !utf8.ValidString(e.ToolResultIDs[0]) {
		t.Fatalf("not cut: model %d bytes, host %d, %d ids of %d bytes", len(e.Model), len(e.Host), len(e.ToolResultIDs), len(e.ToolResultIDs[0]))
	}
}

// fileLines is the request ids in the session's part being written, as
// the file holds them now (nothing flushed first).
func fileLines(t *testing.T, d *Dir, session string) []string {
	t.Helper()
	raw, err := os.ReadFile(d.file(session))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e Entry
		if l != "" && json.Unmarshal([]byte(l), &e) == nil {
			ids = append(ids, e.RequestID)
		}
	}
	return ids
}

// TestPendingLinesAreWritten: lines are written in batches (see
// flushDelay), and each way out of the buffer writes them: the timer by
// itself, a batch grown to flushMax, Release, Close, and any read.
func TestPendingLinesAreWritten(t *testing.T) {
	open := func(delay time.Duration) *Dir {
		d, err := OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		d.delay = delay
		t.Cleanup(func() { d.Close() })
		return d
	}
	rec := func(d *Dir, s, id string) { d.Record(Entry{Time: time.Now(), Session: s, RequestID: id, Status: 200}) }

	// By itself, within the delay: no read, no release.
	d := open(20 * time.Millisecond)
	rec(d, "s1", "a")
	rec(d, "s2", "b")
	deadline := time.Now().Add(10 * time.Second)
	for len(fileLines(t, d, "s1")) != 1 || len(fileLines(t, d, "s2")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pending lines not written by the timer: %v %v", fileLines(t, d, "s1"), fileLines(t, d, "s2"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec(d, "s1", "c") // the timer arms again after it fired
	for len(fileLines(t, d, "s1")) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a line after the first batch was not written: %v", fileLines(t, d, "s1"))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// With a delay that never comes: each other way.
	d = open(time.Hour)
	rec(d, "s1", "1")
	if got := fileLines(t, d, "s1"); len(got) != 0 {
		t.Fatalf("written at once: %v (the test's delay is an hour)", got)
	}
	d.Release("s1")
	if got := fileLines(t, d, "s1"); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("after Release: %v", got)
	}
	rec(d, "s1", "2")
	if es, err := d.Read("s1", 0); err != nil || len(es) != 2 {
		t.Fatalf("Read: %d entries, %v", len(es), err)
	}
	big := strings.Repeat("x", 200)
	for i := 0; len(fileLines(t, d, "s1")) == 2; i++ {
		if i > flushMax/len(big)+1 {
			t.Fatalf("%d lines of over %d bytes are pending, past flushMax", i, len(big))
		}
		d.Record(Entry{Time: time.Now(), Session: "s1", RequestID: "big", Reason: big})
	}
	rec(d, "s2", "3")
	rec(d, "s1", "4")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileLines(t, d, "s2"); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("after Close, s2: %v", got)
	}
	if got := fileLines(t, d, "s1"); got[len(got)-1] != "4" {
		t.Fatalf("after Close, s1 ends with %v", got[len(got)-1])
	}
}

// TestRemoveDropsPending: a removed session's pending lines are not
// written afterwards into a file of its name.
func TestRemoveDropsPending(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d.delay = 10 * time.Millisecond
	d.Record(Entry{Time: time.Now(), Session: "s1", RequestID: "1"})
	if err := d.Remove("s1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	d.Close()
	if _, err := os.Stat(d.file("s1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a removed session's log is back: %v", err)
	}
}
