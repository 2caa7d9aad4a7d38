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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
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
	// Via is how the person reached the Runner when not its socket or the
	// web page: "token ID" for an API token.
	Via string `json:"via,omitempty"`
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
	ActionWebLogin         = "web-login" // a one-time login URL made, or (Detail "used") used
	ActionPrune            = "prune"
	// A session written out to a file, and one made from such a file
	// (paddock session export, import); Detail says what moved.
	ActionExport = "export"
	ActionImport = "import"
	// A clone session's branch brought into its host repository
	// (paddock fetch); Detail says which ref and commit.
	ActionFetch = "fetch"
	// A clone session's branch merged into a branch of the host
	// repository (paddock merge); Detail says into what, how, to what.
	ActionMerge = "merge"
	// A message typed into a session's claude (paddock send, the web
	// page's review); Detail gives its size, never its words.
	ActionMessage = "message"
	// A session's branch pushed and a pull request opened with its
	// owner's service credential (paddock pr); Detail names the branch,
	// the commit and the pull request.
	ActionPR = "pr"
	// A box port published on the host's loopback, or taken back
	// (paddock port); Detail gives the ports. ActionPreview is a person
	// entering a port's web preview.
	ActionPort    = "port"
	ActionPreview = "preview"
	// A workspace's project file accepted as it is, or its acceptance
	// taken back (paddock project allow, revoke); Target is the
	// workspace, Detail the file's hash.
	ActionProjectAllow  = "project-allow"
	ActionProjectRevoke = "project-revoke"
	// The owner's paddock credential login and logout (who did it).
	ActionCredentialLogin  = "credential-login"
	ActionCredentialLogout = "credential-logout"
	// API tokens made and revoked (Target: the token's id, Detail: its
	// scope and name).
	ActionTokenCreate = "token-create"
	ActionTokenRemove = "token-rm"
	// Passkeys: an enrolment link made (Target: for whom), and logins to
	// the web page by passkey or enrolment (Detail: how).
	ActionPasskeyLink = "passkey-link"
	ActionWebPasskey  = "web-passkey"
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
	for _, p := range []*string{&e.User, &e.Action, &e.Session, &e.SessionName, &e.Owner, &e.Role, &e.Target, &e.Via} {
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
