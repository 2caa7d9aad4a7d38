package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestBoltFullDisk fills a small filesystem under the store: the failing
// Put says the disk is full, every Put acknowledged before it is still
// there after a reopen, and once space is freed Puts work again.
func TestBoltFullDisk(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Missing(t, "mount a tmpfs: "+err.Error())
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	p := filepath.Join(dir, "p.db")
	s, err := OpenBolt(p)
	if err != nil {
		t.Fatal(err)
	}
	// Leave little room, so the store itself hits the wall.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, bytes.Repeat([]byte("f"), 700<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("v"), 4<<10)
	acked := 0
	var putErr error
	for i := 0; i < 1000; i++ {
		if putErr = s.Put("sessions", fmt.Sprintf("k%04d", i), val); putErr != nil {
			break
		}
		acked++
	}
	if putErr == nil {
		t.Fatal("1000 puts of 4 KiB fitted in 1 MiB")
	}
	if !strings.Contains(putErr.Error(), "no space left on device") {
		t.Fatalf("the full-disk error does not say so: %v", putErr)
	}
	t.Logf("%d puts acknowledged, then: %v", acked, putErr)
	if err := s.Close(); err != nil {
		t.Logf("close on a full disk: %v", err)
	}
	s, err = OpenBolt(p)
	if err != nil {
		t.Fatalf("reopen after the disk filled: %v", err)
	}
	defer s.Close()
	kvs, err := s.List("sessions")
	if err != nil || len(kvs) < acked {
		t.Fatalf("after reopen: %d of %d acknowledged records, %v", len(kvs), acked, err)
	}
	for i := 0; i < acked; i++ {
		if v, err := s.Get("sessions", fmt.Sprintf("k%04d", i)); err != nil || !bytes.Equal(v, val) {
			t.Fatalf("record %d lost or changed: %v", i, err)
		}
	}
	os.Remove(filler)
	if err := s.Put("sessions", "after", val); err != nil {
		t.Fatalf("put after space was freed: %v", err)
	}
}
