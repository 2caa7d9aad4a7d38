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
//
// # Bounds
//
// No one person can make the log large, and what is left out is counted,
// never dropped silently (Options; the defaults in brackets):
//
//   - A refusal, an entry with an Error (the action was refused, or
//     failed), is short: at most 64 bytes of each name (user, session,
//     owner, role, target), 128 of Detail, 256 of Error and 4 items of Argv
//     of 32 bytes each, so at most 512 bytes of detail and 1 KiB a line.
//     An accepted action keeps up to 4 KiB of each field, 64 KiB a line.
//   - Refusals are recorded at a rate per person (by UID): a burst of
//     RefusalBurst [20], then RefusalRate [1] a second. One over the rate
//     is counted, not written; the count, with the actions counted, is
//     written as an ActionSuppressed entry of that person (Entry.Suppressed)
//     just before their next entry, or as soon as the rate allows one more,
//     or at Close, whichever comes first. So one person's flood writes
//     about 1 KiB a second, and other people's entries are not held up.
//     Accepted actions are never limited: each one is recorded.
//   - The file is rotated before a line would take it past MaxBytes
//     [32 MiB]: path becomes path.1, path.1 path.2, and so on to path.Keep
//     [3]; the oldest goes. So the log takes at most (Keep+1)×MaxBytes
//     [128 MiB] of disk. Read and ReadFollow read the rotated files too,
//     oldest first; a follower more than Keep rotations behind misses the
//     files rotated away meanwhile.
//
// One Log rotates the file. A second Log appending to the same file (as
// another process would) goes on appending safely, and follows a rotation
// by the first at its own next one.
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
	"strconv"
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
	// Suppressed, on an ActionSuppressed entry, is how many refusals of
	// this person (UID) went over the rate and were not recorded, since
	// their entry before this one.
	Suppressed int `json:"suppressed,omitempty"`
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
	// ActionSuppressed counts a person's refusals that went over the rate
	// and were not recorded (Suppressed); Detail says which actions. It
	// has the session of those refusals if they were all on one.
	ActionSuppressed = "suppressed"
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

	// A refusal's bounds: its names, Detail, Error, the items of Argv
	// and the bytes of each, and its line (see the package doc).
	refusalField   = 64
	refusalDetail  = 128
	refusalError   = 256
	refusalArgv    = 4
	refusalArg     = 32
	maxRefusalLine = 1 << 10
)

// bounds are what encode keeps of an entry.
type bounds struct {
	field, detail, err int // bytes of each name, of Detail, of Error
	argv, arg          int // items of Argv, bytes of each
	line               int // bytes of the line, newline excluded
}

var (
	acceptedBounds = bounds{fieldMax, fieldMax, fieldMax, argvMax, fieldMax, maxLine}
	refusalBounds  = bounds{refusalField, refusalDetail, refusalError, refusalArgv, refusalArg, maxRefusalLine}
)

// half is b with every bound but the line's halved.
func (b bounds) half() bounds {
	return bounds{b.field / 2, b.detail / 2, b.err / 2, b.argv / 2, b.arg / 2, b.line}
}

// Defaults of Options.
const (
	DefaultMaxBytes     = 32 << 20
	DefaultKeep         = 3
	DefaultRefusalRate  = 1.0
	DefaultRefusalBurst = 20
)

// Options bound a Log (see the package doc). A zero field takes its
// default.
type Options struct {
	// MaxBytes is the size the file is rotated at: no line takes it past,
	// unless the line alone is longer. Negative: never rotated.
	MaxBytes int64
	// Keep is how many rotated files are kept, path.1 (the newest) to
	// path.Keep.
	Keep int
	// RefusalRate is how many refusals a second one person may have
	// recorded, after a burst of RefusalBurst. Negative: every refusal is
	// recorded.
	RefusalRate  float64
	RefusalBurst int
}

func (o Options) withDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.RefusalRate == 0 {
		o.RefusalRate = DefaultRefusalRate
	}
	if o.RefusalBurst <= 0 {
		o.RefusalBurst = DefaultRefusalBurst
	}
	return o
}

// Log is an append-only audit log file. It is safe for concurrent use.
type Log struct {
	path string
	opts Options
	now  func() time.Time

	mu    sync.Mutex
	w     *os.File    // O_WRONLY|O_APPEND: Record's writes
	wInfo fs.FileInfo // w's, to tell whether path still names it
	size  int64       // w's size: its size at open, and what was written since
	// gen counts the rotations: the file current at gen g is, at gen G,
	// path.(G-g). A follower that sees gen move on reads the files between.
	gen    uint64
	closed bool
	// torn marks a file whose last line stopped short (a crash, a full
	// disk): the next line starts on a new one, so only the torn entry is
	// lost.
	torn bool
	// changed is closed, then dropped, when a line is appended or the log
	// is closed; followers wait on it. It is made only when someone waits.
	changed chan struct{}
	// quota is each person's refusal rate, by UID (see admit).
	quota map[uint32]*quota
}

// Open opens the audit log at path with the default Options; see OpenWith.
func Open(path string) (*Log, error) { return OpenWith(path, Options{}) }

// OpenWith opens the audit log at path for appending and reading, creating
// the file with mode 0600, and its directory with mode 0700, if they are
// missing. An existing file is kept, its mode tightened to 0600 if group or
// others could read it: the log holds command lines of every user. Rotated
// files beyond o.Keep (left by a larger Keep) are removed.
func OpenWith(path string, o Options) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log directory: %w", err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l, err := open(path, w, o.withDefaults())
	if err != nil {
		w.Close()
		return nil, err
	}
	if l.opts.MaxBytes > 0 {
		for k := l.opts.Keep + 1; os.Remove(l.rotated(k)) == nil; k++ {
		}
	}
	return l, nil
}

// open finishes OpenWith once w is open.
func open(path string, w *os.File, o Options) (*Log, error) {
	wi, err := w.Stat()
	if err == nil {
		var pi fs.FileInfo
		if pi, err = os.Stat(path); err == nil && !os.SameFile(wi, pi) {
			err = fmt.Errorf("audit log %s was replaced while being opened; start again", path)
		}
	}
	if err == nil && !wi.Mode().IsRegular() {
		err = fmt.Errorf("audit log %s is not a regular file (%s): give a file path", path, wi.Mode().Type())
	}
	if err == nil && wi.Mode().Perm()&0o077 != 0 {
		err = w.Chmod(0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l := &Log{path: path, opts: o, now: time.Now, w: w, wInfo: wi, size: wi.Size()}
	if wi.Size() > 0 {
		if l.torn, err = tornAt(path, wi.Size()); err != nil {
			return nil, fmt.Errorf("open audit log for reading: %w", err)
		}
	}
	return l, nil
}

// tornAt reports whether the file at path does not end with a newline at
// size.
func tornAt(path string, size int64) (bool, error) {
	r, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], size-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// rotated is the name of the k-th newest rotated file.
func (l *Log) rotated(k int) string { return l.path + "." + strconv.Itoa(k) }

// Record appends e to the log and wakes the followers. It sets e.Time to
// now, in UTC, if it is zero, and cuts overlong fields, a refusal's (an
// entry with an Error) to a few hundred bytes (see the package doc; the
// caller's Argv is not written to). A refusal over its person's rate is
// counted instead, and Record returns nil. An entry with no Action is
// refused. Every failure is returned: the caller decides whether an action
// it cannot audit may go on.
func (l *Log) Record(e Entry) error {
	if e.Action == "" {
		return fmt.Errorf("audit entry by %q has no action; set Entry.Action to one of the audit.Action constants: %w", e.User, errdefs.ErrInvalid)
	}
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
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
	q, ok := l.admit(e)
	if !ok {
		return nil // counted
	}
	var count *Entry
	if q != nil && q.n > 0 {
		c := q.take(e.UID, l.now())
		count = &c
		cl, err := encode(c)
		if err != nil { // unreachable: a count is short and has a time
			return fmt.Errorf("audit entry %s by %q: %w", c.Action, c.User, err)
		}
		line = append(cl, line...)
	}
	n, err := l.write(line)
	if n == 0 && err != nil && count != nil {
		q.untake(*count)
	}
	if err != nil {
		return fmt.Errorf("record %s by %q in audit log: %w", e.Action, e.User, err)
	}
	return nil
}

// write appends whole lines to the file, rotating it first if they would
// take it past MaxBytes, and wakes the followers. l.mu is held. n is how
// many bytes were written; with all of them, an error is the rotation's
// (the lines are in the file that was not rotated).
func (l *Log) write(line []byte) (n int, err error) {
	var rerr error
	if l.opts.MaxBytes > 0 && l.size > 0 && l.size+int64(len(line)) > l.opts.MaxBytes {
		if rerr = l.rotate(); rerr != nil {
			rerr = fmt.Errorf("recorded, but not rotated past %d bytes: %w", l.opts.MaxBytes, rerr)
		}
	}
	if l.torn {
		line = append([]byte{'\n'}, line...)
	}
	// One write(2) of whole lines, at the end of the file (O_APPEND):
	// lines never interleave. os.File.Write writes again only after a
	// short write, which a regular file has only when the disk is full.
	n, err = l.w.Write(line)
	l.size += int64(n)
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
		return n, err
	}
	return n, rerr
}

// rotate renames path.(Keep-1) to path.Keep, …, path to path.1, and opens
// a new path. If path no longer names the file written (another Log
// rotated it, or it was removed), it only opens what path names now. l.mu
// is held. On an error the file written stays as it is.
func (l *Log) rotate() error {
	if pi, err := os.Stat(l.path); err == nil && os.SameFile(pi, l.wInfo) {
		for k := l.opts.Keep; k > 1; k-- {
			if err := os.Rename(l.rotated(k-1), l.rotated(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		if err := os.Rename(l.path, l.rotated(1)); err != nil {
			return err
		}
	}
	// The file written is now path.1: followers go on to the new path.
	l.gen++
	w, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open a new %s (appending to %s meanwhile): %w", l.path, l.rotated(1), err)
	}
	wi, err := w.Stat()
	if err != nil {
		w.Close()
		return err
	}
	old := l.w
	l.w, l.wInfo, l.size, l.torn = w, wi, wi.Size(), false
	old.Close()
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
// before it, or maxRefusalLine for a refusal. Fields are cut to fieldMax
// bytes and Argv to argvMax items, a refusal's to refusalBounds; if the line
// is still too long (JSON escapes can make a byte six), the bounds are
// halved until it fits.
func encode(e Entry) ([]byte, error) {
	b := acceptedBounds
	if e.Error != "" {
		b = refusalBounds
	}
	for ; b.field >= 8; b = b.half() {
		c := e
		clamp(&c, b)
		line, err := marshalLine(c)
		if err != nil {
			return nil, err
		}
		if len(line)-1 <= b.line {
			return line, nil
		}
	}
	// Unreachable: at 8 bytes a field, an entry is well under 1 KiB escaped.
	return nil, fmt.Errorf("audit entry does not fit in %d bytes", b.line)
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

// clamp cuts the fields of e to b, in place; e.Argv is replaced, never
// written to. The last item of Argv kept says how many more there were.
func clamp(e *Entry, b bounds) {
	for _, p := range []*string{&e.User, &e.Action, &e.Session, &e.SessionName, &e.Owner, &e.Role, &e.Target} {
		*p = clip(*p, b.field)
	}
	e.Detail, e.Error = clip(e.Detail, b.detail), clip(e.Error, b.err)
	fm, am := b.arg, max(b.argv, 1)
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

// Close writes the counts of refusals not yet recorded (see the package
// doc) and closes the log; Record, Read and ReadFollow then fail with an
// error wrapping fs.ErrClosed, and followers return. Closing again does
// nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	werr := l.flushAll()
	l.closed = true
	l.wake()
	return errors.Join(werr, l.w.Sync(), l.w.Close())
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
