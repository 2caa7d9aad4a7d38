package decisionlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
	f, err := os.OpenFile(filepath.Join(dir, "s1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"session":"s1","request_id":"old","model":"` + strings.Repeat("x", 3<<20) + "\"}\n{damaged\n")
	f.Close()
	d.Record(Entry{Session: "s1", RequestID: "3", Status: 200})

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
