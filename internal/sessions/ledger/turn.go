package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on what LastTurn keeps.
const (
	// MaxTurnText is the most of one text, prompt or tool result kept
	// (cut at a character boundary, Cut set).
	MaxTurnText = 64 << 10
	// MaxTurnParts is the most parts kept of one turn: the last ones.
	MaxTurnParts = 500
)

// Turn is the last turn of a conversation: the prompt that started it
// and what claude did with it, in order. Text is redacted of what looks
// like a credential, as the ledger's tool inputs are.
type Turn struct {
	// Prompt is the person's message that began the turn ("" when the
	// transcript holds none yet).
	Prompt string `json:"prompt"`
	// Parts are the assistant's texts and tool calls and the tools'
	// results, in transcript order.
	Parts []TurnPart `json:"parts"`
	// Dropped counts the parts before Parts that MaxTurnParts left out.
	Dropped int `json:"dropped,omitempty"`
	// Ended says Claude Code wrote the turn's end (its turn_duration or
	// stop_hook_summary line) after the prompt, at EndedAt (its clock).
	Ended   bool      `json:"ended"`
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Lines and Skipped are as Transcript's.
	Lines   int `json:"lines"`
	Skipped int `json:"skipped,omitempty"`
}

// TurnPart is one step of a turn.
type TurnPart struct {
	// Type is "text" (claude's words), "tool_use" or "tool_result".
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Tool and ID name a call (tool_use), ID the call a result answers.
	Tool    string          `json:"tool,omitempty"`
	ID      string          `json:"id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	// Cut is true when Text or Input was longer than kept.
	Cut bool `json:"cut,omitempty"`
}

// turnLine is what LastTurn reads of a line.
type turnLine struct {
	Type      string    `json:"type"`
	Subtype   string    `json:"subtype"`
	Timestamp time.Time `json:"timestamp"`
	Sidechain bool      `json:"isSidechain"`
	Meta      bool      `json:"isMeta"`
	Message   *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

type turnBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// LastTurn reads a transcript (JSON Lines, untrusted) and returns its last
// turn: from the last prompt a person typed (not a tool's result, not a
// subagent's, not Claude Code's own meta lines) to the end. Lines it
// cannot read are skipped and counted, as ParseTranscript does.
func LastTurn(r io.Reader) (Turn, error) {
	var t Turn
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		l, over, err := readLine(br, MaxLine)
		if len(l) > 0 || over {
			t.Lines++
			if over || !t.add(l) {
				t.Skipped++
			}
		}
		if err == io.EOF {
			if t.Parts == nil {
				t.Parts = []TurnPart{}
			}
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("read the transcript: %w", err)
		}
	}
}

// add reads one line; false if it could not be read.
func (t *Turn) add(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return true
	}
	var l turnLine
	if json.Unmarshal(b, &l) != nil {
		return false
	}
	if l.Type == "system" && !l.Sidechain && (l.Subtype == "turn_duration" || l.Subtype == "stop_hook_summary") {
		t.Ended = true
		if l.Timestamp.After(t.EndedAt) {
			t.EndedAt = l.Timestamp
		}
		return true
	}
	if l.Message == nil || l.Sidechain || l.Meta || (l.Type != "user" && l.Type != "assistant") {
		return true
	}
	c := l.Message.Content
	if len(c) > 0 && c[0] == '"' { // plain text
		var s string
		if json.Unmarshal(c, &s) != nil {
			return false
		}
		if l.Type == "user" {
			t.begin(s)
		} else {
			t.part(TurnPart{Type: "text", Text: s})
		}
		return true
	}
	var blocks []turnBlock
	if json.Unmarshal(c, &blocks) != nil {
		return false
	}
	if l.Type == "user" {
		var prompt []string
		results := false
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				prompt = append(prompt, bl.Text)
			case "tool_result":
				results = true
				t.part(TurnPart{Type: "tool_result", ID: bl.ToolUseID, IsError: bl.IsError, Text: resultText(bl.Content)})
			}
		}
		if !results && len(prompt) > 0 {
			t.begin(strings.Join(prompt, "\n"))
		}
		return true
	}
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			t.part(TurnPart{Type: "text", Text: bl.Text})
		case "tool_use":
			p := TurnPart{Type: "tool_use", Tool: bl.Name, ID: bl.ID}
			if len(bl.Input) > MaxInput {
				p.Cut = true
			} else if len(bl.Input) > 0 && string(bl.Input) != "null" {
				p.Input = redactBytes(bl.Input)
			}
			t.part(p)
		}
	}
	return true
}

// resultText is a tool result's content as text: a string, or the text
// blocks of a list.
func resultText(c json.RawMessage) string {
	if len(c) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []turnBlock
	if json.Unmarshal(c, &blocks) != nil {
		return ""
	}
	var out []string
	for _, bl := range blocks {
		if bl.Type == "text" {
			out = append(out, bl.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (t *Turn) begin(prompt string) {
	p, _ := clipText(prompt)
	t.Prompt, t.Parts, t.Dropped = p, nil, 0
	t.Ended, t.EndedAt = false, time.Time{}
}

func (t *Turn) part(p TurnPart) {
	var cut bool
	p.Text, cut = clipText(p.Text)
	p.Cut = p.Cut || cut
	if len(t.Parts) == MaxTurnParts {
		copy(t.Parts, t.Parts[1:])
		t.Parts = t.Parts[:MaxTurnParts-1]
		t.Dropped++
	}
	t.Parts = append(t.Parts, p)
}

// clipText redacts s and cuts it to MaxTurnText bytes at a character
// boundary (after redacting: a token cut in two would not be found);
// true if it was cut.
func clipText(s string) (string, bool) {
	s = redact(s)
	cut := false
	if len(s) > MaxTurnText {
		i := MaxTurnText
		for i > 0 && !utf8.RuneStart(s[i]) { // s[i] is the first byte left out
			i--
		}
		s, cut = s[:i], true
	}
	return s, cut
}
