package portable

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// ReadBoxTar reads the tar stream a box wrote of its ~/.claude (tar -c of
// what travels, CarriedTops) into Files, holding at most lim: the box is
// untrusted, and may be writing while it is read. Entries that are not
// regular files (directories, symlinks, devices) are skipped; the rest
// go through FromBox, which leaves out what does not travel. A box with
// more than lim is an error that says so: an export is whole or nothing.
func ReadBoxTar(r io.Reader, lim Limits) ([]File, []string, error) {
	lim = lim.withDefaults()
	tr := tar.NewReader(r)
	var files []File
	var total int64
	skipped, headers := 0, 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read Claude Code's state from the box: %v: %w", err, errdefs.ErrUnavailable)
		}
		// Directories and skipped entries count too: a box that sends
		// nothing but headers is stopped as well.
		if headers++; headers > 2*lim.MaxEntries+1000 {
			return nil, nil, fmt.Errorf("the session's Claude Code state has more than %d entries: %w", 2*lim.MaxEntries+1000, errdefs.ErrLimit)
		}
		if h.Typeflag != tar.TypeReg {
			if h.Typeflag != tar.TypeDir {
				skipped++
			}
			continue
		}
		if len(files) >= lim.MaxEntries {
			return nil, nil, fmt.Errorf("the session's Claude Code state has more than %d files, the most a session file carries: %w", lim.MaxEntries, errdefs.ErrLimit)
		}
		if h.Size < 0 || h.Size > lim.MaxEntry {
			return nil, nil, fmt.Errorf("%s in the box has %d bytes, more than the %d MiB a session file carries of one file: %w", clip(h.Name), h.Size, lim.MaxEntry>>20, errdefs.ErrLimit)
		}
		if total += h.Size; total > lim.MaxTotal {
			return nil, nil, fmt.Errorf("the session's Claude Code state is larger than the %d MiB a session file carries: %w", lim.MaxTotal>>20, errdefs.ErrLimit)
		}
		var buf bytes.Buffer
		if _, err := io.CopyN(&buf, tr, h.Size); err != nil {
			return nil, nil, fmt.Errorf("read %s from the box: %v: %w", clip(h.Name), err, errdefs.ErrUnavailable)
		}
		files = append(files, File{Path: strings.TrimPrefix(h.Name, "./"), Data: buf.Bytes(), ModTime: h.ModTime.UTC()})
	}
	out, notes := FromBox(files)
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d symlinks or special files left out", skipped))
	}
	return out, notes, nil
}

// BoxTar writes files as the tar stream `tar -x` unpacks into a box's
// ~/.claude: regular files, mode 0600, their modification times kept,
// directories implied. It checks every path first (CheckClaudePath):
// what goes into a box is what a session file may carry.
func BoxTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteBoxTar(&buf, files); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteBoxTar is BoxTar writing to w as it goes, so that the stream is
// never whole in memory beside the files; every path is checked before
// the first byte is written.
func WriteBoxTar(w io.Writer, files []File) error {
	for _, f := range files {
		if err := CheckClaudePath(f.Path); err != nil {
			return err
		}
	}
	tw := tar.NewWriter(w)
	for _, f := range files {
		mt := f.ModTime
		if mt.IsZero() {
			mt = time.Now()
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: 0o600, Size: int64(len(f.Data)), ModTime: mt, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}
