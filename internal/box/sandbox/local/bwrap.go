// The bwrap command line of a box, the seccomp filter it loads, and its start.

package local

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/seccomp"
)

// args builds the whole bwrap command line of a box: the one place its
// isolation is decided, from its layout.
func (b *Backend) args(r *record) []string {
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
	}
	for _, m := range b.layout(r) {
		switch m.kind {
		case mROBind:
			a = append(a, "--ro-bind", m.src, m.dst)
		case mBind:
			a = append(a, "--bind", m.src, m.dst)
		case mWorkspace: // bound by descriptor: see Start
			a = append(a, "--bind-fd", strconv.Itoa(workspaceFD), m.dst)
		case mOrigin:
			a = append(a, "--ro-bind-fd", strconv.Itoa(workspaceFD), m.dst)
		case mSymlink:
			a = append(a, "--symlink", m.src, m.dst)
		case mProc:
			a = append(a, "--proc", m.dst)
		case mDev:
			a = append(a, "--dev", m.dst)
		case mTmpfs:
			a = append(a, "--tmpfs", m.dst)
		case mDir:
			a = append(a, "--dir", m.dst)
		}
	}
	a = append(a,
		"--remount-ro", "/",
		"--chdir", sandbox.WorkspaceDir,
		"--setenv", "HOME", sandbox.HomeDir,
		"--setenv", "USER", sandbox.BoxUser,
		"--setenv", "PATH", boxPath,
		"--",
		guestPath, "guest", "--socket", sandbox.GuestSocket,
	)
	return a
}

// boxPath is PATH in a box.
const boxPath = "/opt/paddock/bin:/opt/claude/bin:/usr/local/bin:/usr/bin:/bin"

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

// startBwrap starts box r with bwrap. The caller holds b.mu.
func (b *Backend) startBwrap(ctx context.Context, r *record) (sandbox.Box, error) {
	var err error
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
	logf, _ := os.OpenFile(b.logPath(r), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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
		logb, _ := os.ReadFile(b.logPath(r))
		return sandbox.Box{}, fmt.Errorf("bwrap did not start the box: %s", strings.TrimSpace(string(logb)))
	}
	st, _ := startTime(child)
	r.PID, r.PIDStart = child, st
	if err := b.save(r); err != nil {
		return sandbox.Box{}, err
	}
	return b.box(r), nil
}
