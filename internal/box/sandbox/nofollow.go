package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"golang.org/x/sys/unix"
)

// ErrSymlink is a path that has a symlink (or, where a directory was
// expected, another kind of file) in it where OpenNoFollow follows none.
var ErrSymlink = errors.New("a symlink or other file where a directory or the target was expected")

// OpenNoFollow opens path (absolute, clean: no "", "." or ".." parts)
// under the directory root (an O_PATH descriptor; or unix.AT_FDCWD with
// path resolved from "/"), one component at a time with O_NOFOLLOW, and
// returns an O_PATH descriptor of what it names. Every component before
// the last must be a directory; the last may be anything but a symlink.
// A symlink anywhere gives ErrSymlink: a box may have put it where the
// Runner, as root, would otherwise follow it out of the box.
func OpenNoFollow(root int, path string) (int, error) {
	rel, ok := strings.CutPrefix(path, "/")
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if !ok || p == "" || p == "." || p == ".." {
			return -1, fmt.Errorf("%s: not a clean absolute path", path)
		}
	}
	fd := root
	if root == unix.AT_FDCWD {
		var err error
		if fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return -1, err
		}
	} else {
		var err error
		if fd, err = unix.Dup(root); err != nil {
			return -1, err
		}
	}
	for i, p := range parts {
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY // a symlink here fails with ENOTDIR
		}
		next, err := unix.Openat(fd, p, flags, 0)
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				err = ErrSymlink
			}
			return -1, fmt.Errorf("%s: %s: %w", path, p, err)
		}
		fd = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", path, ErrSymlink)
	}
	return fd, nil
}

// OpenWorkspace opens a host workspace directory, by the path resolved
// when its box was made, for binding: walked from "/" without following a
// symlink (OpenNoFollow). A symlink on the way, a path gone, or something
// other than a directory there is errdefs.ErrConflict: the path no longer
// leads where it did, and binding it could hand the box another host
// directory. The caller closes the descriptor.
func OpenWorkspace(path string) (int, error) {
	fd, err := OpenNoFollow(unix.AT_FDCWD, path)
	if errors.Is(err, ErrSymlink) {
		return -1, fmt.Errorf("workspace %s: its path now leads through a symlink (%v); only the directory it had when the session was made is bound: %w",
			path, err, errdefs.ErrConflict)
	}
	if err != nil {
		return -1, fmt.Errorf("workspace %s is gone: %v: %w", path, err, errdefs.ErrConflict)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return -1, fmt.Errorf("workspace %s is no longer a directory: %w", path, errdefs.ErrConflict)
	}
	return fd, nil
}
