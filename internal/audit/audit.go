// Package audit keeps paddock's audit log: who did what on a multi-user
// Runner. It is one append-only file of JSON Lines, one Entry a line, for
// example
//
//	{"time":"2026-11-29T18:00:00.123456789Z","user":"ann","uid":1000,"action":"exec","session":"5f0c3a8e9b","session_name":"web","owner":"bob","argv":["make","test"],"admin":true}
//
// Lines are only ever appended, each by one write(2) on a file opened with
// O_APPEND, so they never interleave, not even with a second process
// appending to the same file. Readers read the file itself, by offset: what
// they return is what was written, and a line that is damaged (torn by a
// crash, or not written by this package) is skipped and counted, never
// fatal.
//
// Readers tolerate fields they do not know, so that a Runner downgraded
// after an upgrade still shows every entry of the newer one.
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
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/logkey"
)

// Entry is one audited action.
type Entry struct {
	Time time.Time `json:"time"`
	// User is the host user name of who acted, UID their uid.
	User   string `json:"user"`
	UID    uint32 `json:"uid"`
	Action string `json:"action"` // one of the Action constants
	// Session is the session id, SessionName its name, Owner the user name
	// of its owner.
	Session     string `json:"session,omitempty"`
	SessionName string `json:"session_name,omitempty"`
	Owner       string `json:"owner,omitempty"`
	// Role is the role of an attach or a share.
	Role string `json:"role,omitempty"`
	// Target is the other user of a share or unshare, or whose credential
	// was set or removed.
	Target string `json:"target,omitempty"`
	// Argv is the command line of an exec.
	Argv []string `json:"argv,omitempty"`
	// Detail is free text: the changes of a set, the duration of a span, …
	Detail string `json:"detail,omitempty"`
	// Admin marks an admin acting on someone else's session.
	Admin bool `json:"admin,omitempty"`
	// Error says why, when the action was refused or failed.
	Error string `json:"error,omitempty"`
}

// Actions. Readers must accept others: a newer Runner may add some.
const (
	ActionCreate = "create"
	ActionAttach = "attach"
	// ActionDetach ends a drive or observe span begun by an attach; Detail
	// has its duration.
	ActionDetach           = "detach"
	ActionExec             = "exec"
	ActionShare            = "share"
	ActionUnshare          = "unshare"
	ActionSet              = "set"
	ActionEgressApprove    = "egress-approve"
	ActionEgressDeny       = "egress-deny"
	ActionSleep            = "sleep"
	ActionFreeze           = "freeze"
	ActionWake             = "wake"
	ActionRemove           = "rm"
	ActionCredentialSet    = "credential-set"
	ActionCredentialRemove = "credential-rm"
	ActionWebLogin         = "web-login"
	ActionPrune            = "prune"
	// A session written out to a file, and one made from such a file
	// (paddock session export, import); Detail says what moved.
	ActionExport = "export"
	ActionImport = "import"
	// The owner's paddock credential login and logout (who did it).
	ActionCredentialLogin  = "credential-login"
	ActionCredentialLogout = "credential-logout"
)

// Bounds on one record, so that no caller, however long the command line
// or error it logs, can make a line that hides the rest or that readers
// refuse.
const (
	// fieldMax is the most bytes Record keeps of each string field and of
	// each argument of Argv; a longer one is cut, the cut marked "…".
	fieldMax = 4 << 10
	// argvMax is the most items Record keeps of Argv; the last one kept
	// then says how many more there were.
	argvMax = 256
	// maxLine is the longest line, newline excluded, that Record writes
	// and ParseLine accepts.
	maxLine = 64 << 10
	// minPrefix is the shortest session id prefix a Filter matches.
	minPrefix = 4
)

// Log is an append-only audit log file. It is safe for concurrent use.
type Log struct {
	path string
	w    *os.File // O_WRONLY|O_APPEND: Record's writes
	r    *os.File // O_RDONLY: the readers' preads, which share no offset

	mu     sync.Mutex
	closed bool
	// torn marks a file whose last line stopped short (a crash, a full
	// disk): the next line starts on a new one, so only the torn entry is
	// lost.
	torn bool
	// changed is closed, then dropped, when a line is appended or the log
	// is closed; followers wait on it. It is made only when someone waits.
	changed chan struct{}
}

// Open opens the audit log at path for appending and reading, creating the
// file with mode 0600, and its directory with mode 0700, if they are
// missing. An existing file is kept, its mode tightened to 0600 if group or
// others could read it: the log holds command lines of every user.
func Open(path string) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log directory: %w", err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l, err := open(path, w)
	if err != nil {
		w.Close()
		return nil, err
	}
	return l, nil
}

// open finishes Open once w is open.
func open(path string, w *os.File) (*Log, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log for reading: %w", err)
	}
	wi, err := w.Stat()
	if err == nil {
		var ri fs.FileInfo
		if ri, err = r.Stat(); err == nil && !os.SameFile(wi, ri) {
			err = fmt.Errorf("audit log %s was replaced while being opened; start again", path)
		}
	}
	if err == nil && !wi.Mode().IsRegular() {
		err = fmt.Errorf("audit log %s is not a regular file (%s): give a file path", path, wi.Mode().Type())
	}
	if err == nil && wi.Mode().Perm()&0o077 != 0 {
		err = w.Chmod(0o600)
	}
	l := &Log{path: path, w: w, r: r}
	if err == nil && wi.Size() > 0 {
		var last [1]byte
		if _, err = r.ReadAt(last[:], wi.Size()-1); err == nil {
			l.torn = last[0] != '\n'
		}
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return l, nil
}

// Record appends e to the log and wakes the followers. It sets e.Time to
// now, in UTC, if it is zero, and cuts overlong fields (see fieldMax and
// argvMax; the caller's Argv is not written to). An entry with no Action is
// refused. Every failure is returned: the caller decides whether an action
// it cannot audit may go on.
func (l *Log) Record(e Entry) error {
	if e.Action == "" {
		return fmt.Errorf("audit entry by %q has no action; set Entry.Action to one of the audit.Action constants: %w", e.User, errdefs.ErrInvalid)
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	line, err := encode(e)
	if err != nil {
		return fmt.Errorf("audit entry %s by %q: %w", e.Action, e.User, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("record %s by %q: audit log %s is closed: %w", e.Action, e.User, l.path, fs.ErrClosed)
	}
	if l.torn {
		line = append([]byte{'\n'}, line...)
	}
	// One write(2) of a whole line, at the end of the file (O_APPEND):
	// lines never interleave. os.File.Write writes again only after a
	// short write, which a regular file has only when the disk is full.
	n, err := l.w.Write(line)
	switch {
	case n == len(line):
		l.torn = false
	case n > 0:
		l.torn = true // stopped mid-line
	} // n == 0: the file is as it was, torn or not
	if n > 0 {
		l.wake()
	}
	if err != nil {
		return fmt.Errorf("record %s by %q in audit log: %w", e.Action, e.User, err)
	}
	return nil
}

// wake tells the followers that the file grew or the log closed. l.mu is held.
func (l *Log) wake() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// encode returns e as one line, newline included, no longer than maxLine
// before it. Fields are cut to fieldMax bytes and Argv to argvMax items; if
// the line is still too long (JSON escapes can make a byte six), both bounds
// are halved until it fits.
func encode(e Entry) ([]byte, error) {
	for fm, am := fieldMax, argvMax; fm >= 64; fm, am = fm/2, am/2 {
		c := e
		clamp(&c, fm, am)
		line, err := marshalLine(c)
		if err != nil {
			return nil, err
		}
		if len(line)-1 <= maxLine {
			return line, nil
		}
	}
	// Unreachable: at 64 bytes a field, an entry is a few KiB escaped.
	return nil, fmt.Errorf("audit entry does not fit in %d bytes", maxLine)
}

// marshalLine returns e as JSON and a newline, without clamping. HTML
// characters are left as they are: the file is read by people and by
// paddock, never embedded in a page, and `a && b > out` stays legible.
func marshalLine(e Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil { // Encode adds the newline
		return nil, err
	}
	return buf.Bytes(), nil
}

// clamp cuts the string fields of e and the items of e.Argv to fm bytes,
// and e.Argv to am items, in place; e.Argv is replaced, never written to.
func clamp(e *Entry, fm, am int) {
	for _, p := range []*string{&e.User, &e.Action, &e.Session, &e.SessionName, &e.Owner, &e.Role, &e.Target, &e.Detail, &e.Error} {
		*p = clip(*p, fm)
	}
	changed := len(e.Argv) > am
	for _, a := range e.Argv {
		changed = changed || len(a) > fm
	}
	if !changed {
		return
	}
	argv := make([]string, 0, min(len(e.Argv), am))
	for i, a := range e.Argv {
		if i == am-1 && len(e.Argv) > am {
			argv = append(argv, fmt.Sprintf("…(%d more)", len(e.Argv)-i))
			break
		}
		argv = append(argv, clip(a, fm))
	}
	e.Argv = argv
}

// clip cuts s to at most n bytes, the cut marked.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return logkey.Clip(s, n-len("…"))
}

// Close closes the log; Record, Read and ReadFollow then fail with an error
// wrapping fs.ErrClosed, and followers return. Closing again does nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.wake()
	return errors.Join(l.w.Sync(), l.w.Close(), l.r.Close())
}

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

// Read returns the entries f selects, oldest first; only the last n when
// n > 0. Lines that are not entries (ParseLine refuses them) are skipped;
// skipped counts them, a torn last line included.
func (l *Log) Read(f Filter, n int) (entries []Entry, skipped int, err error) {
	end, _, err := l.snapshot(false)
	if err != nil {
		return nil, 0, err
	}
	s := &lineScanner{r: l.r}
	entries, skipped, err = readOld(s, end, f, n)
	if err != nil {
		return nil, skipped, err
	}
	if s.pos < end {
		skipped++ // a last line without its newline
	}
	return entries, skipped, nil
}

// ReadFollow calls fn with the entries f selects, oldest first: the last n
// already in the log (all of them if n <= 0), then each one appended after
// the call began, until ctx is done, fn returns an error or the log is
// closed. It returns ctx.Err(), fn's error as it is, or an error wrapping
// fs.ErrClosed. No entry is missed or given twice between the two parts:
// both read the file from one position. Damaged lines are skipped, as in
// Read.
//
// ReadFollow does not poll: it sleeps until Record (of this Log) appends.
// It reads what it returns from the file, so lines another process appended
// are returned too, with the next Record of this Log. fn is called with no
// lock held and may call Record.
func (l *Log) ReadFollow(ctx context.Context, f Filter, n int, fn func(Entry) error) error {
	end, changed, err := l.snapshot(true)
	if err != nil {
		return err
	}
	s := &lineScanner{r: l.r}
	old, _, err := readOld(s, end, f, n)
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
		if _, changed, err = l.snapshot(true); err != nil {
			return err
		}
	}
}

// snapshot returns the size of the file, which is the end of a whole line
// of this Log since Record holds l.mu while writing, and, if watch is set,
// a channel closed at the next change.
func (l *Log) snapshot(watch bool) (end int64, changed <-chan struct{}, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, nil, fmt.Errorf("read audit log %s: %w", l.path, fs.ErrClosed)
	}
	fi, err := l.r.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("read audit log: %w", err)
	}
	if watch {
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed = l.changed
	}
	return fi.Size(), changed, nil
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
