// The build context of a project's Dockerfile: read once, hashed into
// the recipe, and sent to the build as a tar stream.

package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Limits of a build context: everything in it is read to hash it, at
// every Ensure, and sent to the Docker daemon at every build.
const (
	MaxContextBytes = 512 << 20
	MaxContextFiles = 100_000
)

// BuildContext is a project's Dockerfile and the directory it is in, as
// paddock sends it: every directory, regular file and symlink under Dir
// (symlinks are sent as links, never followed) but those its .dockerignore
// excludes; the Dockerfile and .dockerignore always. Each is sent owned by
// root, with its permission bits, dated 1970 (so the same files always
// make the same context).
//
// The directory may be one a box can write (a live workspace): below Dir
// nothing is read through a symlink, and every file is opened through
// its directory's descriptor, so a tree changed while it is read can make
// the read fail but never make it read outside Dir. Dir itself is opened
// as given (the caller resolved it), but not through a final symlink.
type BuildContext struct {
	// Dir is the Dockerfile's directory.
	Dir string
	// DockerfileName is the Dockerfile's name in Dir.
	DockerfileName string
	// Dockerfile is its contents.
	Dockerfile []byte
	// Size is the sum of the regular files' sizes.
	Size int64

	entries []ctxEntry // sorted by path

	within, rel string // Dir is within/rel, followed without symlinks (ReadContext)
}

// ctxEntry is one thing a context sends.
type ctxEntry struct {
	rel  string // slash-separated, relative to Dir
	kind byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode int64  // permission bits, with setuid, setgid and sticky
	size int64
	link string // a symlink's target
	data []byte // contents held in memory (the Dockerfile), or nil: read from Dir
}

// maxDockerfile is the largest Dockerfile paddock reads.
const maxDockerfile = 1 << 20

// ReadContext reads what a build of the Dockerfile at dockerfile
// (absolute) would send. It refuses a Dockerfile that is a symlink or not a regular
// file, and a context that is not a tree of directories, files and
// symlinks (a socket, a device, a pipe in it), larger than
// MaxContextBytes or with more than MaxContextFiles entries, each with
// what to do.
//
// within, when not "", is a directory that holds dockerfile: the path
// from it down to the Dockerfile's directory is then followed without
// any symlink (a workspace a box writes to could swap a directory on
// the way for a link to the host's), every time the context is opened.
func ReadContext(dockerfile, within string) (*BuildContext, error) {
	bc := &BuildContext{Dir: filepath.Dir(dockerfile), DockerfileName: filepath.Base(dockerfile)}
	if within != "" {
		rel, err := filepath.Rel(within, bc.Dir)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return nil, fmt.Errorf("the Dockerfile %s is not inside %s: %w", dockerfile, within, errdefs.ErrInvalid)
		}
		bc.within, bc.rel = within, rel
	}
	root, err := bc.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	df, err := readBeneath(root, bc.DockerfileName, maxDockerfile)
	if err != nil {
		return nil, fmt.Errorf("read the project's Dockerfile %s: %w; give the path of a regular file (not a symlink) of at most %d KiB: %w", dockerfile, err, maxDockerfile>>10, errdefs.ErrInvalid)
	}
	bc.Dockerfile = df
	var ig *ignorer
	if b, err := readBeneath(root, ".dockerignore", maxDockerfile); err == nil {
		if ig, err = parseDockerignore(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("%s: %w", bc.Dir, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w; make it a regular file, or remove it: %w", filepath.Join(bc.Dir, ".dockerignore"), err, errdefs.ErrInvalid)
	}
	if err := bc.walk(root, "", ig); err != nil {
		return nil, err
	}
	bc.entries = append(bc.entries, ctxEntry{rel: bc.DockerfileName, kind: tar.TypeReg, mode: 0o644, size: int64(len(df)), data: df})
	slices.SortFunc(bc.entries, func(a, b ctxEntry) int { return strings.Compare(a.rel, b.rel) })
	return bc, nil
}

// openRoot opens Dir, refusing a symlink at its end (and on the way from
// within, when there is one).
func (bc *BuildContext) openRoot() (*os.File, error) {
	if bc.within == "" {
		fd, err := unix.Open(bc.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, bc.rootError(err)
		}
		return os.NewFile(uintptr(fd), bc.Dir), nil
	}
	top, err := os.Open(bc.within)
	if err != nil {
		return nil, bc.rootError(err)
	}
	defer top.Close()
	d, err := openBeneath(top, bc.rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, bc.rootError(err)
	}
	return d, nil
}

func (bc *BuildContext) rootError(err error) error {
	return fmt.Errorf("open the build context %s: %w; it is the Dockerfile's directory, and must be a directory (not a symlink to one): %w", bc.Dir, err, errdefs.ErrInvalid)
}

// openBeneath opens rel under dir, following no symlink on the way or at
// its end.
func openBeneath(dir *os.File, rel string, flags int) (*os.File, error) {
	fd, err := unix.Openat2(int(dir.Fd()), rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = fmt.Errorf("%w (paddock follows no symlink in a build context)", err)
		}
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// readBeneath reads the regular file rel under dir, at most max bytes.
func readBeneath(dir *os.File, rel string, max int64) ([]byte, error) {
	f, err := openBeneath(dir, rel, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d KiB", rel, max>>10)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// walk adds what dir (rel under Dir; "" for Dir) holds, and what is
// below it, to bc's entries.
func (bc *BuildContext) walk(dir *os.File, rel string, ig *ignorer) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read the build context %s: %w", filepath.Join(bc.Dir, rel), err)
	}
	slices.Sort(names)
	tooBig := func(what string) error {
		return fmt.Errorf("the build context %s (the Dockerfile's directory, everything in it sent and hashed) holds %s: put the Dockerfile in a directory of its own with only what it COPYs, or list what the build does not need in its .dockerignore: %w",
			bc.Dir, what, errdefs.ErrInvalid)
	}
	for _, name := range names {
		r := path.Join(rel, name)
		if r == bc.DockerfileName {
			continue // added as read
		}
		excluded := r != ".dockerignore" && ig.excluded(r)
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("read the build context: %s: %w", filepath.Join(bc.Dir, r), err)
		}
		e := ctxEntry{rel: r, mode: int64(st.Mode & 0o7777)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if excluded && !ig.exceptions {
				continue
			}
			sub, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				return fmt.Errorf("read the build context: %s: %w", filepath.Join(bc.Dir, r), err)
			}
			if !excluded {
				e.kind = tar.TypeDir
				bc.entries = append(bc.entries, e)
			}
			err = bc.walk(sub, r, ig)
			sub.Close()
			if err != nil {
				return err
			}
			continue
		case unix.S_IFREG:
			if excluded {
				continue
			}
			e.kind, e.size = tar.TypeReg, st.Size
			bc.Size += st.Size
		case unix.S_IFLNK:
			if excluded {
				continue
			}
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
			if err != nil {
				return fmt.Errorf("read the build context: %s: %w", filepath.Join(bc.Dir, r), err)
			}
			e.kind, e.link = tar.TypeSymlink, string(buf[:n])
		default:
			if excluded {
				continue
			}
			return fmt.Errorf("%s in the build context is neither a file, a directory nor a symlink (a socket, a pipe or a device); remove it or list it in %s: %w",
				filepath.Join(bc.Dir, r), filepath.Join(bc.Dir, ".dockerignore"), errdefs.ErrInvalid)
		}
		bc.entries = append(bc.entries, e)
		if bc.Size > MaxContextBytes {
			return tooBig(fmt.Sprintf("more than %d MiB", MaxContextBytes>>20))
		}
		if len(bc.entries) > MaxContextFiles {
			return tooBig(fmt.Sprintf("more than %d files", MaxContextFiles))
		}
	}
	return nil
}

// hashInto adds the context to a recipe's hash: the Dockerfile's name,
// then each entry's path, type, mode and contents (a file's sha256, a
// symlink's target).
func (bc *BuildContext) hashInto(h *fieldHash) error {
	root, err := bc.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	h.field("dockerfile", bc.DockerfileName)
	for _, e := range bc.entries {
		sum := ""
		if e.kind == tar.TypeReg {
			r, err := bc.open(root, e)
			if err != nil {
				return err
			}
			fh := sha256.New()
			_, err = io.Copy(fh, r)
			r.Close()
			if err != nil {
				return fmt.Errorf("read the build context: %w", err)
			}
			sum = hex.EncodeToString(fh.Sum(nil))
		}
		bc.hashEntry(h, e, sum)
	}
	return nil
}

func (bc *BuildContext) hashEntry(h *fieldHash, e ctxEntry, sum string) {
	h.field(e.rel, string(e.kind), strconv.FormatInt(e.mode, 8), sum, e.link)
}

// open opens a regular entry's contents, through root (Dir, opened by
// openRoot), following no symlink; it refuses what is no longer a
// regular file.
func (bc *BuildContext) open(root *os.File, e ctxEntry) (io.ReadCloser, error) {
	if e.data != nil {
		return io.NopCloser(bytes.NewReader(e.data)), nil
	}
	f, err := openBeneath(root, e.rel, unix.O_RDONLY)
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is no longer a regular file", e.rel)
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the build context %s: %w; run again once it stays the same", bc.Dir, err)
	}
	return f, nil
}

// writeTar writes the context as a tar stream and adds what it wrote to
// h, as hashInto would: so the caller can tell the context it sent from
// the one it hashed earlier. A file whose size changed since ReadContext
// is an error.
func (bc *BuildContext) writeTar(w io.Writer, h *fieldHash) error {
	root, err := bc.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	h.field("dockerfile", bc.DockerfileName)
	for _, e := range bc.entries {
		hdr := &tar.Header{Name: e.rel, Typeflag: e.kind, Mode: e.mode, Linkname: e.link, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if e.kind == tar.TypeDir {
			hdr.Name += "/"
		}
		if e.kind == tar.TypeReg {
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		sum := ""
		if e.kind == tar.TypeReg {
			r, err := bc.open(root, e)
			if err != nil {
				return err
			}
			fh := sha256.New()
			n, err := io.Copy(io.MultiWriter(tw, fh), io.LimitReader(r, e.size+1))
			r.Close()
			if (err == nil && n != e.size) || errors.Is(err, tar.ErrWriteTooLong) {
				err = fmt.Errorf("%s changed while it was sent (it was %d bytes); run the build again once it stays the same", e.rel, e.size)
			}
			if err != nil {
				return fmt.Errorf("send the build context: %w", err)
			}
			sum = hex.EncodeToString(fh.Sum(nil))
		}
		bc.hashEntry(h, e, sum)
	}
	return tw.Close()
}
