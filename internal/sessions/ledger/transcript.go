package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Bounds on what ParseTranscript keeps of the bytes a box wrote.
const (
	// MaxLine is the longest transcript line decoded; a longer one (a
	// tool result holding a large file, or garbage) is skipped whole and
	// counted, and the lines after it are read.
	MaxLine = 8 << 20
	// MaxInput is the largest tool input kept as it is; a larger one is
	// kept as its size only (and a command line cut to MaxInput bytes).
	MaxInput = 8 << 10
	// MaxToolUses bounds the tool calls one transcript is read for.
	MaxToolUses = 200_000
	// maxProblems bounds the notes kept of lines that were skipped.
	maxProblems = 20
)

// ToolUse is one tool call as Claude Code's transcript holds it.
type ToolUse struct {
	ID   string
	Name string
	// Input is the tool's input JSON, or nil when it was over MaxInput
	// bytes (InputBytes then says how large it was).
	Input      json.RawMessage
	InputBytes int
	// Command is the input's "command" string (what Bash runs), cut to
	// MaxInput bytes; "" when the input has none.
	Command string
	// MessageID and UpstreamRequestID are the assistant message the call
	// came in and the API's id of the request that produced it.
	MessageID         string
	UpstreamRequestID string
	// Sidechain marks a subagent's call.
	Sidechain bool
	// Result says whether the transcript holds the call's result, and
	// IsError whether that result reported an error.
	Result  bool
	IsError bool
}

// Transcript is what the ledger reads of one Claude Code transcript (or
// several, concatenated: a session's subagents write their own).
type Transcript struct {
	// ToolUses are the tool calls by id.
	ToolUses map[string]*ToolUse
	// ByRequest lists the tool call ids of each upstream request id, in
	// transcript order; MessageOf is the message id of each.
	ByRequest map[string][]string
	MessageOf map[string]string
	// Lines is the number of lines read; Skipped those that could not be
	// read (too long, not JSON, not the shape expected), with the first
	// few reasons in Problems. A skipped line never fails the parse.
	Lines    int
	Skipped  int
	Problems []string
	// Full is false when MaxToolUses was reached and later calls dropped.
	Full bool
}

// line is the part of a transcript line the ledger reads.
type line struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId"`
	Sidechain bool   `json:"isSidechain"`
	Message   *struct {
		ID      string          `json:"id"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// block is one content block of a message, either kind.
type block struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

// ParseTranscript reads a transcript as JSON Lines from r. The bytes come
// from a box and are not trusted: a line it cannot read is skipped and
// noted (Skipped, Problems), never an error; the error is only r's. What
// it keeps is bounded: lines over MaxLine are not held, inputs over
// MaxInput are kept as their size, at most MaxToolUses calls. Memory is
// MaxLine for the line being read plus what is kept, which is at most a
// small multiple of the input's size.
func ParseTranscript(r io.Reader) (*Transcript, error) {
	t := &Transcript{ToolUses: map[string]*ToolUse{}, ByRequest: map[string][]string{}, MessageOf: map[string]string{}, Full: true}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		l, over, err := readLine(br, MaxLine)
		if len(l) > 0 || over {
			t.Lines++
			if over {
				t.skip("line %d: longer than %d bytes", t.Lines, MaxLine)
			} else if why := t.addLine(l); why != "" {
				t.skip("line %d: %s", t.Lines, why)
			}
		}
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("read the transcript: %w", err)
		}
	}
}

func (t *Transcript) skip(format string, args ...any) {
	t.Skipped++
	if len(t.Problems) < maxProblems {
		t.Problems = append(t.Problems, fmt.Sprintf(format, args...))
	}
}

// addLine reads one line; it returns why a line was skipped, or "".
func (t *Transcript) addLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return unreadable(err)
	}
	if l.Message == nil || (l.Type != "assistant" && l.Type != "user") {
		return "" // a line of another kind: nothing of a tool call in it
	}
	c := l.Message.Content
	if len(c) == 0 || c[0] != '[' {
		return "" // plain text content
	}
	var blocks []block
	if err := json.Unmarshal(c, &blocks); err != nil {
		return "its message content is not a list of content blocks"
	}
	for _, bl := range blocks {
		switch {
		case l.Type == "assistant" && bl.Type == "tool_use" && bl.ID != "":
			t.addUse(&l, bl)
		case l.Type == "user" && bl.Type == "tool_result" && bl.ToolUseID != "":
			u := t.ToolUses[bl.ToolUseID]
			if u == nil {
				continue // its call was before the part read
			}
			u.Result = true
			u.IsError = u.IsError || bl.IsError
		}
	}
	return ""
}

func (t *Transcript) addUse(l *line, bl block) {
	u := t.ToolUses[bl.ID]
	if u == nil {
		if len(t.ToolUses) >= MaxToolUses {
			t.Full = false
			return
		}
		u = &ToolUse{ID: bl.ID}
		t.ToolUses[bl.ID] = u
		if l.RequestID != "" {
			t.ByRequest[l.RequestID] = append(t.ByRequest[l.RequestID], bl.ID)
		}
	}
	// The same call may be written again (a resumed or compacted
	// conversation): the later line's details win, where it has them.
	if bl.Name != "" {
		u.Name = bl.Name
	}
	if l.Message.ID != "" {
		u.MessageID = l.Message.ID
	}
	if l.RequestID != "" {
		u.UpstreamRequestID = l.RequestID
		if l.Message.ID != "" {
			t.MessageOf[l.RequestID] = l.Message.ID
		}
	}
	u.Sidechain = l.Sidechain
	if len(bl.Input) > 0 && string(bl.Input) != "null" {
		u.InputBytes = len(bl.Input)
		u.Input = nil
		if len(bl.Input) <= MaxInput {
			u.Input = redactBytes(bl.Input)
		}
		var in struct {
			Command string `json:"command"`
		}
		u.Command = ""
		if json.Unmarshal(bl.Input, &in) == nil {
			u.Command = clip(redact(in.Command), MaxInput)
		}
	}
}

// credentialShaped matches what looks like a credential a box may hold or
// have seen: a paddock session token, an Anthropic key or token. An agent
// may well have typed one into a command; the ledger never repeats it.
var credentialShaped = regexp.MustCompile(regexp.QuoteMeta(secret.TokenPrefix) + `[A-Za-z0-9_-]{8,}|sk-ant-[A-Za-z0-9_-]{8,}`)

// redact replaces every credential-shaped part of s with secret.Redacted.
func redact(s string) string {
	return credentialShaped.ReplaceAllLiteralString(s, secret.Redacted)
}

// redactBytes is redact on a tool's input JSON, into a new slice: the
// replacement holds no character that needs escaping, so the JSON stays
// valid. (A token written with JSON escapes is not found; Command, decoded,
// is redacted on its own.)
func redactBytes(b []byte) json.RawMessage {
	return credentialShaped.ReplaceAllLiteral(append([]byte(nil), b...), []byte(secret.Redacted))
}

// unreadable says why a line did not decode, briefly: the decoder's own
// words name Go types.
func unreadable(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("not JSON (at byte %d)", syn.Offset)
	}
	return "JSON, but not a transcript line (a value of an unexpected type)"
}

// readLine returns the next line of br without its newline; over is true
// (and the line nil) for a line longer than max, which is consumed. err is
// io.EOF after the last line.
func readLine(br *bufio.Reader, max int) (l []byte, over bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !over {
			if len(l)+len(frag) > max+1 {
				over, l = true, nil
			} else {
				l = append(l, frag...)
			}
		}
		switch {
		case err == nil:
			if over {
				return nil, true, nil
			}
			return l[:len(l)-1], false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return l, over, io.EOF // a last line without its newline
		default:
			return nil, over, err
		}
	}
}

// clip cuts s to at most n bytes on a rune boundary, the cut marked.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
