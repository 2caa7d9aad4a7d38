// The bwrap command line of a box, and the seccomp filter it loads.

package local

import (
	"fmt"
	"os"
	"strconv"

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
