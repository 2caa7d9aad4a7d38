// The bwrap command line of a box, and the seccomp filter it loads.

package local

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/seccomp"
)

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
