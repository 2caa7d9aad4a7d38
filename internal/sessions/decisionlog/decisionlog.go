// Package decisionlog keeps one line per proxy decision for each session, as
// JSON Lines in <state-dir>/logs/<session>.jsonl, for `paddock logs` and
// `paddock ledger`. Under a Retention cap the file is rotated into parts
// <session>.jsonl.<n> and the oldest dropped, what they counted carried
// over in <session>.carry.json (retention.go).
//
// An Entry holds no secret by construction: it has no field that could carry
// a header value or a body.
package decisionlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
)

// Entry is one decision of the credential proxy or, with Kind "egress",
// of the egress proxy.
type Entry struct {
	Time time.Time `json:"time"`
	// Kind is "" for the credential proxy, "egress" for the egress proxy,
	// "service" for the service credentials' proxy (its requests, with
	// the credential proxy's decision words).
	Kind string `json:"kind,omitempty"`
	// Egress: the name and port asked for, the address dialed, the rule.
	Host      string `json:"host,omitempty"`
	Port      int    `json:"port,omitempty"`
	Addr      string `json:"addr,omitempty"`
	Rule      string `json:"rule,omitempty"`
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	// Decision is what was done: Forwarded, Refused or Local for the
	// credential proxy, the egress proxy's own (decision.go) for "egress".
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason,omitempty"`
	Status   int      `json:"status"`
	BytesIn  int64    `json:"bytes_in"`
	BytesOut int64    `json:"bytes_out"`
	// DurationMS is from the request's arrival to the last response byte.
	DurationMS          float64  `json:"duration_ms"`
	Model               string   `json:"model,omitempty"`
	Stream              bool     `json:"stream,omitempty"`
	InputTokens         int64    `json:"input_tokens,omitempty"`
	OutputTokens        int64    `json:"output_tokens,omitempty"`
	CacheReadTokens     int64    `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64    `json:"cache_creation_tokens,omitempty"`
	ToolResultIDs       []string `json:"tool_result_ids,omitempty"`
	UpstreamRequestID   string   `json:"upstream_request_id,omitempty"`
	// MessageID is the id of the message the upstream answered with, and
	// ToolUseIDs the ids of the tool_use blocks in it (at most idsMax):
	// what joins a request to the turn it produced in the transcript.
	MessageID  string   `json:"message_id,omitempty"`
	ToolUseIDs []string `json:"tool_use_ids,omitempty"`
	// CredentialUser is whose credential the request went out with: the
	// host user who stored it (never the credential itself).
	CredentialUser string `json:"credential_user,omitempty"`
	// Service credentials (Kind "service"): the grant's secret and
	// repository, and a push's ref updates (old..new ref).
	Service    string   `json:"service,omitempty"`
	Repo       string   `json:"repo,omitempty"`
	RefUpdates []string `json:"ref_updates,omitempty"`
}

// Sink receives entries. Record must not block for long: it runs at the end
// of every proxied request.
type Sink interface {
	Record(Entry)
}

// validSession keeps a session id usable as a file name: ^[A-Za-z0-9]
// [A-Za-z0-9_.-]{0,127}$ (checked by hand: it runs on every request, and
// a regexp was a fifth of Record's time; FuzzValidSession holds the two
// equal).
func validSession(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Dir writes and reads the per-session files of one directory.
type Dir struct {
	path string
	// OnError is told about write failures (e.g. a full disk); a failed log
	// write never fails the request it describes.
	OnError func(error)

	mu    sync.Mutex
	files map[string]*os.File
	// torn marks files whose last write stopped mid-line (a full disk):
	// the next line starts on a new one, so only the torn entry is lost.
	torn map[string]bool
	buf  []byte // the line being written, under mu

	// Retention (retention.go), under mu: the caps, what Record knows of
	// each part being written, and the sweeper's signals. sweepMu orders
	// sweeps against readers; it is taken before mu.
	ret      Retention
	state    map[string]*fileState
	now      func() time.Time // tests' clock; nil is time.Now
	kick     chan struct{}
	done     chan struct{}
	due      map[string]bool
	sweeping sync.WaitGroup
	sweepMu  sync.Mutex
}

// OpenDir prepares dir (mode 0700).
func OpenDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("decision log directory: %w", err)
	}
	return &Dir{path: dir, files: map[string]*os.File{}, torn: map[string]bool{}, state: map[string]*fileState{}}, nil
}

// Record implements Sink. Entries without a session (a request with no valid
// token) are not written here; the Runner's own log has them. Fields a box
// chooses (the model and tool-result ids from its request body, the names
// it asks the egress proxy for, …) are cut to fieldMax bytes, and the ids
// to idsMax, so that one request cannot make a line that hides the rest.
func (d *Dir) Record(e Entry) {
	if !validSession(e.Session) {
		return
	}
	Clamp(&e)
	d.mu.Lock()
	defer d.mu.Unlock()
	line, ok := appendEntry(d.buf[:0], &e)
	if !ok {
		return
	}
	line = append(line, '\n')
	if cap(line) <= 64<<10 {
		d.buf = line // reused under mu; a rare huge line is not kept
	}
	f, err := d.current(e.Session, len(line), e.Time)
	if err != nil {
		d.fail(err)
		return
	}
	if d.torn[e.Session] {
		line = append([]byte{'\n'}, line...)
	}
	// One write per line with O_APPEND: lines never interleave.
	n, err := f.Write(line)
	if err != nil {
		d.fail(err)
	}
	d.grew(e.Session, n, e.Time)
	switch {
	case n == len(line):
		d.torn[e.Session] = false
	case n > 0:
		d.torn[e.Session] = true // stopped mid-line
	} // n == 0: the file is as it was, torn or not
}

// Bounds on what one entry holds of what a box chose.
const (
	fieldMax = 256
	idsMax   = 128
)

// Clamp cuts the fields of e a box or client can choose to fieldMax bytes
// and its tool ids to idsMax, in place (the caller's id slices are not
// written to). Record does it; a producer that also logs an entry elsewhere
// calls it first.
func Clamp(e *Entry) {
	for _, f := range []*string{&e.Host, &e.Addr, &e.Rule, &e.Method, &e.Path, &e.Reason, &e.Model, &e.UpstreamRequestID, &e.MessageID, &e.CredentialUser, &e.Service, &e.Repo} {
		*f = clamp(*f)
	}
	e.ToolResultIDs = clampIDs(e.ToolResultIDs)
	e.ToolUseIDs = clampIDs(e.ToolUseIDs)
	e.RefUpdates = clampIDs(e.RefUpdates)
}

// clampIDs cuts ids to idsMax entries of at most fieldMax bytes each; the
// caller's slice is not written to.
func clampIDs(ids []string) []string {
	if len(ids) > idsMax {
		ids = ids[:idsMax]
	}
	copied := false
	for i, id := range ids {
		if len(id) > fieldMax {
			if !copied {
				ids, copied = append([]string(nil), ids...), true
			}
			ids[i] = clamp(id)
		}
	}
	return ids
}

// clamp cuts s to at most fieldMax bytes, the cut marked.
func clamp(s string) string {
	if len(s) <= fieldMax {
		return s
	}
	return logkey.Clip(s, fieldMax-len("…"))
}

func (d *Dir) fail(err error) {
	if d.OnError != nil {
		d.OnError(fmt.Errorf("write decision log: %w", err))
	}
}

// Read returns the session's entries kept (its rotated parts, then the
// part being written), oldest first; at most the last n when n > 0. A
// session with no file has no entries. Damaged lines are skipped. What
// dropped parts counted is in ReadLog's answer.
func (d *Dir) Read(session string, n int) ([]Entry, error) {
	files, _, err := d.openLog(session)
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	var out []Entry
	for _, f := range files {
		err := eachEntry(f, func(e *Entry) {
			out = append(out, *e)
			if n > 0 && len(out) > 2*n {
				out = append(out[:0], out[len(out)-n:]...)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// maxLine is the longest line Read decodes; a longer one (none that Record
// writes now) is skipped whole, and the lines after it are read.
const maxLine = 1 << 20

// readLine returns the next line of br without its newline, or nil for a
// line over max bytes, which it consumes; err is io.EOF after the last.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	over := false
	for {
		frag, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(frag) > max+1 {
				over, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		switch {
		case err == nil:
			if over {
				return nil, nil
			}
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && !over && len(line) > 0:
			return line, nil // a last line without its newline
		default:
			return nil, err
		}
	}
}

// Remove deletes a session's files: its log's parts and carry.
func (d *Dir) Remove(session string) error {
	if !validSession(session) {
		return fmt.Errorf("session id %q: %w", session, errdefs.ErrInvalid)
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	d.mu.Lock()
	if f := d.files[session]; f != nil {
		f.Close()
		delete(d.files, session)
	}
	delete(d.state, session)
	d.mu.Unlock()
	err := os.Remove(filepath.Join(d.path, session+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, d.removeRotated(session))
}

// Release closes a session's open file and forgets its state, keeping
// its files (a removed session's log stays readable); a later Record
// opens it again. The Runner calls it when a session goes, so that a
// long-lived Runner holds descriptors only for sessions that exist.
func (d *Dir) Release(session string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.files[session]; f != nil {
		f.Close()
		delete(d.files, session)
	}
	delete(d.state, session)
}

// Close stops the sweeper and closes every open file.
func (d *Dir) Close() error {
	d.stopSweeper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for k, f := range d.files {
		errs = append(errs, f.Close())
		delete(d.files, k)
	}
	return errors.Join(errs...)
}

// Discard is a Sink that drops everything.
type Discard struct{}

// Record implements Sink.
func (Discard) Record(Entry) {}
