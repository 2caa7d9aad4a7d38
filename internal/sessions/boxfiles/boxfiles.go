// Package boxfiles carries a set of files from the Runner into a box: the
// Runner packs them (Pack) into a tar stream, `paddock guest unpack DIR`
// reads that stream on the box's side (Unpack) and writes the files under
// DIR as the box user.
//
// The stream holds regular files only, each with a clean relative path and
// one of three modes (0600, 0644, 0755); directories are implied by the
// paths. Unpack checks all of that again before it writes anything, so a
// stream that breaks a rule leaves DIR as it was.
package boxfiles

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// MaxStream bounds what Unpack reads: the largest Claude setup plus the
// few small files that come with it (the git identity, the first prompt).
const MaxStream = 24 << 20

// File is one file to write: Path is relative to the directory it is
// written under, "/"-separated.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}

// CheckPath reports whether p is a path a File may have: relative,
// "/"-separated, already clean (no "", ".", ".." component, no trailing
// "/"), at most 1024 bytes, valid UTF-8 without control characters, and
// not named like the temporary files Unpack writes.
func CheckPath(p string) error {
	switch {
	case p == "" || len(p) > 1024:
		return fmt.Errorf("path %q: empty or longer than 1024 bytes: %w", trunc(p), errdefs.ErrInvalid)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q: not UTF-8: %w", trunc(p), errdefs.ErrInvalid)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p:
		return fmt.Errorf("path %q: not a clean relative path: %w", trunc(p), errdefs.ErrInvalid)
	case strings.HasSuffix(p, tmpSuffix):
		return fmt.Errorf("path %q: ends in %s: %w", trunc(p), tmpSuffix, errdefs.ErrInvalid)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." || c == "." {
			return fmt.Errorf("path %q: has a %q component: %w", trunc(p), c, errdefs.ErrInvalid)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("path %q: has a control character or backslash: %w", trunc(p), errdefs.ErrInvalid)
		}
	}
	return nil
}

// CheckMode reports whether m is one of the modes a File may have.
func CheckMode(m fs.FileMode) error {
	switch m {
	case 0o600, 0o644, 0o755:
		return nil
	}
	return fmt.Errorf("mode %#o is not 0600, 0644 or 0755: %w", uint32(m), errdefs.ErrInvalid)
}

// Check checks a set of files: each path and mode, no path twice, no path
// that is also the directory of another, and at most max bytes in all.
func Check(files []File, max int64) error {
	seen := make(map[string]bool, len(files))
	var total int64
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return err
		}
		if err := CheckMode(f.Mode); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("path %q: twice: %w", f.Path, errdefs.ErrInvalid)
		}
		seen[f.Path] = true
		if total += int64(len(f.Data)); total > max {
			return fmt.Errorf("files: more than %d bytes: %w", max, errdefs.ErrInvalid)
		}
	}
	// A file may not stand where another file needs a directory.
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("path %q: %q is a file, not a directory: %w", f.Path, d, errdefs.ErrInvalid)
			}
		}
	}
	return nil
}

// Pack checks files (Check, up to MaxStream bytes) and writes them as a tar
// stream.
func Pack(files []File) ([]byte, error) {
	if err := Check(files, MaxStream); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: int64(f.Mode), Size: int64(len(f.Data)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Read parses a tar stream made by Pack into its files, checking every
// rule; it reads at most MaxStream bytes of file data. It is what Unpack
// does before it writes, and the parser of untrusted bytes the fuzz
// target covers.
func Read(r io.Reader) ([]File, error) {
	tr := tar.NewReader(r)
	var files []File
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("file stream: %v: %w", err, errdefs.ErrInvalid)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("file stream: %q is not a regular file (type %q): %w", trunc(h.Name), h.Typeflag, errdefs.ErrInvalid)
		}
		if h.Size < 0 || total+h.Size > MaxStream {
			return nil, fmt.Errorf("file stream: more than %d bytes: %w", MaxStream, errdefs.ErrInvalid)
		}
		total += h.Size
		data := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("file stream: %s: %v: %w", trunc(h.Name), err, errdefs.ErrInvalid)
		}
		files = append(files, File{Path: h.Name, Mode: fs.FileMode(h.Mode), Data: data})
	}
	if err := Check(files, MaxStream); err != nil {
		return nil, fmt.Errorf("file stream: %w", err)
	}
	return files, nil
}

// noFollow: a symlink planted at a temporary file's name fails the open.
const noFollow = syscall.O_NOFOLLOW

// tmpSuffix names the temporary file each file is first written to.
const tmpSuffix = ".paddock-tmp"

// Unpack reads a stream (Read) and only then writes its files under root:
// parent directories made 0755 as needed, each file written to a
// temporary file beside it and renamed into place, so a file that was
// there is replaced whole. A symlink at a file's own path is replaced, not
// followed.
func Unpack(r io.Reader, root string) error {
	files, err := Read(r)
	if err != nil {
		return err
	}
	for _, f := range files {
		dst := filepath.Join(root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp := dst + tmpSuffix
		_ = os.Remove(tmp)
		fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, f.Mode)
		if err != nil {
			return err
		}
		_, err = fh.Write(f.Data)
		if err == nil {
			err = fh.Chmod(f.Mode) // the umask took bits off at create
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, dst)
		}
		if err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
