package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	if runtime != "" {
		needRunsc(t, b)
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

// TestGVisorViewsOnlyRoot: a gVisor box's idmapped views (its volume's,
// its host workspace's) show the box's files as uid 1000, the box user,
// to every process on the host that reaches them by path, not only to the
// sandbox. A host account with that uid must find nothing there: its
// home's files, its socket directory and the owner's workspace stay out
// of its reach (the bwrap box's views map to the box's own host uid,
// which no account has).
func TestGVisorViewsOnlyRoot(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "setpriv")
	be := gvisorBackend(t)
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	if err := os.WriteFile(filepath.Join(ws, "owners.txt"), []byte("the owner's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	uid, gid := ownerOf(t, ws)
	if err := os.Chown(filepath.Join(ws, "owners.txt"), uid, gid); err != nil {
		t.Fatal(err)
	}
	b := sandboxtest.StartBox(t, sandboxtest.Setup{Backend: be, Runtime: runtimes.Runsc}, "views", sandbox.Limits{}, ws)
	if out, errOut, code := b.Run(t, "echo secret > ~/s && chmod 600 ~/s && cat /workspace/owners.txt"); code != 0 || out != "the owner's\n" {
		t.Fatalf("in the box: %d %q %s", code, out, errOut)
	}
	for _, p := range []string{
		filepath.Join(be.volView(b.ID), "home", "s"),
		filepath.Join(be.volView(b.ID), "run", "guest.sock"),
		filepath.Join(be.wsMountPoint(b.ID), "owners.txt"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v (the test's path is wrong)", p, err)
		}
		out, err := exec.Command("setpriv", "--reuid", strconv.Itoa(sandbox.BoxUID), "--regid", strconv.Itoa(sandbox.BoxUID), "--clear-groups", "stat", "-c", "%u", p).CombinedOutput()
		if err == nil {
			t.Errorf("host uid %d reaches %s (owner as it sees it: %s)", sandbox.BoxUID, p, out)
		}
	}
}

func ownerOf(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// TestGVisorRemoveFindsAnUnsavedSandbox: a Runner that dies after runsc
// started a box but before it saved the box's pid leaves a record without
// one. rm must still end that sandbox (by its cgroup and runsc's state)
// and leave no process and no mount of it behind: the sandbox would
// otherwise go on writing the owner's workspace, seen by nothing.
func TestGVisorRemoveFindsAnUnsavedSandbox(t *testing.T) {
	testenv.Root(t)
	be := gvisorBackend(t)
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	var onDisk *record // the record as a Runner that died as runsc started would leave it
	runscStarted = func(id string) {
		var err error
		if onDisk, err = be.load(id); err != nil {
			t.Error(err)
		}
	}
	defer func() { runscStarted = func(string) {} }()
	b := sandboxtest.StartBox(t, sandboxtest.Setup{Backend: be, Runtime: runtimes.Runsc}, "unsaved", sandbox.Limits{}, ws)
	b.Client.Close()
	if onDisk == nil || onDisk.Cgroup == nil || len(onDisk.Cgroup.Dirs) == 0 || onDisk.PID != 0 {
		t.Fatalf("the record as runsc started: %+v; want its cgroup and no pid", onDisk)
	}
	if err := be.save(onDisk); err != nil { // the Runner died there
		t.Fatal(err)
	}
	if err := be.Remove(context.Background(), b.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if c, err := os.ReadFile(p); err == nil && strings.Contains(string(c), b.ID) {
			t.Errorf("%s still runs: %q", p, strings.ReplaceAll(string(c), "\x00", " "))
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, b.ID) {
			t.Errorf("a mount is left: %s", l)
		}
	}
	if _, err := os.Stat(be.boxDir(b.ID)); !os.IsNotExist(err) {
		t.Errorf("the box's directory: %v", err)
	}
}

// gvisorBackend is a local backend that offers runsc (the pinned build).
func gvisorBackend(t *testing.T) *Backend {
	t.Helper()
	be, err := New(Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"), GuestBinary: testenv.GuestBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	needRunsc(t, be)
	return be
}

// needRunsc: the test needs be to offer runsc.
func needRunsc(t *testing.T, be sandbox.Backend) {
	t.Helper()
	if !slices.Contains(be.Capabilities(context.Background()).Runtimes, runtimes.Runsc) {
		testenv.Missing(t, "no runsc at "+runtimes.RunscPath()+"; `make deps GVISOR=1` builds it")
	}
}
