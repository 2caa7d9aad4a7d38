// Package sandboxtest is the conformance suite every sandbox backend
// passes: the lifecycle (create, start, exec, stop, start again with the
// home volume intact, remove, nothing left behind) and the isolation probes
// run from inside a real box.
package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Setup is what the suite needs from a backend's test.
type Setup struct {
	Backend sandbox.Backend
	// Image for CreateOptions (docker); empty elsewhere.
	Image string
	// Workspace returns a host directory the box may bind at /workspace.
	Workspace func(t *testing.T) string
	// ReadOnlyRoot: the whole root filesystem must be read-only (docker).
	ReadOnlyRoot bool
	// Reopen makes a new backend on the same state, as a restarted Runner
	// does; the suite checks it finds running boxes again.
	Reopen func(t *testing.T) sandbox.Backend
	// PodNetwork: the box has an interface of its cluster's network, which
	// policy outside the box confines (kubernetes). The probes that the box
	// has no interface but lo and no route give way to the guest's pod
	// self-test, which must find that the box reaches nothing.
	PodNetwork bool
	// Runtime for CreateOptions: every box of the suite runs on it, and
	// the isolation probes check its kernel (a gVisor runtime's box must
	// report gVisor's, not the host's). Empty is the backend's default.
	Runtime string
}

// Box is a running box with an open channel, for probes.
type Box struct {
	sandbox.Box
	Client *channel.Client
}

// Env is the environment probes run with.
var Env = []string{"PATH=/opt/paddock/bin:/opt/claude/bin:/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir, "LANG=C.UTF-8"}

// Run runs a command in the box and returns stdout, stderr and the exit code.
func (b *Box) Run(t testing.TB, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	p, err := b.Client.Exec(channel.ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: Env, Dir: sandbox.WorkspaceDir, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	code, err := p.Wait()
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return out.String(), errb.String(), code
}

// Connect opens a channel to a running box.
func Connect(t testing.TB, be sandbox.Backend, id string) *channel.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := be.Connect(ctx, id)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	cl, err := channel.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Ping(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return cl
}

// StartBox creates and starts a box for a fresh session and connects.
func StartBox(t testing.TB, s Setup, session string, limits sandbox.Limits, workspace string) *Box {
	t.Helper()
	ctx := context.Background()
	bx, err := s.Backend.Create(ctx, sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime, Limits: limits, Workspace: workspace})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = s.Backend.Remove(context.Background(), bx.ID, sandbox.RemoveOptions{}) })
	if bx, err = s.Backend.Start(ctx, bx.ID); err != nil {
		t.Fatalf("start: %v", err)
	}
	b := &Box{Box: bx, Client: Connect(t, s.Backend, bx.ID)}
	t.Cleanup(func() { b.Client.Close() })
	return b
}

// objectsOf lists the backend's objects of one session.
func objectsOf(t testing.TB, be sandbox.Backend, session string) []sandbox.Object {
	t.Helper()
	all, err := be.List(context.Background())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var out []sandbox.Object
	for _, o := range all {
		if o.Session == session {
			out = append(out, o)
		}
	}
	return out
}

func uniqueSession(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// Run runs the whole suite.
func Run(t *testing.T, s Setup) {
	t.Run("Lifecycle", func(t *testing.T) { lifecycle(t, s) })
	t.Run("Isolation", func(t *testing.T) { isolation(t, s) })
	t.Run("Limits", func(t *testing.T) { limits(t, s) })
	t.Run("Workspace", func(t *testing.T) { workspace(t, s) })
	t.Run("WorkspaceHostCode", func(t *testing.T) { workspaceHostCode(t, s) })
	t.Run("WorkspaceGitAllowList", func(t *testing.T) { workspaceGitAllowList(t, s) })
	t.Run("WorkspaceGitWorktree", func(t *testing.T) { workspaceGitWorktree(t, s) })
	t.Run("WorkspaceRefused", func(t *testing.T) { workspaceRefused(t, s) })
	t.Run("CloneOrigin", func(t *testing.T) { cloneOrigin(t, s) })
	t.Run("KeepVolumeAndPrune", func(t *testing.T) { keepVolume(t, s) })
	t.Run("ReadoptAfterRestart", func(t *testing.T) { readopt(t, s) })
	t.Run("GuestSocketSymlink", func(t *testing.T) { guestSocketSymlink(t, s) })
	if _, ok := s.Backend.(sandbox.Freezer); ok {
		t.Run("FreezeAndThawTwice", func(t *testing.T) { freezeTwice(t, s) })
	}
	if _, ok := s.Backend.(sandbox.Waiter); ok {
		t.Run("WaitForTheEnd", func(t *testing.T) { waitForTheEnd(t, s) })
	}
}

// freezeTwice: a Freezer's Freeze of a frozen box and Thaw of a thawed one
// succeed (someone else may have done it first: docker pause and unpause
// by hand), and the box is frozen, then running, as asked; a frozen box
// stopped meanwhile thaws to a conflict, not another error.
func freezeTwice(t *testing.T, s Setup) {
	ctx := context.Background()
	fz := s.Backend.(sandbox.Freezer)
	b := StartBox(t, s, uniqueSession("freeze"), sandbox.Limits{}, "")
	for i := range 2 {
		if err := fz.Freeze(ctx, b.ID); err != nil {
			t.Fatalf("freeze %d: %v", i+1, err)
		}
	}
	if _, _, err := b.Client.Ping(time.Now().Add(time.Second)); err == nil {
		t.Fatal("a frozen box's guest answered")
	}
	for i := range 2 {
		if err := fz.Thaw(ctx, b.ID); err != nil {
			t.Fatalf("thaw %d: %v", i+1, err)
		}
	}
	if out, _, code := b.Run(t, "echo thawed"); code != 0 || out != "thawed\n" {
		t.Fatalf("after the thaws: %d %q", code, out)
	}
	// A frozen box stopped from outside (docker stop, a daemon restart)
	// has nothing to thaw: a conflict, as any box that is not running.
	if err := fz.Freeze(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Backend.Stop(ctx, b.ID, sandbox.StopOptions{Timeout: time.Second}); err != nil {
		t.Fatalf("stop a frozen box: %v", err)
	}
	if err := fz.Thaw(ctx, b.ID); err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("thaw of a stopped box: %v, want nil or a conflict", err)
	}
	if err := s.Backend.Remove(ctx, b.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// guestSocketSymlink: a box that puts a symlink at its own guest socket
// path, or in place of the directory that holds it, pointing at a socket on
// the host, never gets the Runner connected there. (An absolute symlink
// under /proc/<pid>/root resolves against the host's root: a backend that
// dialled that path as is would connect, as root, wherever the box says.)
func guestSocketSymlink(t *testing.T, s Setup) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "guest.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var hits atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	b := StartBox(t, s, uniqueSession("symlink"), sandbox.Limits{}, "")
	sockDir := filepath.Dir(sandbox.GuestSocket)
	for _, plant := range []struct{ name, script string }{
		{"socket", "rm -f " + sandbox.GuestSocket + " && ln -s " + filepath.Join(dir, "guest.sock") + " " + sandbox.GuestSocket},
		{"directory", "mv " + sockDir + " " + sockDir + ".old && ln -s " + dir + " " + sockDir},
	} {
		if out, errOut, code := b.Run(t, plant.script); code != 0 {
			// Docker's /run/paddock is a mount of its own, which the box
			// cannot move.
			t.Logf("%s: the box cannot put its symlink there: %d %s%s", plant.name, code, out, errOut)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		conn, err := s.Backend.Connect(ctx, b.ID)
		cancel()
		if err == nil {
			if cl, err := channel.NewClient(conn); err == nil {
				if _, _, err := cl.Ping(time.Now().Add(3 * time.Second)); err == nil {
					t.Errorf("%s: a guest answered through the box's symlink", plant.name)
				}
				cl.Close()
			} else {
				conn.Close()
			}
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("%s: the host socket behind the box's symlink got %d connections", plant.name, n)
		}
	}
}

// readopt: a box started by one backend instance keeps running and is
// found, connected to and removed by a new instance on the same state.
func readopt(t *testing.T, s Setup) {
	if s.Reopen == nil {
		t.Fatal("Setup.Reopen is required")
	}
	ctx := context.Background()
	session := uniqueSession("adopt")
	b := StartBox(t, s, session, sandbox.Limits{}, "")
	b.Run(t, `echo before > /tmp/mark; sleep 300 >/dev/null 2>&1 &`)
	if err := b.Client.Listen("127.0.0.1:4999", "x", time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The old Runner vanishes without closing anything.
	be2 := s.Reopen(t)
	got, err := be2.Inspect(ctx, b.ID)
	if err != nil || got.State != sandbox.StateRunning || got.Session != session {
		t.Fatalf("restarted backend sees %+v, %v", got, err)
	}
	nb := &Box{Box: got, Client: Connect(t, be2, b.ID)}
	defer nb.Client.Close()
	out, _, code := nb.Run(t, `cat /tmp/mark; pgrep -c sleep`)
	if code != 0 || out != "before\n1\n" {
		t.Fatalf("the box did not keep its state across the restart: %d %q", code, out)
	}
	// The new channel takes the box's listening address over.
	if err := nb.Client.Listen("127.0.0.1:4999", "x", time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("re-listen: %v", err)
	}
	if err := be2.Remove(ctx, b.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNothingLeft(t, be2, session)
}

func lifecycle(t *testing.T, s Setup) {
	ctx := context.Background()
	be := s.Backend
	session := uniqueSession("life")
	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	if bx.State != sandbox.StateCreated || bx.Session != session || bx.Backend != be.Name() {
		t.Fatalf("created box %+v", bx)
	}
	if _, err := be.Create(ctx, sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second box for a session: %v", err)
	}
	if _, err := be.Create(ctx, sandbox.CreateOptions{Session: "Bad Name", Image: s.Image, Runtime: s.Runtime}); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("bad session: %v", err)
	}
	kinds := map[sandbox.ObjectKind]bool{}
	for _, o := range objectsOf(t, be, session) {
		if o.Labels[sandbox.LabelManaged] != "1" {
			t.Fatalf("object without the managed label: %+v", o)
		}
		kinds[o.Kind] = true
	}
	if !kinds[sandbox.KindBox] || !kinds[sandbox.KindVolume] {
		t.Fatalf("List misses the box or the volume: %v", kinds)
	}
	if _, err := be.Connect(ctx, bx.ID); err == nil {
		t.Fatal("connected to a box that never started")
	}
	if bx, err = be.Start(ctx, bx.ID); err != nil || bx.State != sandbox.StateRunning {
		t.Fatalf("start: %+v %v", bx, err)
	}
	if again, err := be.Start(ctx, bx.ID); err != nil || again.State != sandbox.StateRunning {
		t.Fatalf("second start: %v", err)
	}
	b := &Box{Box: bx, Client: Connect(t, be, bx.ID)}
	out, _, code := b.Run(t, `echo hello > "$HOME/kept.txt" && id -u && pwd && exit 3`)
	if code != 3 || out != fmt.Sprintf("%d\n%s\n", sandbox.BoxUID, sandbox.WorkspaceDir) {
		t.Fatalf("exec: code %d out %q", code, out)
	}
	// A program written to /tmp runs: toolchains put what they build
	// there (go test's test binaries, say).
	if out, errs, code := b.Run(t, `d=$(mktemp -d) && cp /bin/sh "$d/sh" && "$d/sh" -c 'echo ran'`); code != 0 || out != "ran\n" {
		t.Fatalf("a program in /tmp: code %d out %q %s", code, out, errs)
	}
	// A second, concurrent channel works too (a restarted Runner opens a new one).
	c2 := Connect(t, be, bx.ID)
	c2.Close()
	b.Client.Close()

	if err := be.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := be.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateStopped {
		t.Fatalf("after stop: %+v %v", got, err)
	}
	if err := be.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if c, err := be.Connect(cctx, bx.ID); err == nil {
		c.Close()
		t.Fatal("connected to a stopped box")
	}
	cancel()
	if bx, err = be.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	b = &Box{Box: bx, Client: Connect(t, be, bx.ID)}
	out, _, code = b.Run(t, `cat "$HOME/kept.txt"`)
	if code != 0 || out != "hello\n" {
		t.Fatalf("home volume lost across stop/start: %d %q", code, out)
	}
	b.Client.Close()
	if err := be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := be.Inspect(ctx, bx.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("inspect removed box: %v", err)
	}
	waitNothingLeft(t, be, session)
}

// waitNothingLeft: no labelled object of the session remains.
func waitNothingLeft(t testing.TB, be sandbox.Backend, session string) {
	t.Helper()
	var left []sandbox.Object
	for i := 0; i < 100; i++ {
		if left = objectsOf(t, be, session); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("left behind: %+v", left)
}

func keepVolume(t *testing.T, s Setup) {
	ctx := context.Background()
	be := s.Backend
	session := uniqueSession("keep")
	b := StartBox(t, s, session, sandbox.Limits{}, "")
	b.Run(t, `echo kept > "$HOME/note"`)
	b.Client.Close()
	if err := be.Remove(ctx, b.ID, sandbox.RemoveOptions{KeepVolume: true}); err != nil {
		t.Fatal(err)
	}
	var vol *sandbox.Object
	for _, o := range objectsOf(t, be, session) {
		switch o.Kind {
		case sandbox.KindVolume:
			o := o
			vol = &o
		case sandbox.KindBox:
			t.Fatalf("box left after remove: %+v", o)
		}
	}
	if vol == nil {
		t.Fatal("the kept volume is gone")
	}
	// A new box of the same session finds the home it left.
	b2 := StartBox(t, s, session, sandbox.Limits{}, "")
	if out, _, _ := b2.Run(t, `cat "$HOME/note"`); out != "kept\n" {
		t.Fatalf("kept volume not reused: %q", out)
	}
	b2.Client.Close()
	if err := be.Remove(ctx, b2.ID, sandbox.RemoveOptions{KeepVolume: true}); err != nil {
		t.Fatal(err)
	}
	// prune's way: remove every object of the session by List.
	for _, o := range objectsOf(t, be, session) {
		if err := be.RemoveObject(ctx, o); err != nil {
			t.Fatalf("remove %+v: %v", o, err)
		}
	}
	waitNothingLeft(t, be, session)
}

// WorkspaceOwner owns the workspaces OwnedWorkspace makes: a user that is
// neither root nor any box's.
const WorkspaceOwner = 4321
