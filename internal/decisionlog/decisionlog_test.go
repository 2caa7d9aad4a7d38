package decisionlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
