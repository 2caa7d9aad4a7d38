package local

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

func TestConformance(t *testing.T) { conformance(t, "") }

// TestConformanceGVisor: the whole suite again, every box on gVisor's
// runsc run directly (the pinned build `make deps GVISOR=1` makes), asked
// for by its family word: the same walls, probes and lifecycle, a box
// kernel that is gVisor's, and the channel through the host directory
// bound at /run/paddock.
func TestConformanceGVisor(t *testing.T) { conformance(t, "gvisor") }

func conformance(t *testing.T, runtime string) {
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
	b := open(t)
	if runtime != "" && !slices.Contains(b.Capabilities(context.Background()).Runtimes, runtimes.Runsc) {
		testenv.Missing(t, "no runsc at "+runtimes.RunscPath()+"; `make deps GVISOR=1` builds it")
	}
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend: b,
		Reopen:  open,
		Runtime: runtime,
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
