package local

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

func TestConformance(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	cfg := Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"), GuestBinary: testenv.GuestBinary(t)}
	open := func(t *testing.T) sandbox.Backend {
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend: open(t),
		Reopen:  open,
		Workspace: func(t *testing.T) string {
			return sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
		},
	})
}

// TestConnectGivesUpOnAMissingSocket: a box that deletes its guest socket
// (its /run is its own) and keeps its guest running does not hold Connect
// — and so the Runner's start-up re-adoption, which every session waits
// for — past connectWait, even with a context that never ends.
func TestConnectGivesUpOnAMissingSocket(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	be, err := New(Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"), GuestBinary: testenv.GuestBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := sandboxtest.StartBox(t, sandboxtest.Setup{Backend: be}, "nosock", sandbox.Limits{}, "")
	if out, errOut, code := b.Run(t, "rm "+sandbox.GuestSocket); code != 0 {
		t.Fatalf("rm: %d %s%s", code, out, errOut)
	}
	defer func(d time.Duration) { connectWait = d }(connectWait)
	connectWait = 300 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		c, err := be.Connect(context.Background(), b.ID)
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("connected to a box without its socket")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Connect still waits for a socket the box deleted")
	}
}
