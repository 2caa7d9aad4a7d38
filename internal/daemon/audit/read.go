package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Filter selects entries. Its zero value selects all of them.
type Filter struct {
	// Session, if set, matches an entry whose Session or SessionName is
	// exactly it, or whose Session begins with it if it has at least
	// minPrefix (4) bytes.
	Session string
	// User, if set, matches an entry whose User (who acted) is exactly it.
	User string
	// Visible, if non-nil, is asked about each entry that every other field
	// matches; false hides the entry. The Runner uses it to show a non-admin
	// only the entries that concern them. It must not call the Log.
	Visible func(Entry) bool
	// Since, if set, hides the entries before it.
	Since time.Time
}

// Match reports whether f selects e.
func (f Filter) Match(e Entry) bool {
	if f.Session != "" && e.Session != f.Session && e.SessionName != f.Session &&
		(len(f.Session) < minPrefix || !strings.HasPrefix(e.Session, f.Session)) {
		return false
	}
	if f.User != "" && e.User != f.User {
		return false
	}
	if !f.Since.IsZero() && e.Time.Before(f.Since) {
		return false
	}
	return f.Visible == nil || f.Visible(e)
}

// Read returns the entries f selects, oldest first, from the rotated files
// kept and the current one; only the last n when n > 0. Lines that are not
// entries (ParseLine refuses them) are skipped; skipped counts them, a torn
// last line of each file read included.
func (l *Log) Read(f Filter, n int) (entries []Entry, skipped int, err error) {
	v, err := l.snapshot(true, false)
	if err != nil {
		return nil, 0, err
	}
	defer v.close()
	entries, skipped, _, err = readBack(v, f, n)
	return entries, skipped, err
}

// ReadFollow calls fn with the entries f selects, oldest first: the last n
// already in the log, the rotated files included (all of them if n <= 0),
// then each one appended after the call began, until ctx is done, fn
// returns an error or the log is closed. It returns ctx.Err(), fn's error
// as it is, or an error wrapping fs.ErrClosed. No entry is missed or given
// twice between the two parts: both read the file from one position; nor
// across a rotation, unless the follower is more than Keep rotations
// behind. Damaged lines are skipped, as in Read.
//
// ReadFollow does not poll: it sleeps until Record (of this Log) appends.
// It reads what it returns from the file, so lines another process appended
// are returned too, with the next Record of this Log. fn is called with no
// lock held and may call Record.
func (l *Log) ReadFollow(ctx context.Context, f Filter, n int, fn func(Entry) error) error {
	v, err := l.snapshot(true, true)
	if err != nil {
		return err
	}
	old, _, s, err := readBack(v, f, n)
	v.closeOld()
	cur, gen, changed := v.cur, v.gen, v.changed
	defer func() { cur.Close() }()
	if err != nil {
		return err
	}
	for _, e := range old {
		if err := fn(e); err != nil {
			return err
		}
	}
	// A last line without its newline stays ahead of s.pos: it is either
	// being written or torn, and the scan below returns it once whole.
	deliver := func(line []byte) error {
		e, err := ParseLine(line)
		if err != nil || !f.Match(e) {
			return nil
		}
		return fn(e)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// changed was taken before this scan began, so a line appended
		// after the scan read the end of the file closes it.
		if _, err := s.scan(-1, deliver); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		nv, err := l.follow(gen)
		if err != nil {
			return err
		}
		changed = nv.changed
		if nv.cur == nil {
			continue
		}
		// Rotated: the rest of the file followed is final, and so are
		// the ones rotated after it; then the new file is followed.
		err = func() error {
			defer nv.closeOld()
			if _, err := s.scan(-1, deliver); err != nil {
				return err
			}
			for _, o := range nv.old {
				if _, err := (&lineScanner{r: o}).scan(-1, deliver); err != nil {
					return err
				}
			}
			return nil
		}()
		cur.Close()
		cur, s, gen = nv.cur, &lineScanner{r: nv.cur}, nv.gen
		if err != nil {
			return err
		}
	}
}

// files are what a reader reads, opened for it: the rotated files kept,
// oldest first, and the current one, whose size was end (the end of a
// whole line of this Log, since Record holds l.mu while writing).
type files struct {
	old     []*os.File
	cur     *os.File
	end     int64
	gen     uint64
	changed <-chan struct{} // closed at the next change, if asked for
}

func (v *files) closeOld() {
	for _, f := range v.old {
		f.Close()
	}
	v.old = nil
}

func (v *files) close() {
	v.closeOld()
	if v.cur != nil {
		v.cur.Close()
	}
}

// snapshot opens the files to read: the current one, the rotated ones too
// if history, and, if watch, returns a channel closed at the next change.
func (l *Log) snapshot(history, watch bool) (v files, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return files{}, fmt.Errorf("read audit log %s: %w", l.path, fs.ErrClosed)
	}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	if history {
		if v.old, err = l.openRotated(l.opts.Keep, 1); err != nil {
			return v, err
		}
	}
	if v.cur, err = os.Open(l.path); err != nil {
		return v, fmt.Errorf("read audit log: %w", err)
	}
	fi, err := v.cur.Stat()
	if err != nil {
		return v, fmt.Errorf("read audit log: %w", err)
	}
	v.end, v.gen = fi.Size(), l.gen
	if watch {
		v.changed = l.watch()
	}
	return v, nil
}

// follow is what a follower of the file current at gen reads next: a
// channel closed at the next change and, if the file was rotated since,
// the files rotated after it and the current one.
func (l *Log) follow(gen uint64) (v files, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return files{}, fmt.Errorf("read audit log %s: %w", l.path, fs.ErrClosed)
	}
	v.changed = l.watch()
	if l.gen == gen {
		return v, nil
	}
	// The file current at gen g is now path.(l.gen-g); those rotated
	// more than Keep times are gone.
	newest := 1
	oldest := int(min(l.gen-gen-1, uint64(l.opts.Keep)))
	if v.old, err = l.openRotated(oldest, newest); err != nil {
		return v, err
	}
	if v.cur, err = os.Open(l.path); err != nil {
		v.closeOld()
		return files{}, fmt.Errorf("read audit log: %w", err)
	}
	v.gen = l.gen
	return v, nil
}

// openRotated opens path.from down to path.to, the ones that exist.
func (l *Log) openRotated(from, to int) ([]*os.File, error) {
	var out []*os.File
	for k := from; k >= to; k-- {
		f, err := os.Open(l.rotated(k))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// watch returns the channel closed at the next change. l.mu is held.
func (l *Log) watch() <-chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// readBack returns the entries f selects in v, the last n if n > 0 (then
// the older files are read only if the newer ones have fewer), how many
// lines it skipped, and the scanner of v.cur, at v.end or just before a
// line not yet whole there.
func readBack(v files, f Filter, n int) ([]Entry, int, *lineScanner, error) {
	s := &lineScanner{r: v.cur}
	out, skipped, err := readOld(s, v.end, f, n)
	if err != nil {
		return nil, skipped, s, err
	}
	if s.pos < v.end {
		skipped++ // a last line without its newline
	}
	for i := len(v.old) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		sc := &lineScanner{r: v.old[i]}
		more, sk, err := readOld(sc, -1, f, n)
		skipped += sk
		if err != nil {
			return nil, skipped, s, err
		}
		if fi, err := v.old[i].Stat(); err == nil && sc.pos < fi.Size() {
			skipped++ // torn
		}
		out = append(more, out...)
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, skipped, s, nil
}

// readOld returns the entries f selects among the whole lines of s up to
// end, the last n if n > 0, and how many lines it skipped.
func readOld(s *lineScanner, end int64, f Filter, n int) ([]Entry, int, error) {
	var out []Entry
	bad := 0
	skipped, err := s.scan(end, func(line []byte) error {
		e, err := ParseLine(line)
		if err != nil {
			bad++
			return nil
		}
		if !f.Match(e) {
			return nil
		}
		out = append(out, e)
		if n > 0 && len(out) > 2*n { // keep memory to O(n), copying seldom
			out = append(out[:0], out[len(out)-n:]...)
		}
		return nil
	})
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, skipped + bad, err
}

// lineScanner reads the lines of the file from an offset on, across calls.
// A line not yet whole at the end of the file is left for the next call,
// so no reader takes half a line that is still being written for a
// damaged one.
type lineScanner struct {
	r   io.ReaderAt
	pos int64 // the offset of the first byte not yet consumed
	// over: the bytes before pos began a line already longer than maxLine,
	// counted as skipped; the rest of it, up to its newline, is dropped.
	over bool
	buf  []byte // what ReadAt reads into
	line []byte // a line split across reads
}

// scan calls emit with each whole line, newline excluded, between s.pos
// and end (the end of the file if end < 0), except lines over maxLine,
// which it skips and counts. The slice given to emit is reused after it
// returns. An error from emit stops the scan and is returned as it is.
func (s *lineScanner) scan(end int64, emit func([]byte) error) (skipped int, err error) {
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	s.line = s.line[:0]
	off := s.pos
	for end < 0 || off < end {
		b := s.buf
		if end >= 0 && end-off < int64(len(b)) {
			b = b[:end-off]
		}
		n, rerr := s.r.ReadAt(b, off)
		b = b[:n]
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 { // the line goes on past this read
				off += int64(len(b))
				switch {
				case s.over:
					s.pos = off
				case len(s.line)+len(b) > maxLine:
					// Consumed now: it cannot become a line we keep.
					s.over, s.line, s.pos = true, s.line[:0], off
					skipped++
				default:
					s.line = append(s.line, b...)
				}
				break
			}
			off += int64(i + 1)
			s.pos = off
			switch {
			case s.over:
				s.over = false // its end; it was counted when it grew too long
			case len(s.line)+i > maxLine:
				skipped++
			case len(s.line) == 0:
				err = emit(b[:i])
			default:
				s.line = append(s.line, b[:i]...)
				err = emit(s.line)
			}
			if err != nil {
				return skipped, err
			}
			s.line = s.line[:0]
			b = b[i+1:]
		}
		if rerr == io.EOF || n == 0 && rerr == nil {
			break
		}
		if rerr != nil {
			return skipped, fmt.Errorf("read audit log: %w", rerr)
		}
	}
	return skipped, nil
}

// ParseLine decodes one line of the log, with or without its newline. It
// refuses a line over 64 KiB, one that is not exactly one JSON object (a
// torn line, trailing bytes, null), one whose fields have the wrong types,
// and one without a time or an action, which Record never writes. Unknown
// fields are ignored (see the package doc). An empty Argv comes back nil.
func ParseLine(b []byte) (Entry, error) {
	if len(b) > maxLine {
		return Entry{}, fmt.Errorf("audit log line of %d bytes is over the %d-byte limit: %w", len(b), maxLine, errdefs.ErrInvalid)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Entry{}, fmt.Errorf("audit log line is not a JSON object: %w", errdefs.ErrInvalid)
	}
	var e Entry
	// Unmarshal checks the whole input first: bytes after the object fail.
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("audit log line: %w: %w", errdefs.ErrInvalid, err)
	}
	if e.Time.IsZero() || e.Action == "" {
		return Entry{}, fmt.Errorf("audit log line has no time or no action: %w", errdefs.ErrInvalid)
	}
	if len(e.Argv) == 0 {
		e.Argv = nil // so that an entry survives a round trip through omitempty
	}
	return e, nil
}
