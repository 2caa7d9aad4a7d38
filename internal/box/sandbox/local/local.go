// Package local is the `local` backend: bubblewrap (bwrap) namespaces, no
// daemon. A box is a bwrap process tree with new user, pid, ipc, uts, net
// (loopback only), mount and cgroup namespaces; the guest is its PID 1.
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
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/box/seccomp"
	"golang.org/x/sys/unix"
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
	return sandbox.Capabilities{Name: Name, MemoryLimit: av["memory"], PidsLimit: av["pids"], CPULimit: av["cpu"],
		SurvivesRunnerRestart: true, Runtime: runtimes.Bwrap, Runtimes: []string{runtimes.Bwrap}, SameHost: true}
}

// record is box.json.
type record struct {
	ID        string            `json:"id"`
	Session   string            `json:"session"`
	Labels    map[string]string `json:"labels"`
	Created   time.Time         `json:"created"`
	UID       int               `json:"uid"`
	Workspace string            `json:"workspace,omitempty"` // host dir, or "" for the volume's
	// WorkspaceReal is Workspace with the symlinks of its path resolved
	// when the box was made (the owner chose them). Each start binds it
	// through a descriptor opened without following any symlink, so one
	// that appears on the path later — another box may write a parent
	// directory — is refused, never followed.
	WorkspaceReal string `json:"workspace_real,omitempty"`
	// UnsafeHostCode: the host's code paths in the workspace stay writable.
	UnsafeHostCode bool `json:"unsafe_host_code,omitempty"`
	// Clone: the box gets Workspace's git directory read-only at
	// sandbox.OriginDir and its own /workspace (sandbox.CreateOptions.Clone).
	Clone bool `json:"clone,omitempty"`
	// WorkspaceUID is the workspace's owner when the box was made; every
	// mount refuses the directory if it belongs to anyone else by then
	// (0 in records from before it was kept: taken at the next mount).
	WorkspaceUID int            `json:"workspace_uid,omitempty"`
	Limits       sandbox.Limits `json:"limits"`
	Claude       string         `json:"claude,omitempty"` // this box's Claude Code binary, if not the backend's
	Notes        []string       `json:"notes,omitempty"`
	Cgroup       *cgroup.Group  `json:"cgroup,omitempty"`
	// The running instance, if any: the guest's host pid and its start
	// time (to tell it from a recycled pid).
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
}

func (b *Backend) boxDir(id string) string      { return filepath.Join(b.cfg.Root, "boxes", id) }
func (b *Backend) volDir(session string) string { return filepath.Join(b.cfg.Root, "volumes", session) }

func validID(id string) bool {
	if !strings.HasPrefix(id, "pdk-") || len(id) != 16 {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b *Backend) load(id string) (*record, error) {
	if !validID(id) {
		return nil, fmt.Errorf("box %q: %w", id, errdefs.ErrNotFound)
	}
	raw, err := os.ReadFile(filepath.Join(b.boxDir(id), "box.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("box %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("box %s: damaged record: %w", id, err)
	}
	return &r, nil
}

func (b *Backend) save(r *record) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// Not fsynced: after a power loss the box is gone too; what matters is
	// that a crashed Runner never reads a half-written record.
	return atomicfile.WriteNoSync(filepath.Join(b.boxDir(r.ID), "box.json"), raw, 0o600)
}

func (b *Backend) records() ([]*record, error) {
	ents, err := os.ReadDir(filepath.Join(b.cfg.Root, "boxes"))
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range ents {
		if r, err := b.load(e.Name()); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Box, error) {
	if err := sandbox.ValidSession(o.Session); err != nil {
		return sandbox.Box{}, err
	}
	if _, err := runtimes.Choose(Name, o.Runtime, b.Capabilities(ctx).Runtimes, true); err != nil {
		return sandbox.Box{}, err // bwrap is all it offers
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
		UID: uid, Workspace: o.Workspace, WorkspaceReal: wsReal, WorkspaceUID: wsOwner.UID, UnsafeHostCode: o.UnsafeHostCode, Clone: o.Clone, Limits: o.Limits.WithDefaults(), Claude: o.ClaudeBinary}
	dir := b.boxDir(id)
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o711); err != nil {
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

func newID() (string, error) {
	var b [6]byte
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("pdk-%x", b), nil
}

func (b *Backend) box(r *record) sandbox.Box {
	st := sandbox.StateCreated
	if r.PID != 0 {
		st = sandbox.StateStopped
		if alive(r.PID, r.PIDStart) {
			st = sandbox.StateRunning
		}
	}
	return sandbox.Box{ID: r.ID, Session: r.Session, Backend: Name, State: st, Created: r.Created,
		Volume: b.volDir(r.Session), Limits: r.Limits, Notes: r.Notes}
}

// hostProcs maps live (non-zombie) processes in the box uid range to their uid.
func hostProcs(base int) map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		uid := int(fi.Sys().(*syscall.Stat_t).Uid)
		if uid <= base || uid >= base+65536 {
			continue
		}
		if _, ok := startTime(pid); !ok {
			continue // a zombie: already dead, its parent (or init) reaps it
		}
		out[pid] = uid
	}
	return out
}

// hostUIDs is the set of box-range uids that any process on the host runs as.
func hostUIDs(base int) map[int]bool {
	out := map[int]bool{}
	for _, uid := range hostProcs(base) {
		out[uid] = true
	}
	return out
}

// retired lists uids of removed boxes that may still have processes.
func (b *Backend) retired() []int {
	raw, _ := os.ReadFile(filepath.Join(b.cfg.Root, "retired-uids.json"))
	var out []int
	_ = json.Unmarshal(raw, &out)
	return out
}

func (b *Backend) setRetired(uids []int) {
	raw, _ := json.Marshal(uids)
	_ = atomicfile.WriteNoSync(filepath.Join(b.cfg.Root, "retired-uids.json"), raw, 0o600)
}

// startTime reads a process's start time (field 22 of /proc/<pid>/stat).
func startTime(pid int) (uint64, bool) { return sandbox.ProcStartTime(pid) }

func alive(pid int, start uint64) bool {
	st, ok := startTime(pid)
	return ok && st == start
}

// args builds the whole bwrap command line of a box: the one place its
// isolation is decided.
func (b *Backend) args(r *record) []string {
	dir := b.boxDir(r.ID)
	vol := b.volDir(r.Session)
	wsBind := []string{"--bind", filepath.Join(vol, "workspace"), sandbox.WorkspaceDir}
	switch {
	case r.Clone: // the repository's git directory, read-only, for the box's own clone
		wsBind = append(wsBind, "--ro-bind-fd", strconv.Itoa(workspaceFD), sandbox.OriginDir)
	case r.Workspace != "":
		wsBind = []string{"--bind-fd", strconv.Itoa(workspaceFD), sandbox.WorkspaceDir} // see Start
	}
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--uid", strconv.Itoa(sandbox.BoxUID), "--gid", strconv.Itoa(sandbox.BoxUID),
		"--hostname", "paddock",
		"--cap-drop", "ALL",
		"--new-session",
		"--as-pid-1",
		"--info-fd", "4",
		"--seccomp", strconv.Itoa(seccompFD), // no setuid or setgid file (internal/box/seccomp)
		"--clearenv",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib",
	}
	if _, err := os.Stat("/usr/lib64"); err == nil {
		a = append(a, "--symlink", "usr/lib64", "/lib64")
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--tmpfs", "/run",
		"--dir", "/run/paddock",
	)
	for _, f := range []string{"passwd", "group", "hosts", "nsswitch.conf"} {
		a = append(a, "--ro-bind", filepath.Join(dir, "etc", f), "/etc/"+f)
	}
	// What programs need from the host's /etc, read-only. Never resolv.conf.
	for _, p := range []string{"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/terminfo", "/etc/inputrc", "/etc/bash.bashrc", "/etc/profile"} {
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a, b.managedSettingsArgs(dir)...) // paddock's hooks for claude's activity (managed.go)
	a = append(a, "--ro-bind", b.cfg.GuestBinary, "/opt/paddock/bin/paddock")
	if claude := cmp.Or(r.Claude, b.cfg.ClaudeBinary); claude != "" {
		a = append(a, "--ro-bind", claude, "/opt/claude/bin/claude")
	}
	a = append(a,
		"--bind", filepath.Join(vol, "home"), sandbox.HomeDir,
	)
	a = append(a, wsBind...)
	a = append(a,
		"--remount-ro", "/",
		"--chdir", sandbox.WorkspaceDir,
		"--setenv", "HOME", sandbox.HomeDir,
		"--setenv", "USER", sandbox.BoxUser,
		"--setenv", "PATH", "/opt/paddock/bin:/opt/claude/bin:/usr/local/bin:/usr/bin:/bin",
		"--",
		"/opt/paddock/bin/paddock", "guest", "--socket", sandbox.GuestSocket,
	)
	return a
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
	var ws *os.File // the host workspace's view, bound by descriptor (workspaceFD)
	if r.Workspace != "" {
		if ws, err = b.mountWorkspace(r); err != nil {
			return sandbox.Box{}, err
		}
		defer ws.Close()
	}
	filter, err := seccompPipe()
	if err != nil {
		b.unmountWorkspace(r)
		return sandbox.Box{}, err
	}
	defer filter.Close()
	grp, ap := cgroup.Create(r.ID, cgroup.Limits{MemoryBytes: r.Limits.MemoryBytes, Pids: r.Limits.Pids, CPUs: r.Limits.CPUs})
	r.Cgroup, r.Notes = grp, ap.Notes

	// sh waits on fd 3 until bwrap's pid has joined the cgroups, then
	// becomes bwrap: no process of the box ever runs outside its limits.
	gate, gateW, err := os.Pipe()
	if err != nil {
		return sandbox.Box{}, err
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		gate.Close()
		gateW.Close()
		return sandbox.Box{}, err
	}
	argv := append([]string{"-c", `read _ <&3; exec 3<&-; exec "$0" "$@"`, b.cfg.Bwrap}, b.args(r)...)
	cmd := exec.Command("/bin/sh", argv...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{gate, infoW, filter} // fd 3, fd 4, seccompFD
	if ws != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ws) // workspaceFD
	}
	logf, _ := os.OpenFile(filepath.Join(b.boxDir(r.ID), "bwrap.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if logf != nil {
		cmd.Stderr, cmd.Stdout = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(r.UID), Gid: uint32(r.UID)},
		Setsid:     true, // its own session: no signal from the Runner's terminal
	}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Credential = nil // an unprivileged Runner runs boxes as itself
	}
	if err := cmd.Start(); err != nil {
		gate.Close()
		gateW.Close()
		infoR.Close()
		infoW.Close()
		b.unmountWorkspace(r)
		return sandbox.Box{}, fmt.Errorf("start bwrap: %w", err)
	}
	gate.Close()
	infoW.Close()
	go func() { _ = cmd.Wait() }() // reap it while this Runner lives
	if err := grp.Add(cmd.Process.Pid); err != nil {
		r.Notes = append(r.Notes, "limits not applied: cannot join cgroup: "+err.Error())
	}
	gateW.Write([]byte("\n"))
	gateW.Close()

	// bwrap reports the guest's host pid on the info fd.
	info := make(chan int, 1)
	go func() {
		defer infoR.Close()
		var v struct {
			ChildPID int `json:"child-pid"`
		}
		if err := json.NewDecoder(bufio.NewReader(infoR)).Decode(&v); err == nil {
			info <- v.ChildPID
		}
		close(info)
	}()
	var child int
	select {
	case child = <-info:
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	if child == 0 {
		_ = cmd.Process.Kill()
		b.unmountWorkspace(r)
		logb, _ := os.ReadFile(filepath.Join(b.boxDir(r.ID), "bwrap.log"))
		return sandbox.Box{}, fmt.Errorf("bwrap did not start the box: %s", strings.TrimSpace(string(logb)))
	}
	st, _ := startTime(child)
	r.PID, r.PIDStart = child, st
	if err := b.save(r); err != nil {
		return sandbox.Box{}, err
	}
	return b.box(r), nil
}

// connectWait bounds how long Connect waits for a running guest's socket.
var connectWait = 10 * time.Second

// Descriptors bwrap finds the seccomp filter and the host workspace on.
const (
	seccompFD   = 5
	workspaceFD = 6
)

// seccompPipe returns a pipe holding the box's seccomp filter, for bwrap
// to read from seccompFD.
func seccompPipe() (*os.File, error) {
	p, err := seccomp.Program()
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(seccomp.Bytes(p)); err != nil { // a few hundred bytes: the pipe holds them
		r.Close()
		return nil, err
	}
	return r, nil
}

// wsMountPoint is where a box's host workspace view is mounted (in its
// box directory, which no box can write), and wsState its record.
func (b *Backend) wsMountPoint(id string) string { return filepath.Join(b.boxDir(id), "workspace") }
func (b *Backend) wsState(id string) string      { return filepath.Join(b.boxDir(id), "workspace.json") }

// mountWorkspace makes the box's view of its host workspace (wsmount:
// idmapped to the box's uid, host code read-only), or for a clone box the
// read-only view of the repository's git directory (wsmount.MountOrigin),
// and opens it for bwrap.
// The path is the one resolved when the box was made, walked without
// following any symlink; a box made before that resolution was recorded
// gets it now, once.
func (b *Backend) mountWorkspace(r *record) (*os.File, error) {
	if r.WorkspaceReal == "" {
		real, err := filepath.EvalSymlinks(r.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace %s is gone: %v: %w", r.Workspace, err, errdefs.ErrConflict)
		}
		r.WorkspaceReal = real
		if err := b.save(r); err != nil {
			return nil, err
		}
	}
	mp := b.wsMountPoint(r.ID)
	mount := wsmount.Mount
	if r.Clone {
		mount = wsmount.MountOrigin
	}
	own, err := mount(wsmount.Options{Source: r.WorkspaceReal, Target: mp, State: b.wsState(r.ID),
		BoxUID: r.UID, BoxGID: r.UID, UnsafeHostCode: r.UnsafeHostCode, OwnerUID: r.WorkspaceUID, Session: r.Session})
	if err != nil {
		return nil, err
	}
	if r.WorkspaceUID == 0 { // a record from before the owner was kept
		r.WorkspaceUID = own.UID
		if err := b.save(r); err != nil {
			b.unmountWorkspace(r)
			return nil, err
		}
	}
	fd, err := sandbox.OpenNoFollow(unix.AT_FDCWD, mp)
	if err != nil {
		b.unmountWorkspace(r)
		return nil, err
	}
	return os.NewFile(uintptr(fd), mp), nil
}

// unmountWorkspace undoes mountWorkspace: the box has stopped (its own
// mount namespace, which held a copy, is gone with it).
func (b *Backend) unmountWorkspace(r *record) error {
	if r.Workspace == "" {
		return nil
	}
	mp := b.wsMountPoint(r.ID)
	if err := wsmount.Unmount(mp, b.wsState(r.ID)); err != nil {
		return fmt.Errorf("box %s: take its workspace mount off: %w", r.ID, err)
	}
	return nil
}

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
		return nil, fmt.Errorf("box %s is not running%s: %w", id, b.whyStopped(r.ID), errdefs.ErrConflict)
	}
	return sandbox.DialGuest(ctx, id, r.PID, r.PIDStart, connectWait, func() string { return b.whyStopped(r.ID) })
}

// whyStopped is what bwrap said as the box ended, if anything: the last
// lines of its log (a path the box's uid could not reach, a mount it
// could not make), for errors that would otherwise say only "stopped".
func (b *Backend) whyStopped(id string) string {
	raw, err := os.ReadFile(filepath.Join(b.boxDir(id), "bwrap.log"))
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
		return " (bwrap: " + msg + ")"
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
	if r.PID != 0 && alive(r.PID, r.PIDStart) {
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
	if err := b.unmountWorkspace(r); err != nil {
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

// List implements sandbox.Backend: box records, volume directories, and any
// process running as a box uid (what a stuck teardown would leave).
func (b *Backend) List(ctx context.Context) ([]sandbox.Object, error) {
	recs, err := b.records()
	if err != nil {
		return nil, err
	}
	var out []sandbox.Object
	uidSession := map[int]string{}
	for _, r := range recs {
		out = append(out, sandbox.Object{Kind: sandbox.KindBox, ID: r.ID, Session: r.Session, Labels: r.Labels})
		uidSession[r.UID] = r.Session
	}
	vols, _ := os.ReadDir(filepath.Join(b.cfg.Root, "volumes"))
	for _, v := range vols {
		var lab map[string]string
		raw, err := os.ReadFile(filepath.Join(b.cfg.Root, "volumes", v.Name(), "labels.json"))
		if err != nil || json.Unmarshal(raw, &lab) != nil || lab[sandbox.LabelManaged] != "1" {
			continue
		}
		out = append(out, sandbox.Object{Kind: sandbox.KindVolume, ID: v.Name(), Session: lab[sandbox.LabelSession], Labels: lab})
	}
	// Processes: only those of uids this backend gave out (live boxes, and
	// removed boxes until none of their processes is left).
	b.rmu.Lock()
	defer b.rmu.Unlock()
	retired := b.retired()
	for _, u := range retired {
		uidSession[u] = ""
	}
	seen := map[int]bool{}
	for pid, uid := range hostProcs(b.cfg.UIDBase) {
		session, ours := uidSession[uid]
		if !ours {
			continue
		}
		seen[uid] = true
		out = append(out, sandbox.Object{Kind: sandbox.KindProcess, ID: strconv.Itoa(pid), Session: session,
			Labels: map[string]string{sandbox.LabelManaged: "1", "uid": strconv.Itoa(uid)}})
	}
	var keep []int
	for _, u := range retired {
		if seen[u] {
			keep = append(keep, u)
		}
	}
	if len(keep) != len(retired) {
		b.setRetired(keep)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Kind+sandbox.ObjectKind(out[i].ID) < out[j].Kind+sandbox.ObjectKind(out[j].ID)
	})
	return out, nil
}

// RemoveObject implements sandbox.Backend.
func (b *Backend) RemoveObject(ctx context.Context, o sandbox.Object) error {
	switch o.Kind {
	case sandbox.KindBox:
		return b.Remove(ctx, o.ID, sandbox.RemoveOptions{KeepVolume: true})
	case sandbox.KindVolume:
		if err := sandbox.ValidSession(o.ID); err != nil {
			return err
		}
		return os.RemoveAll(b.volDir(o.ID))
	case sandbox.KindProcess:
		pid, err := strconv.Atoi(o.ID)
		if err != nil {
			return fmt.Errorf("process %q: %w", o.ID, errdefs.ErrInvalid)
		}
		err = syscall.Kill(pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	return fmt.Errorf("object kind %q: %w", o.Kind, errdefs.ErrInvalid)
}
