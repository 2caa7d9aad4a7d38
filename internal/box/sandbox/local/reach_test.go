package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestUnreachableStateDir: a state directory below a directory others
// may not search (mktemp -d's 0700, /root) is refused when the backend
// is made, naming that directory and the chmod that fixes it, instead of
// every box dying at start with a bare conflict.
func TestUnreachableStateDir(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	parent := filepath.Join(testenv.TraversableTempDir(t), "private")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	guest, _ := os.Executable()
	_, err := New(Config{Root: filepath.Join(parent, "state", "local"), GuestBinary: guest})
	if !errdefs.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "chmod o+x "+parent) {
		t.Fatalf("a state dir below a 0700 directory: %v", err)
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Root: filepath.Join(parent, "state", "local"), GuestBinary: guest}); err != nil {
		t.Fatalf("after chmod o+x: %v", err)
	}
	// A Claude Code binary others may not run is named too.
	bin := filepath.Join(parent, "claude")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700)
	if _, err := New(Config{Root: filepath.Join(parent, "state", "local"), GuestBinary: guest, ClaudeBinary: bin}); err == nil || !strings.Contains(err.Error(), "run "+bin) {
		t.Fatalf("a claude binary for root only: %v", err)
	}
}

// TestStoppedWhileConnectingSaysWhy: a box that dies as it starts is an
// error with what its start printed, not a bare conflict.
func TestStoppedWhileConnectingSaysWhy(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	dir := testenv.TraversableTempDir(t)
	guest := filepath.Join(dir, "guest")
	if err := os.WriteFile(guest, []byte("#!/bin/sh\necho 'guest: cannot start: no such thing' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	be, err := New(Config{Root: filepath.Join(dir, "local"), GuestBinary: guest})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: "dies"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	if _, err := be.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	_, err = be.Connect(ctx, bx.ID)
	if err == nil || !strings.Contains(err.Error(), "cannot start: no such thing") {
		t.Fatalf("connect to a box that died: %v", err)
	}
	// Once the box is surely gone, Connect fails before it dials: that
	// path says why as well.
	r, err := be.load(bx.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500 && alive(r.PID, r.PIDStart); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	_, err = be.Connect(ctx, bx.ID)
	if err == nil || !strings.Contains(err.Error(), "cannot start: no such thing") || !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("connect to a box long dead: %v", err)
	}
}

// TestTwoStateDirsTwoRanges: two Runners on one host (two state
// directories) claim different uid ranges, so their boxes never share a
// host uid, even when one's boxes are asleep (no process shows the uid);
// a state directory opened again keeps its range; a gone one frees it.
func TestTwoStateDirsTwoRanges(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	guest, _ := os.Executable()
	dir := testenv.TraversableTempDir(t)
	open := func(name string) *Backend {
		t.Helper()
		b, err := New(Config{Root: filepath.Join(dir, name, "local"), GuestBinary: guest})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := open("a"), open("b")
	if a.cfg.UIDBase == b.cfg.UIDBase || a.cfg.UIDBase < b.cfg.UIDBase+RangeSize && b.cfg.UIDBase < a.cfg.UIDBase+RangeSize {
		t.Fatalf("overlapping ranges: %d and %d", a.cfg.UIDBase, b.cfg.UIDBase)
	}
	ctx := context.Background()
	bxA, err := a.Create(ctx, sandbox.CreateOptions{Session: "one"}) // never started: no process holds its uid
	if err != nil {
		t.Fatal(err)
	}
	bxB, err := b.Create(ctx, sandbox.CreateOptions{Session: "two"})
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := a.load(bxA.ID)
	rb, _ := b.load(bxB.ID)
	if ra.UID == rb.UID {
		t.Fatalf("two state directories gave uid %d to two boxes", ra.UID)
	}
	if again := open("a"); again.cfg.UIDBase != a.cfg.UIDBase {
		t.Fatalf("reopened, a's range moved: %d -> %d", a.cfg.UIDBase, again.cfg.UIDBase)
	}
	a.Remove(ctx, bxA.ID, sandbox.RemoveOptions{})
	b.Remove(ctx, bxB.ID, sandbox.RemoveOptions{})
	if err := os.RemoveAll(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if c := open("c"); c.cfg.UIDBase != b.cfg.UIDBase {
		t.Logf("b's range %d was not reused (another test may hold it): c got %d", b.cfg.UIDBase, c.cfg.UIDBase)
	}
}
