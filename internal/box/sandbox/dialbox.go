package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"

	"golang.org/x/sys/unix"
)

// ErrNotSocket is a guest socket path that holds something other than a
// socket: a symlink, most likely, that the box put there. It is refused at
// once, not retried.
var ErrNotSocket = errors.New("not a socket")

// DialInRoot connects to the unix socket at path (absolute, no "." or
// ".." parts) inside the root directory of process pid, resolving every
// component of path inside that root and following no symlink.
//
// Connecting to /proc/<pid>/root + path would not do: the kernel resolves
// an absolute symlink found under /proc/<pid>/root against the caller's
// root, the host's. A box that put a symlink at its socket path (its /run
// is its own to write) could make the Runner connect, as root, to any
// socket on the host, or to another box's guest. Here each directory is
// opened with O_NOFOLLOW from the one before, the last component must be a
// socket, and the connection goes through /proc/self/fd/<its descriptor>.
func DialInRoot(ctx context.Context, pid int, path string) (net.Conn, error) {
	return DialInDir(ctx, "/proc/"+strconv.Itoa(pid)+"/root", path)
}

// DialInDir is DialInRoot with dir, a host directory, as the root: for a
// box whose socket directory is a host directory bound into it (a gVisor
// box's, through runsc's --host-uds), which the box writes.
func DialInDir(ctx context.Context, dir, path string) (net.Conn, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dial %s in the box: open its root: %w", path, err)
	}
	fd, err := OpenNoFollow(root, path)
	unix.Close(root)
	if errors.Is(err, ErrSymlink) {
		return nil, fmt.Errorf("dial %s in the box: %w: %w", path, ErrNotSocket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s in the box: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("dial %s in the box: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("dial %s in the box: %w", path, ErrNotSocket)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}

// ProcStartTime is a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat): with the pid, it names one process, not
// whichever later reuses its pid. ok is false for a process that is gone
// or a zombie.
func ProcStartTime(pid int) (start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// DialGuest connects to the guest socket (GuestSocket) of box, whose
// guest is process pid with start time start (ProcStartTime), through
// DialInRoot. A guest that runs but does not listen yet is tried again
// every 2 ms, for at most wait: a running guest has its socket within
// milliseconds, and one whose socket is still missing after that has lost
// it (the box may delete it). A guest that ends meanwhile gives
// ErrConflict, its message followed by why() when why is not nil.
func DialGuest(ctx context.Context, box string, pid int, start uint64, wait time.Duration, why func() string) (net.Conn, error) {
	return dialGuest(ctx, box, pid, start, wait, why, func(ctx context.Context) (net.Conn, error) { return DialInRoot(ctx, pid, GuestSocket) })
}

// DialGuestIn is DialGuest for a box whose directory of GuestSocket is the
// host directory dir (DialInDir); pid and start name the process whose
// life is the box's.
func DialGuestIn(ctx context.Context, box, dir string, pid int, start uint64, wait time.Duration, why func() string) (net.Conn, error) {
	name := "/" + path.Base(GuestSocket)
	return dialGuest(ctx, box, pid, start, wait, why, func(ctx context.Context) (net.Conn, error) { return DialInDir(ctx, dir, name) })
}

func dialGuest(ctx context.Context, box string, pid int, start uint64, wait time.Duration, why func() string, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	alive := func() bool { st, ok := ProcStartTime(pid); return ok && st == start }
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var lastErr error
	for {
		c, err := dial(ctx)
		if errors.Is(err, ErrNotSocket) {
			return nil, fmt.Errorf("box %s: its guest socket is not the guest's (a symlink or another file in its place): %w", box, err)
		}
		if err == nil {
			// Re-check: the pid must still be the box's guest.
			if !alive() {
				c.Close()
				return nil, fmt.Errorf("box %s stopped: %w", box, errdefs.ErrConflict)
			}
			return c, nil
		}
		lastErr = err
		if !alive() {
			reason := ""
			if why != nil {
				reason = why()
			}
			return nil, fmt.Errorf("box %s stopped while connecting%s: %w", box, reason, errdefs.ErrConflict)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to box %s: %w (last: %v)", box, ctx.Err(), lastErr)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
