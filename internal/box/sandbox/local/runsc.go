// Boxes on gVisor: runsc run directly from an OCI bundle paddock writes
// from the box's layout, no daemon.
//
// What differs from a bwrap box, and why:
//   - The box's system calls are served by gVisor's sentry, a kernel in
//     user space, not by the host's; files reach the sentry through its
//     gofer (--directfs=false, as for Docker: runtimes.GVisorArgs), whose
//     mount namespace holds the workspace's read-only guards.
//   - The sentry and gofer are not the box's host uid, so the session
//     volume is seen through an idmapped view (wsmount.MountVolume: the
//     box's host uid on disk is the box user inside, root's creates are
//     TransientUID's for the instant before the sentry's chown), and a
//     host workspace's view maps the owner to sandbox.BoxUID with
//     RootCreates, as Docker's gVisor boxes do.
//   - The guest's socket directory, /run/paddock, is the volume's run/
//     directory: runsc's --host-uds=create lets the guest make its socket
//     there as a host socket, which the Runner dials through the host
//     directory (sandbox.DialGuestIn), following no symlink. The box can
//     only create sockets (create), never connect to one of the host's.
//   - --network=none: gVisor's own network stack with loopback only.
//   - --ignore-cgroups: the process joins paddock's cgroup before it execs
//     runsc (the same gate as bwrap's), so the sentry, the gofer and every
//     process of the box are inside the limits; the task limit counts
//     gVisor's own threads (runtimes.GVisorPids).
//   - The setuid guard is loaded by the guest inside the box (gVisor
//     enforces seccomp for its processes), as in Docker boxes.
//   - stdio is a file opened O_APPEND (the sentry writes a host file at
//     offsets of its own; O_APPEND makes every write an append).

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"golang.org/x/sys/unix"
)

// onGVisor: box r runs on runsc.
func onGVisor(r *record) bool { return r.Runtime == runtimes.Runsc }

// runscRoot is runsc's state directory for box id. It is the box's own:
// runsc pins an empty network namespace there (a bind mount, null-netns),
// which goes when the box stops (unpinNetNS).
func (b *Backend) runscRoot(id string) string { return filepath.Join(b.boxDir(id), "runsc") }

// unpinNetNS takes off the network namespace runsc pinned in box id's
// state directory (runsc stacks one per concurrent cold start).
func (b *Backend) unpinNetNS(id string) {
	p := filepath.Join(b.runscRoot(id), "null-netns")
	for i := 0; i < 16 && unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW) == nil; i++ {
	}
}

// volView is where a gVisor box's volume is seen through its idmap.
func (b *Backend) volView(id string) string { return filepath.Join(b.boxDir(id), "volume") }

// runDir is the volume's directory bound at /run/paddock in a gVisor box:
// the guest's socket is made there, on the host.
func (b *Backend) runDir(session string) string { return filepath.Join(b.volDir(session), "run") }

// runscFlags are runsc's global flags for box id.
func (b *Backend) runscFlags(id string) []string {
	return append([]string{"--root", b.runscRoot(id), "--network=none", "--host-uds=create", "--ignore-cgroups", "--overlay2=none"}, runtimes.GVisorArgs...)
}

// runsc runs one runsc command (kill, delete) with box id's flags.
func (b *Backend) runsc(ctx context.Context, id string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.cfg.Runsc, append(b.runscFlags(id), args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("runsc %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// OCI runtime spec: the parts paddock writes.
type (
	ociSpec struct {
		Version  string     `json:"ociVersion"`
		Process  ociProcess `json:"process"`
		Root     ociRoot    `json:"root"`
		Hostname string     `json:"hostname"`
		Mounts   []ociMount `json:"mounts"`
		Linux    ociLinux   `json:"linux"`
	}
	ociProcess struct {
		User            ociUser   `json:"user"`
		Args            []string  `json:"args"`
		Env             []string  `json:"env"`
		Cwd             string    `json:"cwd"`
		NoNewPrivileges bool      `json:"noNewPrivileges"`
		Capabilities    ociCaps   `json:"capabilities"`
		Rlimits         []ociRlim `json:"rlimits,omitempty"`
	}
	ociUser struct {
		UID uint32 `json:"uid"`
		GID uint32 `json:"gid"`
	}
	ociCaps struct {
		Bounding    []string `json:"bounding"`
		Effective   []string `json:"effective"`
		Permitted   []string `json:"permitted"`
		Inheritable []string `json:"inheritable"`
		Ambient     []string `json:"ambient"`
	}
	ociRlim struct {
		Type string `json:"type"`
		Hard uint64 `json:"hard"`
		Soft uint64 `json:"soft"`
	}
	ociRoot struct {
		Path     string `json:"path"`
		Readonly bool   `json:"readonly"`
	}
	ociMount struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options,omitempty"`
	}
	ociLinux struct {
		Namespaces []ociNS `json:"namespaces"`
	}
	ociNS struct {
		Type string `json:"type"`
	}
)

// bundle writes box r's OCI bundle (bundle/config.json and an empty,
// read-only rootfs holding the layout's mount points and symlinks) and
// returns its directory.
func (b *Backend) bundle(r *record) (string, error) {
	dir := filepath.Join(b.boxDir(r.ID), "bundle")
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return "", err
	}
	vol := b.volDir(r.Session)
	view := func(src string) string { // the volume through its idmap
		if rel, ok := strings.CutPrefix(src, vol+"/"); ok {
			return filepath.Join(b.volView(r.ID), rel)
		}
		return src
	}
	var mounts []ociMount
	bind := func(src, dst string, ro bool) error {
		mode := "rw"
		if ro {
			mode = "ro"
		}
		mounts = append(mounts, ociMount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", mode, "nosuid", "nodev"}})
		return mountPoint(rootfs, src, dst)
	}
	for _, m := range b.layout(r) {
		var err error
		switch m.kind {
		case mROBind:
			err = bind(view(m.src), m.dst, true)
		case mBind:
			err = bind(view(m.src), m.dst, false)
		case mWorkspace:
			err = bind(b.wsMountPoint(r.ID), m.dst, false)
		case mOrigin:
			err = bind(b.wsMountPoint(r.ID), m.dst, true)
		case mSymlink:
			err = os.Symlink(m.src, filepath.Join(rootfs, m.dst))
		case mProc:
			mounts = append(mounts, ociMount{Destination: m.dst, Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}})
		case mDev:
			mounts = append(mounts,
				ociMount{Destination: m.dst, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
				ociMount{Destination: m.dst + "/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
				ociMount{Destination: m.dst + "/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}})
		case mTmpfs:
			mounts = append(mounts, ociMount{Destination: m.dst, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}})
		case mDir: // /run/paddock: the volume's run directory, where the guest's socket is a host socket
			err = bind(filepath.Join(b.volView(r.ID), "run"), m.dst, false)
		}
		if err != nil {
			return "", fmt.Errorf("box %s: its bundle: %w", r.ID, err)
		}
		if m.kind != mSymlink {
			if err := os.MkdirAll(filepath.Join(rootfs, m.dst), 0o755); err != nil && !errors.Is(err, syscall.ENOTDIR) {
				if _, serr := os.Stat(filepath.Join(rootfs, m.dst)); serr != nil {
					return "", err
				}
			}
		}
	}
	spec := ociSpec{
		Version: "1.0.2",
		Process: ociProcess{
			User: ociUser{UID: sandbox.BoxUID, GID: sandbox.BoxUID},
			// The guest loads the setuid guard before it runs anything.
			Args:            []string{guestPath, "guest", "--socket", sandbox.GuestSocket, "--setid-guard"},
			Env:             []string{"HOME=" + sandbox.HomeDir, "USER=" + sandbox.BoxUser, "PATH=" + boxPath},
			Cwd:             sandbox.WorkspaceDir,
			NoNewPrivileges: true,
			Capabilities:    ociCaps{Bounding: []string{}, Effective: []string{}, Permitted: []string{}, Inheritable: []string{}, Ambient: []string{}},
			Rlimits:         []ociRlim{{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20}},
		},
		Root:     ociRoot{Path: "rootfs", Readonly: true},
		Hostname: "paddock",
		Mounts:   mounts,
		Linux:    ociLinux{Namespaces: []ociNS{{"pid"}, {"ipc"}, {"uts"}, {"mount"}, {"network"}}},
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o600)
}

// mountPoint makes in rootfs the mount point of src at dst: a directory
// for a directory, an empty file for anything else.
func mountPoint(rootfs, src, dst string) error {
	p := filepath.Join(rootfs, dst)
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// guardBoxDir makes a gVisor box's directory root's alone (0700). Its
// idmapped views (the volume's, a host workspace's) show the box's files
// as sandbox.BoxUID to every process that reaches them by path, not only
// to the sandbox, and a host account may have that uid: under a directory
// it cannot enter, it reaches nothing (runsc, its gofer and the Runner are
// root). A bwrap box's directory stays 0711: bwrap runs as the box's uid
// and binds files from it, and its views map to that uid, which no
// account has.
func (b *Backend) guardBoxDir(r *record) error {
	if !onGVisor(r) {
		return nil
	}
	return os.Chmod(b.boxDir(r.ID), 0o700)
}

// startRunsc starts box r on gVisor. The caller holds b.mu.
func (b *Backend) startRunsc(ctx context.Context, r *record) (sandbox.Box, error) {
	if err := b.guardBoxDir(r); err != nil {
		return sandbox.Box{}, err
	}
	// What an earlier start left ends first, before a mount or its run
	// directory is touched: a sandbox whose runsc run died (its pid is the
	// box's) or whose Runner died before its pid was saved.
	b.endSandbox(r)
	if r.Cgroup != nil {
		if err := r.Cgroup.Remove(); err != nil {
			return sandbox.Box{}, fmt.Errorf("box %s: what an earlier start left runs on: %w", r.ID, err)
		}
		r.Cgroup = nil
	}
	fail := func(err error) (sandbox.Box, error) {
		b.unmountRunsc(r)
		return sandbox.Box{}, err
	}
	if r.Workspace != "" {
		ws, err := b.mountWorkspace(r)
		if err != nil {
			return sandbox.Box{}, err
		}
		ws.Close() // runsc binds it by path: the mount point only the Runner writes
	}
	// A run directory of this start's own: nothing the box left there.
	run := b.runDir(r.Session)
	if err := os.RemoveAll(run); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(run, 0o700); err != nil {
		return fail(err)
	}
	if r.Clone { // the mount point of the origin's view, made by the Runner
		if err := os.Mkdir(filepath.Join(run, filepath.Base(sandbox.OriginDir)), 0o700); err != nil {
			return fail(err)
		}
	}
	if err := chownTree(run, r.UID); err != nil {
		return fail(err)
	}
	if err := wsmount.MountVolume(b.volDir(r.Session), b.volView(r.ID), r.UID, sandbox.BoxUID); err != nil {
		return fail(fmt.Errorf("box %s: its volume's view: %w", r.ID, err))
	}
	dir, err := b.bundle(r)
	if err != nil {
		return fail(err)
	}
	grp, ap := cgroup.Create(r.ID, cgroup.Limits{MemoryBytes: r.Limits.MemoryBytes, Pids: runtimes.GVisorPids(r.Limits.Pids), CPUs: r.Limits.CPUs})
	r.Cgroup, r.Notes, r.PID, r.PIDStart = grp, ap.Notes, 0, 0
	// Saved before runsc starts: a Runner that dies before the pid is
	// saved leaves a record whose stop still finds the sandbox (by its
	// cgroup and runsc's state), never one that rm cannot see.
	if err := b.save(r); err != nil {
		return fail(err)
	}
	fail = func(err error) (sandbox.Box, error) { // from here on a sandbox may run
		b.endSandbox(r)
		if r.Cgroup.Remove() == nil {
			r.Cgroup = nil
		}
		b.unmountRunsc(r)
		_ = b.save(r)
		return sandbox.Box{}, err
	}

	// sh waits on fd 3 until its pid has joined the cgroups, then becomes
	// runsc: the sentry, the gofer and every process of the box are inside.
	// Its descriptors' limit is raised to 2^20 as Docker's is (else to
	// its hard limit): the gofer holds a host descriptor per file the box
	// has open or cached (git add of 50,000 files ran out at 20,000).
	gate, gateW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	argv := append([]string{"-c", `read _ <&3; exec 3<&-; ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"`, b.cfg.Runsc}, b.runscFlags(r.ID)...)
	argv = append(argv, "run", "--bundle", dir, r.ID)
	cmd := exec.Command("/bin/sh", argv...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{gate}
	logf, err := os.OpenFile(b.logPath(r), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		gate.Close()
		gateW.Close()
		return fail(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session: no signal from the Runner's terminal
	if err := cmd.Start(); err != nil {
		gate.Close()
		gateW.Close()
		return fail(fmt.Errorf("start runsc: %w", err))
	}
	gate.Close()
	runscStarted(r.ID)
	go func() { _ = cmd.Wait() }() // reap it while this Runner lives
	if err := grp.Add(cmd.Process.Pid); err != nil {
		r.Notes = append(r.Notes, "limits not applied: cannot join cgroup: "+err.Error())
	}
	gateW.Write([]byte("\n"))
	gateW.Close()
	// runsc run lives as long as the box: its pid is the box's.
	st, ok := startTime(cmd.Process.Pid)
	if !ok {
		return fail(fmt.Errorf("runsc did not start the box%s", b.whyStopped(r)))
	}
	r.PID, r.PIDStart = cmd.Process.Pid, st
	if err := b.save(r); err != nil {
		return sandbox.Box{}, err
	}
	return b.box(r), nil
}

// runscStarted is called as runsc has started (tests: what a Runner that
// dies there leaves on disk).
var runscStarted = func(id string) {}

// stopRunsc ends gVisor box r: SIGTERM to its guest (runsc kill), then,
// after o.Timeout, SIGKILL to the whole sandbox (endSandbox). The caller
// takes the cgroup and the mounts off.
func (b *Backend) stopRunsc(r *record, timeout time.Duration) {
	if r.PID != 0 && alive(r.PID, r.PIDStart) {
		_, _ = b.runsc(context.Background(), r.ID, "kill", r.ID, "TERM") // the guest ends its processes
		deadline := time.Now().Add(timeout)
		for alive(r.PID, r.PIDStart) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.endSandbox(r)
}

// endSandbox ends whatever runs of box r's sandbox, whether or not its
// pid was saved: runsc kill of every process, the processes of its cgroup
// killed, runsc's state of it deleted, and the network namespace runsc
// pinned in its state directory taken off.
func (b *Backend) endSandbox(r *record) {
	ctx := context.Background()
	if r.PID != 0 && alive(r.PID, r.PIDStart) {
		_, _ = b.runsc(ctx, r.ID, "kill", "--all", r.ID, "KILL")
		for i := 0; i < 300 && alive(r.PID, r.PIDStart); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if r.Cgroup != nil { // what is left of the sandbox (cgroup.Remove waits for them to go)
		for _, p := range r.Cgroup.Procs() {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if _, err := os.Stat(b.runscRoot(r.ID)); err == nil {
		_, _ = b.runsc(ctx, r.ID, "delete", "--force", r.ID)
	}
	b.unpinNetNS(r.ID)
}

// unmountRunsc takes off a gVisor box's views: its volume's, its
// workspace's.
func (b *Backend) unmountRunsc(r *record) error {
	wsmount.UnmountVolume(b.volView(r.ID))
	return b.unmountWorkspace(r)
}

// logPath is the file a box's runtime and guest write to.
func (b *Backend) logPath(r *record) string {
	return filepath.Join(b.boxDir(r.ID), cmpRuntime(r)+".log")
}

// cmpRuntime is the program a box runs on: bwrap or runsc.
func cmpRuntime(r *record) string {
	if onGVisor(r) {
		return runtimes.Runsc
	}
	return runtimes.Bwrap
}

// runscPath is the runsc the backend uses: the one configured, else the
// pinned build (runtimes.RunscPath) if it is there; "" for none. Debian's
// runsc is never taken from PATH: its 2022 build does not work here.
func runscPath(configured string) string {
	if configured != "" {
		if p, err := exec.LookPath(configured); err == nil {
			return p
		}
		return ""
	}
	if p := runtimes.RunscPath(); isExec(p) {
		return p
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// CgroupProcs is the cgroup.procs file of box id's cgroup, "" if it has
// none: its host processes (bwrap's box; or runsc, its sentry, gofer and
// stubs), for measurements.
func (b *Backend) CgroupProcs(id string) string {
	r, err := b.load(id)
	if err != nil || r.Cgroup == nil || len(r.Cgroup.Dirs) == 0 {
		return ""
	}
	return filepath.Join(r.Cgroup.Dirs[len(r.Cgroup.Dirs)-1], "cgroup.procs")
}
