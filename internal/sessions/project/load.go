package project

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Load reads and validates <workspace>/.paddock.toml. It returns (nil,
// nil) when the workspace has no project file.
//
// The file is opened without following a symbolic link at its own name
// (O_NOFOLLOW: a box could point one at a file of the host's) and without
// waiting on a FIFO (O_NONBLOCK); what is not a regular file, or is
// larger than MaxSize, is refused. Then Parse, and the checks that need
// the workspace: image.dockerfile must name a regular file that stays
// inside the workspace, links on the way resolved against the workspace's
// top directory (os.Root). That holds when Load looks; whoever reads the
// Dockerfile later opens it inside the workspace again.
//
// Errors about the file's contents are *Error (errdefs.ErrInvalid); a
// workspace that cannot be read gives the error of the system.
func Load(workspace string) (*File, error) {
	p := filepath.Join(workspace, FileName)
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No file, but only if there is a workspace to have none.
		if fi, err := os.Stat(workspace); err != nil {
			return nil, fmt.Errorf("read workspace %s: %w", workspace, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory: %w", workspace, errdefs.ErrInvalid)
		}
		return nil, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, &Error{Msg: "is a symbolic link; paddock reads a project file only as a regular file in the workspace's top directory, never through a link (which a box could point at a file of the host's)"}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if fi.IsDir() {
		// An empty directory is the placeholder a running session's box
		// has in the place of a missing host-code path (wsmount.HostCode):
		// there is no file.
		if names, err := fh.Readdirnames(1); len(names) == 0 && errors.Is(err, io.EOF) {
			return nil, nil
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Msg: fmt.Sprintf("is not a regular file (%s)", fi.Mode().Type())}
	}
	if fi.Size() > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes, more than the %d a project file may have", fi.Size(), MaxSize)}
	}
	// The size may change under the read: read one byte past the limit
	// and let Parse refuse what is too long.
	raw, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	f, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if f.Image.Dockerfile != "" {
		if f.DockerfileText, err = readInside(workspace, f.Image.Dockerfile); err != nil {
			return nil, err
		}
		f.Sum = Sum(f.Accepted())
	}
	return f, nil
}

// MaxDockerfile is the largest Dockerfile a project file may name.
const MaxDockerfile = 1 << 20

// readInside reads the Dockerfile rel (checkInside), at most
// MaxDockerfile bytes.
func readInside(workspace, rel string) ([]byte, error) {
	if err := checkInside(workspace, rel); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	defer root.Close()
	fh, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q cannot be read inside the workspace: %v", rel, unwrapPath(err))}
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q is not a regular file", rel)}
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxDockerfile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if len(b) > MaxDockerfile {
		return nil, &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q is more than %d KiB", rel, MaxDockerfile>>10)}
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// checkInside checks that rel (slash-separated, clean, relative) names a
// regular file that stays inside workspace, every link on the way
// resolved against the workspace's top directory.
func checkInside(workspace, rel string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	defer root.Close()
	fi, err := root.Stat(filepath.FromSlash(rel))
	switch {
	case err == nil && fi.Mode().IsRegular():
		return nil
	case err == nil:
		return &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q is not a regular file (%s)", rel, fi.Mode().Type())}
	case escapes(workspace, rel):
		return &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q leads out of the workspace through a symbolic link; the Dockerfile must be inside the workspace", rel)}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q does not exist in the workspace", rel)}
	}
	return &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q cannot be read inside the workspace: %v", rel, unwrapPath(err))}
}

// escapes reports whether rel, its links followed as the system follows
// them, ends outside workspace. It only picks the message: os.Root
// already refused the path.
func escapes(workspace, rel string) bool {
	top, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return false
	}
	// Walk down one name at a time, so that a link that dangles outside
	// the workspace counts as well as one that resolves.
	at := top
	for _, name := range strings.Split(rel, "/") {
		next := filepath.Join(at, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(next)
			if err != nil {
				return false
			}
			if filepath.IsAbs(target) {
				next = filepath.Clean(target)
			} else {
				next = filepath.Join(at, target)
			}
			if resolved, err := filepath.EvalSymlinks(next); err == nil {
				next = resolved
			}
		}
		if next != top && !strings.HasPrefix(next, top+string(filepath.Separator)) {
			return true
		}
		at = next
	}
	return false
}

// unwrapPath drops the path from a *fs.PathError, which the message
// already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
