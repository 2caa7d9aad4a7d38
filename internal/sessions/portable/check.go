package portable

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"strings"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// entryKind is how an entry's data is checked.
type entryKind int

const (
	kindOther     entryKind = iota // any bytes (CLAUDE.md, plans, file history)
	kindSettings                   // session.json: decoded by Read, whole
	kindDecisions                  // decisions.jsonl: every line an entry
	kindLines                      // a .jsonl of Claude Code's: every line JSON
	kindObject                     // .claude.json, settings.json: a JSON object, whole
	kindJSON                       // another .json: JSON, whole
)

// kindOf says how the data of the entry named name (an entry of the tar
// stream) is checked.
func kindOf(name string) entryKind {
	switch {
	case name == SettingsName:
		return kindSettings
	case name == DecisionsName:
		return kindDecisions
	case strings.HasPrefix(name, ClaudePrefix):
		return claudeKind(strings.TrimPrefix(name, ClaudePrefix))
	}
	return kindOther
}

// claudeKind is kindOf for a path relative to ~/.claude.
func claudeKind(p string) entryKind {
	switch {
	case strings.HasSuffix(p, ".jsonl"):
		return kindLines
	case p == ".claude.json" || p == "settings.json":
		return kindObject
	case strings.HasSuffix(p, ".json"):
		return kindJSON
	}
	return kindOther
}

// tally counts what the entries of one file hold together, against
// Limits.MaxLines and Limits.MaxDecisions.
type tally struct {
	lines, decisions int
}

// entryCheck checks one entry's data as it arrives, chunk by chunk:
// every line of a JSON lines entry as soon as it ends, within
// Limits.MaxLine, the lines of all entries within the tally's bounds; so
// a file that breaks a rule is refused at the first byte that breaks it,
// not after it was read whole. The data is kept only where it is needed:
// when keep (Read, whose caller uses it), and for what is checked whole
// (the JSON documents). A kept buffer grows with what arrives, never past
// the entry's size and never by more than it: what a header claims
// allocates nothing.
type entryCheck struct {
	label string // the entry's name in errors: a path under ~/.claude for Claude Code's files
	kind  entryKind
	lim   Limits
	tally *tally // nil: no bounds across entries
	keep  bool
	size  int64     // the entry's size: data never grows past it
	hash  hash.Hash // nil: not hashed

	data    []byte // what arrived, when kept
	pending []byte // the line not ended yet, when data is not kept
	partial int64  // its length
	line    int    // lines ended so far

	// decode has decisions.jsonl's lines decoded into decisions.
	decode    bool
	decisions []decisionlog.Entry
}

func newEntryCheck(name string, size int64, lim Limits, t *tally, keep bool) *entryCheck {
	label := name
	if strings.HasPrefix(name, ClaudePrefix) {
		label = strings.TrimPrefix(name, ClaudePrefix)
	}
	return &entryCheck{label: label, kind: kindOf(name), lim: lim, tally: t, keep: keep, size: size}
}

// whole says whether the data must be held to be checked.
func (c *entryCheck) whole() bool {
	return c.kind == kindSettings || c.kind == kindObject || c.kind == kindJSON
}

// Write takes the next chunk of the entry's data.
func (c *entryCheck) Write(p []byte) (int, error) {
	if c.hash != nil {
		c.hash.Write(p)
	}
	if c.keep || c.whole() {
		c.data = grow(c.data, p, c.size)
	}
	if c.kind == kindLines || c.kind == kindDecisions {
		if err := c.lines(p); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// grow appends p to b, growing b's capacity at most to size (when p fits
// in it) and never more than double what arrived.
func grow(b, p []byte, size int64) []byte {
	need := len(b) + len(p)
	if need <= cap(b) {
		return append(b, p...)
	}
	n := max(2*cap(b), need, 64<<10)
	if int64(n) > size && int64(need) <= size {
		n = int(size)
	}
	nb := make([]byte, len(b), n)
	copy(nb, b)
	return append(nb, p...)
}

// lines checks every line p ends; a line not ended yet waits for more.
func (c *entryCheck) lines(p []byte) error {
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if c.partial += int64(len(p)); c.partial > c.lim.MaxLine {
				return c.longLine()
			}
			if !c.keep {
				c.pending = append(c.pending, p...)
			}
			return nil
		}
		n := c.partial + int64(i)
		if n > c.lim.MaxLine {
			return c.longLine()
		}
		var line []byte
		switch {
		case c.keep: // the line is the end of data, up to p's i-th byte
			end := len(c.data) - len(p) + i
			line = c.data[end-int(n) : end]
		case len(c.pending) == 0:
			line = p[:i]
		default:
			c.pending = append(c.pending, p[:i]...)
			line = c.pending
		}
		if err := c.checkLine(line); err != nil {
			return err
		}
		c.pending, c.partial = c.pending[:0], 0
		p = p[i+1:]
	}
}

func (c *entryCheck) longLine() error {
	return bad("%s: line %d is longer than %d bytes, the most a line of a session file may have", clip(c.label), c.line+1, c.lim.MaxLine)
}

// checkLine checks one line (without its newline).
func (c *entryCheck) checkLine(l []byte) error {
	c.line++
	if len(bytes.TrimSpace(l)) == 0 {
		return nil
	}
	switch c.kind {
	case kindLines:
		if c.tally != nil {
			if c.tally.lines++; c.tally.lines > c.lim.MaxLines {
				return bad("its JSON lines files hold more than %d lines in all, the most a session file may have", c.lim.MaxLines)
			}
		}
		if !json.Valid(l) {
			return bad("%s: line %d is not JSON (a transcript is JSON lines)", clip(c.label), c.line)
		}
	case kindDecisions:
		if c.tally != nil {
			if c.tally.decisions++; c.tally.decisions > c.lim.MaxDecisions {
				return bad("%s holds more than %d entries, the most a session file may have", DecisionsName, c.lim.MaxDecisions)
			}
		}
		var e decisionlog.Entry
		if err := json.Unmarshal(l, &e); err != nil {
			return bad("%s: line %d is not a decision log entry", DecisionsName, c.line)
		}
		if c.decode {
			e.Session = ""
			decisionlog.Clamp(&e)
			c.decisions = append(c.decisions, e)
		}
	}
	return nil
}

// Close checks what can be checked only at the end: the last line, if
// no newline ends it, and a document checked whole.
func (c *entryCheck) Close() error {
	if c.kind == kindLines || c.kind == kindDecisions {
		line := c.pending
		if c.keep {
			line = c.data[len(c.data)-int(c.partial):]
		}
		// As the lines before: a last line without its newline is a line.
		if err := c.checkLine(line); err != nil {
			return err
		}
		c.pending, c.partial = nil, 0
	}
	switch c.kind {
	case kindObject:
		if _, ok := decodeObject(c.data); !ok {
			return bad("%s: not a JSON object", c.label)
		}
	case kindJSON:
		if !json.Valid(c.data) {
			return bad("%s: not JSON", clip(c.label))
		}
	}
	return nil
}

// checkData checks an entry's data, given whole (Write, and files
// checked outside a session file).
func checkData(name string, data []byte, lim Limits, t *tally) error {
	c := newEntryCheck(name, int64(len(data)), lim, t, false)
	if _, err := c.Write(data); err != nil {
		return err
	}
	return c.Close()
}

// chunk is how much of an entry Read takes at a time.
const chunk = 64 << 10

// copyEntry streams r, an entry of size bytes, into c, a chunk at a
// time; errCut if r ends before size bytes.
func copyEntry(c *entryCheck, r io.Reader, size int64, buf []byte) error {
	for size > 0 {
		n, err := r.Read(buf[:min(int64(len(buf)), size)])
		if n > 0 {
			size -= int64(n)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case size == 0:
			return nil
		case errors.Is(err, io.EOF):
			return errCut
		case err != nil:
			return err
		}
	}
	return nil
}

// errCut is copyEntry's error for an entry that ends early.
var errCut = errors.New("cut short")
