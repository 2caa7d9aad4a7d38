package decisionlog

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestFullDisk: on a full disk a write fails and is reported, entries
// written before stay readable, and once space is freed new entries are
// readable again (a line torn by the full disk does not swallow the next).
func TestFullDisk(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Missing(t, "mount a tmpfs: "+err.Error())
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	d, err := OpenDir(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var mu sync.Mutex
	var errs []error
	d.OnError = func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	filler := filepath.Join(dir, "filler")
	os.WriteFile(filler, bytes.Repeat([]byte("f"), 60<<10), 0o600)
	const sess = "0123456789ab"
	reason := string(bytes.Repeat([]byte("r"), 300))
	for i := 0; i < 100; i++ {
		d.Record(Entry{Time: time.Now(), Session: sess, Decision: "forwarded", Reason: reason, Status: i})
	}
	if len(errs) == 0 {
		t.Fatal("no error reported on a full disk")
	}
	before, err := d.Read(sess, 0)
	if err != nil || len(before) == 0 || len(before) == 100 {
		t.Fatalf("before freeing: %d entries, %v", len(before), err)
	}
	for i, e := range before {
		if e.Status != i {
			t.Fatalf("entry %d has status %d", i, e.Status)
		}
	}
	os.Remove(filler)
	d.Record(Entry{Time: time.Now(), Session: sess, Decision: "forwarded", Status: 1000})
	after, err := d.Read(sess, 0)
	if err != nil || len(after) != len(before)+1 || after[len(after)-1].Status != 1000 {
		t.Fatalf("after freeing: %d entries (had %d), %v", len(after), len(before), err)
	}
	t.Logf("%d entries kept, %d write errors reported, e.g. %v", len(before), len(errs), errs[0])
}
