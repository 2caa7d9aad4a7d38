package gitindex

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Report is what HiddenIn found in a git directory.
type Report struct {
	// Index is the path of the index file read; "" with NoIndex.
	Index string
	// NoIndex: the git directory has no index file (a repository where
	// nothing was ever added); nothing is hidden.
	NoIndex bool
	// Shared is the path of the shared index merged in, "" when the
	// index is not split.
	Shared string
	// Version and HashSize are the index file's (see Index).
	Version  int
	HashSize int
	// Extensions are the index file's extension signatures (see Index).
	Extensions []string
	// Entries counts the entries git works with (merged, when split).
	Entries int
	// Hidden are the entries flagged skip-worktree or assume-valid, in
	// index order: git status and git diff do not look at their files.
	Hidden []Entry
}

// HiddenIn reads the index of the git directory gitDir with the default
// Options.
func HiddenIn(gitDir string) (Report, error) { return Options{}.HiddenIn(gitDir) }

// HiddenIn reads <gitDir>/index (and, for a split index, the shared index
// it names beside it) and reports the entries it flags skip-worktree or
// assume-valid. gitDir is the repository's git directory (a working
// tree's .git, not the working tree); it must be a directory and not a
// symlink, and so must not be either file: a symlink is refused, not
// followed, as is anything but a regular file (an error wrapping
// errdefs.ErrForbidden). Both files are read from the one directory
// opened once, each at most o.MaxSize bytes (errdefs.ErrLimit past it).
// A missing index is no error: the report says NoIndex. An index that
// does not parse is an error wrapping ErrCorrupt; the caller should say
// so to the owner rather than report nothing hidden.
func (o Options) HiddenIn(gitDir string) (Report, error) {
	max := o.MaxSize
	if max <= 0 {
		max = DefaultMaxSize
	}
	dfd, err := syscall.Open(gitDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if err == syscall.ELOOP || err == syscall.ENOTDIR {
			return Report{}, fmt.Errorf("git directory %s: a symlink or not a directory: %w", gitDir, errdefs.ErrForbidden)
		}
		return Report{}, &fs.PathError{Op: "open", Path: gitDir, Err: err}
	}
	defer syscall.Close(dfd)

	rep := Report{Index: filepath.Join(gitDir, "index")}
	data, err := readAt(dfd, gitDir, "index", max)
	if errors.Is(err, fs.ErrNotExist) {
		return Report{NoIndex: true}, nil
	}
	if err != nil {
		return Report{}, err
	}
	ix, err := o.Parse(data)
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", rep.Index, err)
	}
	data = nil
	rep.Version, rep.HashSize, rep.Extensions = ix.Version, ix.HashSize, ix.Extensions
	if ix.Shared != "" {
		name := "sharedindex." + ix.Shared
		rep.Shared = filepath.Join(gitDir, name)
		sdata, err := readAt(dfd, gitDir, name, max)
		if err != nil {
			return Report{}, fmt.Errorf("the split index's shared index: %w", err)
		}
		shared, err := Options{HashSize: ix.HashSize}.Parse(sdata)
		if err != nil {
			return Report{}, fmt.Errorf("%s: %w", rep.Shared, err)
		}
		if ix, err = ix.Merge(shared); err != nil {
			return Report{}, fmt.Errorf("%s with %s: %w", rep.Index, rep.Shared, err)
		}
	}
	rep.Entries = len(ix.Entries)
	rep.Hidden = ix.Hidden()
	return rep, nil
}

// readAt reads the regular file name in the directory dfd, refusing a
// symlink or anything else, and more than max bytes.
func readAt(dfd int, dir, name string, max int64) ([]byte, error) {
	p := filepath.Join(dir, name)
	// O_NONBLOCK: a FIFO put there opens without waiting for a writer,
	// and is then refused as not a regular file.
	fd, err := syscall.Openat(dfd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err == syscall.ELOOP {
		return nil, fmt.Errorf("%s is a symlink: %w", p, errdefs.ErrForbidden)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v): %w", p, st.Mode().Type(), errdefs.ErrForbidden)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s has %d bytes, more than the %d allowed: %w", p, st.Size(), max, errdefs.ErrLimit)
	}
	// The file may change size after the stat: read at most max+1 bytes,
	// into a buffer sized for what stat said (bytes.MinRead to spare, so
	// the read that finds the end does not grow it).
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	data := buf.Bytes()
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s grew past the %d bytes allowed: %w", p, max, errdefs.ErrLimit)
	}
	return data, nil
}
