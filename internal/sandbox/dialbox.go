package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/paddockhq/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// errNotSocket is a guest socket path that holds something other than a
// socket: a symlink, most likely, that the box put there. It is refused at
// once, not retried.
var errNotSocket = errors.New("not a socket")

// dialInRoot connects to the unix socket at path (absolute, no "." or
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
func dialInRoot(ctx context.Context, pid int, path string) (net.Conn, error) {
	root, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dial %s in the box: open its root: %w", path, err)
	}
	fd, err := sandbox.OpenNoFollow(root, path)
	unix.Close(root)
	if errors.Is(err, sandbox.ErrSymlink) {
		return nil, fmt.Errorf("dial %s in the box: %w: %w", path, errNotSocket, err)
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
		return nil, fmt.Errorf("dial %s in the box: %w", path, errNotSocket)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
