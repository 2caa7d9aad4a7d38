package activity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Report events: Claude Code's hook events paddock installs, and two of
// its own.
const (
	EventSessionStart     = "SessionStart"
	EventUserPromptSubmit = "UserPromptSubmit"
	EventPreToolUse       = "PreToolUse"
	EventStop             = "Stop"
	EventNotification     = "Notification"
	EventSessionEnd       = "SessionEnd"
	// EventPaneDied: tmux's pane-died hook fired (claude's process ended).
	EventPaneDied = "pane-died"
	// EventReaped: the guest reaped an orphan, which may be tmux's server.
	EventReaped = "reaped"
)

// HookEvents are the Claude Code hook events paddock installs, in the
// order of a turn.
var HookEvents = []string{EventSessionStart, EventUserPromptSubmit, EventPreToolUse, EventStop, EventNotification, EventSessionEnd}

func knownEvent(e string) bool {
	for _, h := range HookEvents {
		if e == h {
			return true
		}
	}
	return e == EventPaneDied || e == EventReaped
}

// IsHookEvent reports whether e is one of HookEvents.
func IsHookEvent(e string) bool { return knownEvent(e) && e != EventPaneDied && e != EventReaped }

// MaxReport bounds one report on the wire (its JSON, without the newline).
const MaxReport = 512

// Report is one message from the box about claude: a hook that fired, or
// claude's pane that died. It travels as one line of JSON from the hook
// command to the guest, and from the guest to the Runner.
type Report struct {
	Event string `json:"event"`
	// SessionID is Claude Code's conversation id from the hook's input.
	SessionID string `json:"session_id,omitempty"`
	// Source is SessionStart's source (startup, resume, clear, compact).
	Source string `json:"source,omitempty"`
	// Reason is SessionEnd's reason (prompt_input_exit, clear, logout, other).
	Reason string `json:"reason,omitempty"`
	// Notification is a Notification's notification_type (idle_prompt, …).
	Notification string `json:"notification,omitempty"`
}

var (
	idChars   = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	wordChars = regexp.MustCompile(`^[a-z_]{1,32}$`)
)

// ErrBadReport is wrapped by every error of ParseReport.
var ErrBadReport = errors.New("bad activity report")

// ParseReport reads one report as sent on the wire: at most MaxReport
// bytes of one JSON object with only Report's fields, a known event, a
// session id of letters, digits and '-' (at most 64), and the other
// fields lowercase words (at most 32). Anything else is an error
// wrapping ErrBadReport. It never keeps a reference to b.
func ParseReport(b []byte) (Report, error) {
	if len(b) > MaxReport {
		return Report{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadReport, len(b), MaxReport)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Report{}, fmt.Errorf("%w: more after the object", ErrBadReport)
	}
	if err := r.check(); err != nil {
		return Report{}, err
	}
	return r, nil
}

func (r Report) check() error {
	if !knownEvent(r.Event) {
		return fmt.Errorf("%w: unknown event", ErrBadReport)
	}
	if r.SessionID != "" && !idChars.MatchString(r.SessionID) {
		return fmt.Errorf("%w: session id", ErrBadReport)
	}
	for _, w := range []string{r.Source, r.Reason, r.Notification} {
		if w != "" && !wordChars.MatchString(w) {
			return fmt.Errorf("%w: a field is not a lowercase word", ErrBadReport)
		}
	}
	return nil
}

// Marshal encodes a valid report for the wire (no newline).
func (r Report) Marshal() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err == nil && len(b) > MaxReport {
		err = fmt.Errorf("%w: too long", ErrBadReport)
	}
	return b, err
}

// MaxHookInput bounds how much of a hook's input (Claude Code's JSON on
// the hook's stdin; a PreToolUse carries the tool's whole input) the hook
// command reads.
const MaxHookInput = 1 << 20

// FromHook builds the report of hook event from Claude Code's hook input.
// Only the few fields a report carries are read from it; a field that is
// missing, of another type or not of a report's shape is left out, so
// the result always passes ParseReport. It fails only for an unknown
// event.
func FromHook(event string, input []byte) (Report, error) {
	if !IsHookEvent(event) {
		return Report{}, fmt.Errorf("%w: %q is not a hook event paddock installs", ErrBadReport, event)
	}
	r := Report{Event: event}
	var in map[string]json.RawMessage
	if json.Unmarshal(input, &in) != nil {
		return r, nil
	}
	str := func(k string, re *regexp.Regexp) string {
		var s string
		if json.Unmarshal(in[k], &s) != nil || !re.MatchString(s) {
			return ""
		}
		return s
	}
	r.SessionID = str("session_id", idChars)
	r.Source = str("source", wordChars)
	r.Reason = str("reason", wordChars)
	r.Notification = str("notification_type", wordChars)
	return r, nil
}
