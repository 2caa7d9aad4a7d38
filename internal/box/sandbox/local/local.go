// Package local is the `local` backend: bubblewrap (bwrap) namespaces, no
// daemon. A box is a bwrap process tree with new user, pid, ipc, uts, net
// (loopback only), mount and cgroup namespaces; the guest is its PID 1.
// A box on the runsc runtime is the same layout (layout.go) run by gVisor's
// runsc from an OCI bundle instead (runsc.go says what differs).
//
// Hardening, by construction in args():
//   - bwrap runs as a host uid of its own (UIDBase + slot, never 0) and
//     maps it to uid 1000 in the box, with every capability dropped: box
//     processes are an unprivileged stranger to the host.
//   - The root is an empty tmpfs, remounted read-only after setup; /usr
//     and the few /etc files a program needs are bound read-only. Only the
//     home directory, /workspace, /tmp and /run are writable.
//   - The pinned Claude Code binary and the guest binary are bound
//     read-only under /opt.
//   - No resolver, no /etc/resolv.conf, no interface but lo.
//   - --new-session (no TIOCSTI into the Runner's terminal); no
//     --die-with-parent, so boxes survive a Runner restart.
//   - memory, pids and CPU limits through internal/box/cgroup; the bwrap
//     process joins its cgroups before it execs (it waits on a pipe).
//
// On disk, under Root: boxes/<id>/box.json (the record), boxes/<id>/etc/
// (generated passwd, group, hosts), and volumes/<session>/{home,workspace}.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
)

// Name of this backend.
const Name = "local"

// Config configures the backend.
type Config struct {
	// Root holds boxes and volumes (e.g. <state-dir>/local). Required.
	Root string
	// GuestBinary is the paddock binary to run as the guest (static).
	GuestBinary string
	// ClaudeBinary, if set, is bound read-only at /opt/claude/bin/claude.
	ClaudeBinary string
	// Bwrap is the bwrap program; default "bwrap" on PATH.
	Bwrap string
	// Runsc is gVisor's runsc, for boxes on the runsc runtime; default the
	// pinned build where scripts/gvisor-bin.sh puts it (runtimes.RunscPath),
	// if it is there. Without one, only bwrap is offered.
	Runsc string
	// UIDBase is where the search for this backend's uid range starts
	// (default 200000): New claims, host-wide, the first free range of
	// RangeSize uids at or above it (claimRange), and box n runs as its
	// base+n, so that no two live boxes on the host share a host uid.
	UIDBase int
}

// Backend is the local backend.
type Backend struct {
	cfg Config
	mu  sync.Mutex // serializes create/start/stop/remove bookkeeping
	rmu sync.Mutex // guards retired-uids.json
}

var _ sandbox.Backend = (*Backend)(nil)

// New checks the configuration and that bwrap is present.
func New(cfg Config) (*Backend, error) {
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("local backend: Root must be an absolute path: %w", errdefs.ErrInvalid)
	}
	if cfg.GuestBinary == "" {
		return nil, fmt.Errorf("local backend: no guest binary: %w", errdefs.ErrInvalid)
	}
	if cfg.Bwrap == "" {
		cfg.Bwrap = "bwrap"
	}
	p, err := exec.LookPath(cfg.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("local backend needs bubblewrap (apt-get install bubblewrap): %w", errdefs.ErrUnavailable)
	}
	cfg.Bwrap = p
	cfg.Runsc = runscPath(cfg.Runsc)
	if cfg.UIDBase == 0 {
		cfg.UIDBase = 200000
	}
	for _, d := range []string{cfg.Root, filepath.Join(cfg.Root, "boxes"), filepath.Join(cfg.Root, "volumes"), filepath.Join(cfg.Root, "bin")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("local backend: %w", err)
		}
	}
	// Boxes would die at start, each with a bare "stopped while connecting".
	if err := Reachable([]string{cfg.Root}, []string{cfg.ClaudeBinary}); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	// bwrap runs as the box's uid, which must be able to read the guest:
	// keep a world-readable copy next to the boxes.
	guest := filepath.Join(cfg.Root, "bin", "paddock")
	if err := copyIfChanged(cfg.GuestBinary, guest); err != nil {
		return nil, fmt.Errorf("local backend: install guest binary: %w", err)
	}
	cfg.GuestBinary = guest
	b := &Backend{cfg: cfg}
	recs, err := b.records()
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	if b.cfg.UIDBase, err = claimRange(cfg.UIDBase, cfg.Root, recs); err != nil {
		return nil, err
	}
	return b, nil
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements sandbox.Backend.
func (b *Backend) Capabilities(context.Context) sandbox.Capabilities {
	av := cgroup.Available()
	offered := []string{runtimes.Bwrap}
	if b.cfg.Runsc != "" {
		offered = append(offered, runtimes.Runsc)
	}
	return sandbox.Capabilities{Name: Name, MemoryLimit: av["memory"], PidsLimit: av["pids"], CPULimit: av["cpu"],
		SurvivesRunnerRestart: true, Runtime: runtimes.Bwrap, Runtimes: offered, SameHost: true}
}

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Box, error) {
	if err := sandbox.ValidSession(o.Session); err != nil {
		return sandbox.Box{}, err
	}
	rt, err := runtimes.Choose(Name, o.Runtime, b.Capabilities(ctx).Runtimes, true)
	if err != nil {
		return sandbox.Box{}, err
	}
	if rt == runtimes.Bwrap {
		rt = "" // the default, as in records from before runtimes
	}
	var wsReal string
	var wsOwner wsmount.Owner
	if o.Clone && o.Workspace == "" {
		return sandbox.Box{}, fmt.Errorf("a clone needs the repository it clones (a workspace): %w", errdefs.ErrInvalid)
	}
	if o.Workspace != "" {
		// Refused here, before anything is made: not a directory, a
		// symlink, root's, or a filesystem without idmapped mounts.
		var err error
		if wsReal, wsOwner, err = wsmount.Check(o.Workspace); err != nil {
			return sandbox.Box{}, err
		}
		if err := wsmount.SameOwner(o.Workspace, wsOwner, o.WorkspaceUID); err != nil {
			return sandbox.Box{}, err
		}
		if o.Clone {
			if err := wsmount.CheckOrigin(wsReal); err != nil {
				return sandbox.Box{}, err
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	recs, err := b.records()
	if err != nil {
		return sandbox.Box{}, err
	}
	used := map[int]bool{}
	for _, r := range recs {
		if r.Session == o.Session {
			return sandbox.Box{}, fmt.Errorf("session %s already has box %s: %w", o.Session, r.ID, errdefs.ErrConflict)
		}
		used[r.UID] = true
	}
	// A uid no box of ours has and no process on the host runs as: another
	// Runner on this host (another state directory) may use the same range.
	for u := range hostUIDs(b.cfg.UIDBase) {
		used[u] = true
	}
	b.rmu.Lock()
	for _, u := range b.retired() {
		used[u] = true
	}
	b.rmu.Unlock()
	uid := b.cfg.UIDBase + 1
	for used[uid] {
		uid++
	}
	if uid >= b.cfg.UIDBase+RangeSize {
		return sandbox.Box{}, fmt.Errorf("all %d host uids of this state directory's range (from %d) are in use by boxes or their processes; remove sessions (paddock rm) or prune: %w",
			RangeSize-1, b.cfg.UIDBase+1, errdefs.ErrUnavailable)
	}
	id, err := newID()
	if err != nil {
		return sandbox.Box{}, err
	}
	r := &record{ID: id, Session: o.Session, Labels: sandbox.Labels(o.Session, sandbox.KindBox), Created: time.Now().UTC(),
		UID: uid, Workspace: o.Workspace, WorkspaceReal: wsReal, WorkspaceUID: wsOwner.UID, UnsafeHostCode: o.UnsafeHostCode, Clone: o.Clone, Limits: o.Limits.WithDefaults(), Claude: o.ClaudeBinary, Runtime: rt}
	dir := b.boxDir(id)
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o711); err != nil {
		return sandbox.Box{}, err
	}
	if err := b.guardBoxDir(r); err != nil {
		return sandbox.Box{}, err
	}
	files := map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\n%s:x:%d:%d:paddock:%s:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", sandbox.BoxUser, sandbox.BoxUID, sandbox.BoxUID, sandbox.HomeDir),
		"group":         fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", sandbox.BoxUser, sandbox.BoxUID),
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(content), 0o644); err != nil {
			return sandbox.Box{}, err
		}
	}
	// The session volume: home and an internal workspace, owned by the box uid.
	vol := b.volDir(o.Session)
	if err := os.MkdirAll(vol, 0o711); err != nil {
		return sandbox.Box{}, err
	}
	lab, _ := json.Marshal(sandbox.Labels(o.Session, sandbox.KindVolume))
	if err := os.WriteFile(filepath.Join(vol, "labels.json"), lab, 0o600); err != nil {
		return sandbox.Box{}, err
	}
	for _, sub := range []string{"home", "workspace"} {
		p := filepath.Join(vol, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return sandbox.Box{}, err
		}
		// The volume may be kept from an earlier box with another uid.
		if err := chownTree(p, uid); err != nil {
			return sandbox.Box{}, err
		}
	}
	if err := b.save(r); err != nil {
		return sandbox.Box{}, err
	}
	return b.box(r), nil
}

// copyIfChanged copies src to dst (mode 0755) unless dst has the same size
// and modification time.
func copyIfChanged(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil {
		return err
	}
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() && di.ModTime().Equal(si.ModTime()) {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chtimes(tmp, si.ModTime(), si.ModTime()); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, id string) (sandbox.Box, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.load(id)
	if err != nil {
		return sandbox.Box{}, err
	}
	if r.PID != 0 && alive(r.PID, r.PIDStart) {
		return b.box(r), nil
	}
	if onGVisor(r) {
		return b.startRunsc(ctx, r)
	}
	return b.startBwrap(ctx, r)
}

// connectWait bounds how long Connect waits for a running guest's socket.
var connectWait = 10 * time.Second

// Descriptors bwrap finds the seccomp filter and the host workspace on.
const (
	seccompFD   = 5
	workspaceFD = 6
)

// Connect implements sandbox.Backend. The socket is reached inside the
// guest's root, component by component, following no symlink
// (sandbox.DialInRoot): a box that puts a symlink at its own socket path gets a
// refusal, and the Runner never connects outside the box.
func (b *Backend) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	r, err := b.load(id)
	if err != nil {
		return nil, err
	}
	if r.PID == 0 || !alive(r.PID, r.PIDStart) {
		// A box that died as it started says why here too: this check
		// and DialGuest's race the box's end.
		return nil, fmt.Errorf("box %s is not running%s: %w", id, b.whyStopped(r), errdefs.ErrConflict)
	}
	why := func() string { return b.whyStopped(r) }
	if onGVisor(r) {
		return sandbox.DialGuestIn(ctx, id, b.runDir(r.Session), r.PID, r.PIDStart, connectWait, why)
	}
	return sandbox.DialGuest(ctx, id, r.PID, r.PIDStart, connectWait, why)
}

// whyStopped is what bwrap or runsc said as the box ended, if anything:
// the last lines of its log (a path the box's uid could not reach, a mount
// it could not make), for errors that would otherwise say only "stopped".
func (b *Backend) whyStopped(r *record) string {
	raw, err := os.ReadFile(b.logPath(r))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	if msg := strings.TrimSpace(strings.Join(lines, "; ")); msg != "" {
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		return " (" + cmpRuntime(r) + ": " + msg + ")"
	}
	return ""
}

// Stop implements sandbox.Backend.
func (b *Backend) Stop(ctx context.Context, id string, o sandbox.StopOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.load(id)
	if err != nil {
		return err
	}
	return b.stop(r, o)
}

func (b *Backend) stop(r *record, o sandbox.StopOptions) error {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if r.Cgroup != nil && r.Cgroup.Frozen() {
		_ = r.Cgroup.Freeze(false) // a frozen box ends like any other: its guest must see SIGTERM
	}
	if onGVisor(r) {
		b.stopRunsc(r, o.Timeout)
	} else if r.PID != 0 && alive(r.PID, r.PIDStart) {
		_ = syscall.Kill(r.PID, syscall.SIGTERM) // the guest ends its processes
		deadline := time.Now().Add(o.Timeout)
		for alive(r.PID, r.PIDStart) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(r.PID, r.PIDStart) {
			// PID 1 of a pid namespace dies from SIGKILL sent from outside,
			// and takes every process of the namespace with it.
			_ = syscall.Kill(r.PID, syscall.SIGKILL)
			for i := 0; i < 500 && alive(r.PID, r.PIDStart); i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	if r.Cgroup != nil {
		if err := r.Cgroup.Remove(); err != nil {
			return fmt.Errorf("stop box %s: %w", r.ID, err)
		}
		r.Cgroup = nil
	}
	unmount := b.unmountWorkspace
	if onGVisor(r) {
		unmount = b.unmountRunsc
	}
	if err := unmount(r); err != nil {
		return err
	}
	return b.save(r)
}

// Freeze implements sandbox.Freezer with the box's cgroup v2 freezer.
func (b *Backend) Freeze(ctx context.Context, id string) error { return b.freeze(id, true) }

// Thaw implements sandbox.Freezer.
func (b *Backend) Thaw(ctx context.Context, id string) error { return b.freeze(id, false) }

func (b *Backend) freeze(id string, on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.load(id)
	if err != nil {
		return err
	}
	if r.PID == 0 || !alive(r.PID, r.PIDStart) || r.Cgroup == nil {
		return fmt.Errorf("box %s is not running: %w", id, errdefs.ErrConflict)
	}
	if err := r.Cgroup.Freeze(on); err != nil {
		if errors.Is(err, cgroup.ErrNoFreezer) {
			return fmt.Errorf("box %s: %v; paddock sleep (without --freeze) stops it instead: %w", id, err, errdefs.ErrUnavailable)
		}
		return fmt.Errorf("box %s: %w", id, err)
	}
	return nil
}

// Remove implements sandbox.Backend.
func (b *Backend) Remove(ctx context.Context, id string, o sandbox.RemoveOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.load(id)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := b.stop(r, sandbox.StopOptions{}); err != nil {
		return err
	}
	// Its uid stays ours (and listed) until no process runs as it.
	b.rmu.Lock()
	b.setRetired(append(b.retired(), r.UID))
	b.rmu.Unlock()
	// The workspace's mount point must be an empty directory now: if its
	// mount were still there, RemoveAll would delete the owner's files.
	if err := os.Remove(b.wsMountPoint(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("box %s: its workspace is still mounted (%v); nothing removed: %w", id, err, errdefs.ErrConflict)
	}
	if err := os.Remove(b.volView(id)); err != nil && !errors.Is(err, fs.ErrNotExist) { // the same for a gVisor box's volume
		return fmt.Errorf("box %s: its volume's view is still mounted (%v); nothing removed: %w", id, err, errdefs.ErrConflict)
	}
	if err := os.RemoveAll(b.boxDir(id)); err != nil {
		return err
	}
	if !o.KeepVolume {
		return os.RemoveAll(b.volDir(r.Session))
	}
	return nil
}

// Inspect implements sandbox.Backend.
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Box, error) {
	r, err := b.load(id)
	if err != nil {
		return sandbox.Box{}, err
	}
	bx := b.box(r)
	if bx.State == sandbox.StateRunning && r.WorkspaceReal != "" {
		// A box this process did not start (the Runner restarted): its
		// workspace's git files are carried across again.
		wsmount.Resume(b.wsState(r.ID))
	}
	return bx, nil
}
