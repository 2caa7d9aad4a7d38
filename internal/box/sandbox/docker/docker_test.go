package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestSpecHardened checks the one container builder, field by field.
func TestSpecHardened(t *testing.T) {
	b := &Backend{cfg: Config{Dir: "/var/lib/paddock/docker", TmpSize: 1 << 30, Owner: "o1"}}
	ws := t.TempDir()
	// On gVisor: the network namespace Docker makes, with its loopback
	// (gVisor's netstack copies what it has: nothing else), and a host
	// task limit that counts gVisor's own tasks (runtimes.GVisorPids).
	for _, tc := range []struct {
		workspace, runtime string
		clone              bool
	}{{"", "runc", false}, {ws, "runc", false}, {ws, "runc", true}, {"", "runsc", false}, {ws, "runsc", false}} {
		workspace, cl, gv := tc.workspace, tc.clone, tc.runtime == "runsc"
		s, err := b.containerSpec(sandbox.CreateOptions{Session: "s1", Workspace: workspace, Clone: cl, Runtime: tc.runtime, Limits: sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPUs: 1.5}}, "img")
		if workspace != "" && os.Geteuid() != 0 {
			// Only a root Runner can make the workspace's idmapped view.
			if !errdefs.Is(err, errdefs.ErrForbidden) {
				t.Fatalf("a workspace without root: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if e := s.Config.Entrypoint; len(e) < 3 || e[1] != "guest" || e[2] != "--setid-guard" {
			t.Fatalf("the guest does not load the setuid guard: %q", e)
		}
		h, c := s.Host, s.Config
		pids := int64(100)
		if gv {
			pids = 2*100 + 64
		}
		if h.NetworkMode != "none" || c.NetworkDisabled == gv || !h.ReadonlyRootfs || h.Privileged ||
			len(h.CapDrop) != 1 || h.CapDrop[0] != "ALL" || len(h.CapAdd) != 0 ||
			len(h.SecurityOpt) != 1 || h.SecurityOpt[0] != "no-new-privileges:true" ||
			c.User != "1000:1000" || h.Runtime != tc.runtime || h.Init == nil || *h.Init ||
			h.Memory != 1<<30 || h.MemorySwap != 1<<30 || h.NanoCPUs != 1.5e9 || h.PidsLimit == nil || *h.PidsLimit != pids ||
			!strings.HasPrefix(h.Tmpfs["/tmp"], "rw,nosuid,nodev") || h.Tmpfs["/run/paddock"] == "" ||
			len(h.Binds) != 0 || h.PidMode != "" || h.IpcMode != "private" || h.UTSMode != "" || h.UsernsMode != "" ||
			len(h.Devices) != 0 || c.Labels[sandbox.LabelManaged] != "1" || c.Labels[sandbox.LabelSession] != "s1" || c.Labels[sandbox.LabelOwner] != "o1" {
			t.Fatalf("spec not hardened: %+v\n%+v", h, c)
		}
		var home, origin bool
		for _, m := range h.Mounts {
			if strings.Contains(m.Source, "docker.sock") || strings.Contains(m.Source, "containerd") {
				t.Fatalf("daemon socket mounted: %+v", m)
			}
			switch m.Target {
			case sandbox.HomeDir:
				home = m.Type == mount.TypeVolume
			case "/etc/resolv.conf":
				if !m.ReadOnly {
					t.Fatal("resolv.conf writable")
				}
			case sandbox.WorkspaceDir:
				// Docker binds paddock's own mount point of the workspace,
				// recursively (the read-only host code on top must come
				// along); the workspace itself is in a label. A clone box's
				// /workspace is its session's volume, as with no workspace.
				src := filepath.Join(b.cfg.Dir, "workspaces", "s1")
				own := workspace == "" || cl
				if own && (m.Type != mount.TypeVolume || m.Source != wsVolume("s1")) || !own && (m.Type != mount.TypeBind || m.Source != src || m.ReadOnly || m.BindOptions != nil && m.BindOptions.NonRecursive) {
					t.Fatalf("workspace mount %+v", m)
				}
				if workspace != "" && c.Labels[labelWorkspace] != ws {
					t.Fatalf("workspace label %q", c.Labels[labelWorkspace])
				}
			case sandbox.OriginDir:
				// Only a clone box: paddock's mount point, where Start puts
				// the repository's git directory, bound read-only.
				if !cl || m.Type != mount.TypeBind || m.Source != filepath.Join(b.cfg.Dir, "workspaces", "s1") || !m.ReadOnly {
					t.Fatalf("origin mount %+v (clone %v)", m, cl)
				}
				origin = true
			default:
				t.Fatalf("unexpected mount %+v", m)
			}
		}
		if !home {
			t.Fatal("home is not a named volume")
		}
		if origin != cl || (c.Labels[labelClone] == "1") != cl {
			t.Fatalf("clone %v: origin bound %v, label %q", cl, origin, c.Labels[labelClone])
		}
		if cl && c.Labels[labelUnsafeHostCode] != "" {
			t.Fatalf("a clone box labelled %s", labelUnsafeHostCode)
		}
	}
	if _, err := b.containerSpec(sandbox.CreateOptions{Session: "s1", Clone: true}, "img"); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a clone of no repository: %v", err)
	}
	toRun := filepath.Join(t.TempDir(), "innocent")
	if err := os.Symlink("/run", toRun); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/", "/var/run", "/run", "/proc", "/etc", "relative", "/var/lib/docker/volumes", toRun} {
		if _, err := b.containerSpec(sandbox.CreateOptions{Session: "s1", Workspace: bad}, "img"); !errdefs.Is(err, errdefs.ErrForbidden) && !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("workspace %q accepted: %v", bad, err)
		}
	}
}

func TestConformance(t *testing.T) { conformance(t, "") }

// TestConformanceGVisor: the whole suite again, every box on gVisor's
// runsc as registered by `make deps` (the daemon's runtime "runsc", asked
// for by its family word): the same walls, probes and lifecycle, a box
// kernel that is gVisor's, and the channel through docker exec.
func TestConformanceGVisor(t *testing.T) { conformance(t, "gvisor") }

func conformance(t *testing.T, runtime string) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	cfg := Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(t), "docker"), Owner: testenv.UniqueOwner(t)}
	open := func(t *testing.T) sandbox.Backend {
		b, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b := open(t)
	if runtime != "" && !slices.Contains(b.Capabilities(context.Background()).Runtimes, "runsc") {
		testenv.Missing(t, "the Docker daemon has no runtime runsc; `make deps` builds and registers it")
	}
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend:      b,
		Reopen:       open,
		ReadOnlyRoot: true,
		Runtime:      runtime,
		Workspace: func(t *testing.T) string {
			return sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
		},
	})
}

// TestWorkspaceOwnMount: as root, Docker binds paddock's own mount point of
// a host workspace, made from a descriptor when the box starts; it holds the
// workspace while the box runs and is gone, unmounted, once the box is
// removed.
func TestWorkspaceOwnMount(t *testing.T) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	dir := filepath.Join(testenv.TraversableTempDir(t), "docker")
	be, err := New(context.Background(), Config{Image: img, Dir: dir, Owner: testenv.UniqueOwner(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	os.WriteFile(filepath.Join(ws, "mark"), []byte("here"), 0o644)
	ctx := context.Background()
	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: "ownmount", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	if _, err := be.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "workspaces", "ownmount")
	if b, err := os.ReadFile(filepath.Join(mp, "mark")); err != nil || string(b) != "here" {
		t.Fatalf("the mount point does not hold the workspace: %q %v", b, err)
	}
	if err := be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Fatalf("the mount point is left after the box: %v", err)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), mp) {
		t.Fatalf("still mounted at %s", mp)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "mark")); err != nil || string(b) != "here" {
		t.Fatalf("the workspace itself lost its file: %q %v", b, err)
	}
}

// TestMissingImage: a box of an image the daemon lacks is refused with the
// command that builds one, before any volume is made.
func TestMissingImage(t *testing.T) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	cli.Close()
	be, err := New(context.Background(), Config{Image: "paddock-test/no-such-image:1", Dir: filepath.Join(testenv.TraversableTempDir(t), "docker"), Owner: testenv.UniqueOwner(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	_, err = be.Create(context.Background(), sandbox.CreateOptions{Session: "noimage"})
	if !errdefs.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "paddock image build") {
		t.Fatalf("a missing image: %v", err)
	}
	objs, err := be.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Session == "noimage" {
			t.Fatalf("left behind: %+v", o)
		}
	}
}

// TestImageOfAnotherPaddock: the box image built by this paddock's image
// code is accepted by a backend that wants its version, and refused, with
// the command that rebuilds it, before any volume is made, by a backend of
// another paddock version or another pinned Claude Code.
func TestImageOfAnotherPaddock(t *testing.T) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	ins, err := cli.ImageInspect(context.Background(), img)
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	labels := ins.Config.Labels
	if !strings.HasPrefix(labels[sandbox.LabelBase], "sha256:") || labels[sandbox.LabelPaddockVersion] == "" {
		t.Fatalf("the box image's labels: %v", labels)
	}
	for _, c := range []struct {
		cfg  Config
		want string // "" accepted, else the command the refusal names
	}{
		{Config{PaddockVersion: labels[sandbox.LabelPaddockVersion], ClaudeVersion: labels[sandbox.LabelClaudeVersion]}, ""},
		{Config{PaddockVersion: "v0.0.0-another"}, "paddock image build --tag " + imagetest.Tag},
	} {
		c.cfg.Image, c.cfg.Dir, c.cfg.Owner = imagetest.Tag, filepath.Join(testenv.TraversableTempDir(t), "docker"), testenv.UniqueOwner(t)
		be, err := New(context.Background(), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		bx, err := be.Create(context.Background(), sandbox.CreateOptions{Session: "otherpaddock"})
		if c.want == "" {
			if err != nil {
				t.Fatalf("%+v: %v", c.cfg, err)
			}
			if err := be.Remove(context.Background(), bx.ID, sandbox.RemoveOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "`"+c.want+"`") {
			t.Fatalf("%+v: got %v, want a conflict naming `%s`", c.cfg, err, c.want)
		}
		objs, err := be.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 0 {
			t.Fatalf("left behind: %+v", objs)
		}
	}
}

// TestCheckImage: an image of an older paddock, or whose tag names another
// Claude Code than it carries, is refused with the command that rebuilds it.
func TestCheckImage(t *testing.T) {
	cur := strconv.Itoa(sandbox.GuestProtocol)
	base := "sha256:" + strings.Repeat("ab", 32)
	good := func(claude, paddock string) map[string]string {
		return map[string]string{labelImage: "1", sandbox.LabelGuestProtocol: cur, sandbox.LabelClaudeVersion: claude,
			sandbox.LabelBase: base, sandbox.LabelPaddockVersion: paddock}
	}
	with := func(m map[string]string, k, v string) map[string]string {
		c := map[string]string{}
		for a, b := range m {
			c[a] = b
		}
		if v == "" {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	ok := good("2.1.328", "v1.2.0")
	for _, c := range []struct {
		ref     string
		labels  map[string]string
		cfg     Config
		command string // the build command the refusal names; "" when accepted
	}{
		{"paddock/box:claude-2.1.328", ok, Config{}, ""},
		{"paddock/box:claude-2.1.328", ok, Config{PaddockVersion: "v1.2.0", ClaudeVersion: "2.1.328"}, ""},
		{"my/box:latest", ok, Config{ClaudeVersion: "2.1.328"}, ""},
		{"my/box:latest", good("2.1.300", "v1.2.0"), Config{ClaudeVersion: "2.1.328"}, "paddock image build --tag my/box:latest"},
		{"localhost:5000/box:claude-2.1.328", ok, Config{}, ""},
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelBase, "debian@sha256:"+strings.Repeat("0", 64)), Config{}, ""},
		// Before the guest protocol label, or an older one.
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelGuestProtocol, ""), Config{}, "paddock image build"},
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelGuestProtocol, "1"), Config{}, "paddock image build"},
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelGuestProtocol, "x"), Config{}, "paddock image build"},
		// Not paddock's at all.
		{"debian:bookworm", map[string]string{}, Config{}, "paddock image build --tag debian:bookworm"},
		{"debian:bookworm", nil, Config{}, "paddock image build --tag debian:bookworm"},
		// A tag that lies about its Claude Code.
		{"paddock/box:claude-2.1.329", ok, Config{}, "paddock image build --claude-version 2.1.329"},
		// A base by tag: not pinned.
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelBase, "debian:bookworm"), Config{}, "paddock image build"},
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelBase, ""), Config{}, "paddock image build"},
		// Another paddock's guest.
		{"paddock/box:claude-2.1.328", ok, Config{PaddockVersion: "v1.3.0"}, "paddock image build"},
		{"paddock/box:claude-2.1.328", with(ok, sandbox.LabelPaddockVersion, ""), Config{PaddockVersion: "v1.3.0"}, "paddock image build"},
	} {
		err := (&Backend{cfg: c.cfg}).checkImage(c.ref, c.labels)
		if c.command == "" {
			if err != nil {
				t.Errorf("%s %v: %v", c.ref, c.labels, err)
			}
			continue
		}
		if err == nil || !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "`"+c.command+"`") {
			t.Errorf("%s %v: got %v, want a conflict naming `%s`", c.ref, c.labels, err, c.command)
		}
	}
}

// TestTwoChannels: as root with the local daemon, a channel goes straight
// to the guest's socket and makes no exec in the container; the exec path
// (a remote daemon's, or a Runner that is not root) still works, through
// `paddock guest bridge`, and a pid that is not the container's own is
// never dialled.
func TestTwoChannels(t *testing.T) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	b, err := New(context.Background(), Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(t), "docker"), Owner: testenv.UniqueOwner(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if !b.direct {
		t.Fatal("root with the local daemon's unix socket, yet the direct channel is off")
	}
	s := sandboxtest.Setup{Backend: b, ReadOnlyRoot: true}
	box := sandboxtest.StartBox(t, s, fmt.Sprintf("chan-%d", time.Now().UnixNano()%1e9), sandbox.Limits{}, "")
	execs := func() int {
		res, err := cli.ContainerInspect(context.Background(), box.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Container.ExecIDs)
	}
	if out, _, code := box.Run(t, "echo direct"); code != 0 || out != "direct\n" {
		t.Fatalf("over the direct channel: %d %q", code, out)
	}
	if n := execs(); n != 0 {
		t.Fatalf("the direct channel made %d execs in the container", n)
	}

	b.direct = false
	cl := sandboxtest.Connect(t, b, box.ID)
	defer cl.Close()
	bridged := &sandboxtest.Box{Box: box.Box, Client: cl}
	if out, _, code := bridged.Run(t, "echo bridged"); code != 0 || out != "bridged\n" {
		t.Fatalf("over the exec channel: %d %q", code, out)
	}
	if n := execs(); n != 1 {
		t.Fatalf("the exec channel made %d execs, want 1 (the bridge)", n)
	}
	b.direct = true

	// A cached pid that is not the container's (here: this test's own
	// process) is refused, not dialled.
	b.forget(box.ID)
	b.pmu.Lock()
	b.procs[box.ID] = guestProc{pid: os.Getpid(), start: 1}
	b.pmu.Unlock()
	if g, err := b.guestOf(context.Background(), box.ID); err != nil || g.pid == os.Getpid() {
		t.Fatalf("a stale cached pid was used: %+v %v", g, err)
	}
	if _, err := b.guestOf(context.Background(), "paddock-no-such-box"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a missing box: %v", err)
	}
	// After a stop, Connect says the box does not run.
	if err := b.Stop(context.Background(), box.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(context.Background(), box.ID); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("connect to a stopped box: %v", err)
	}
}

// TestCloneOfNoRepository: a clone of a directory that is not a
// repository's main worktree (no .git, or a .git that is a file) is
// refused at Create, with what to do, before any volume is made.
func TestCloneOfNoRepository(t *testing.T) {
	testenv.Root(t)
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	cli.Close()
	be, err := New(context.Background(), Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(t), "docker"), Owner: testenv.UniqueOwner(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	none := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	worktree := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	if err := os.WriteFile(filepath.Join(worktree, ".git"), []byte("gitdir: /elsewhere/.git/worktrees/w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{none: "run git init there", worktree: "main worktree"} {
		_, err := be.Create(context.Background(), sandbox.CreateOptions{Session: "norepo", Workspace: dir, Clone: true})
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a clone of %s: %v, want an invalid argument saying %q", dir, err, want)
		}
	}
	objs, err := be.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("left behind: %+v", objs)
	}
	if _, err := os.Stat(filepath.Join(be.cfg.Dir, "workspaces", "norepo")); !os.IsNotExist(err) {
		t.Fatalf("a mount point was made: %v", err)
	}
}
