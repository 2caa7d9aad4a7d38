// Package tmuxcc parses the output of a tmux control-mode client
// (`tmux -C attach`): command replies framed by %begin/%end or %error,
// pane output (%output, %extended-output) with its octal escapes, %exit,
// and the layout, window, session and pane notifications. It reads bytes
// from a box, so it trusts none of them: every line is bounded, every
// field checked, and bad input is an error that names the line, never a
// panic or a silent guess.
package tmuxcc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/logkey"
)

// MaxLine bounds one control-mode line (tmux writes long %output lines
// for big bursts; 1 MiB is far above them).
const MaxLine = 1 << 20

// MaxReply bounds the lines of one command reply.
const MaxReply = 100000

// MaxReplyBytes bounds the bytes of one command reply, all lines together:
// lines of up to MaxLine, MaxReply of them, would be a hundred gigabytes
// (the box can write into the control client's output).
const MaxReplyBytes = 16 << 20

// Event is one parsed line or reply.
type Event struct {
	// Kind is the notification without its '%' ("output", "exit",
	// "layout-change", ...), or "reply" for a %begin…%end block and
	// "error" for a %begin…%error block.
	Kind string `json:"kind"`
	// Pane ("%3") and Window ("@1") and Session ("$0") when the line names them.
	Pane    string `json:"pane,omitempty"`
	Window  string `json:"window,omitempty"`
	Session string `json:"session,omitempty"`
	// Data is the decoded pane output of output and extended-output.
	Data []byte `json:"data,omitempty"`
	// Age is extended-output's milliseconds of delay.
	Age int64 `json:"age,omitempty"`
	// Time, Number and Flags frame a reply.
	Time   int64 `json:"time,omitempty"`
	Number int64 `json:"number,omitempty"`
	Flags  int64 `json:"flags,omitempty"`
	// Lines are a reply's lines.
	Lines []string `json:"lines,omitempty"`
	// Args are the remaining fields of other notifications, as sent.
	Args []string `json:"args,omitempty"`
	// Reason is %exit's reason, if any.
	Reason string `json:"reason,omitempty"`
}

// Error is a malformed line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("tmux control mode, line %d: %s", e.Line, e.Msg) }

// Reader reads events.
type Reader struct {
	br   *bufio.Reader
	line int
}

// NewReader reads control-mode output from r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// readLine returns one line without its "\n" (and a "\r" before it).
func (r *Reader) readLine() (string, error) {
	var buf []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > MaxLine {
			// Skip the rest of the line, then report it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.br.ReadSlice('\n')
			}
			r.line++
			return "", &Error{Line: r.line, Msg: fmt.Sprintf("line longer than %d bytes", MaxLine)}
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(buf) > 0 {
			r.line++
			return "", &Error{Line: r.line, Msg: "output ends in the middle of a line"}
		}
		return "", err
	}
	r.line++
	s := strings.TrimSuffix(string(buf[:len(buf)-1]), "\r")
	return s, nil
}

// Next returns the next event; io.EOF at the end. After an *Error the
// reader can go on with the next line.
func (r *Reader) Next() (Event, error) {
	line, err := r.readLine()
	if err != nil {
		return Event{}, err
	}
	ev, err := ParseLine(line)
	if err != nil {
		return Event{}, &Error{Line: r.line, Msg: err.Error()}
	}
	if ev.Kind != "begin" {
		return ev, nil
	}
	// A reply: lines up to %end or %error with the same number. tmux never
	// sends notifications inside a reply block.
	start := r.line
	size := 0
	for n := 0; ; n++ {
		l, err := r.readLine()
		if err != nil {
			if err == io.EOF {
				return Event{}, &Error{Line: start, Msg: "reply never ends"}
			}
			return Event{}, err
		}
		if strings.HasPrefix(l, "%end ") || strings.HasPrefix(l, "%error ") {
			end, perr := ParseLine(l)
			if perr == nil && end.Number == ev.Number && end.Time == ev.Time {
				end.Lines = ev.Lines
				if end.Kind == "end" {
					end.Kind = "reply"
				}
				return end, nil
			}
		}
		if n >= MaxReply {
			return Event{}, &Error{Line: start, Msg: fmt.Sprintf("reply longer than %d lines", MaxReply)}
		}
		if size += len(l); size > MaxReplyBytes {
			return Event{}, &Error{Line: start, Msg: fmt.Sprintf("reply larger than %d bytes", MaxReplyBytes)}
		}
		ev.Lines = append(ev.Lines, l)
	}
}

// ParseLine parses one line outside a reply block.
func ParseLine(line string) (Event, error) {
	if !strings.HasPrefix(line, "%") {
		return Event{}, fmt.Errorf("not a notification: %q", clip(line))
	}
	name, rest, _ := strings.Cut(line[1:], " ")
	ev := Event{Kind: name}
	switch name {
	case "output":
		pane, data, ok := strings.Cut(rest, " ")
		if !ok && rest == "" {
			return Event{}, errors.New("%output without a pane")
		}
		if err := checkID(pane, '%'); err != nil {
			return Event{}, err
		}
		d, err := DecodeOutput(data)
		if err != nil {
			return Event{}, err
		}
		ev.Pane, ev.Data = pane, d
	case "extended-output":
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 3 {
			return Event{}, errors.New("%extended-output needs a pane, an age and ': data'")
		}
		if err := checkID(f[0], '%'); err != nil {
			return Event{}, err
		}
		age, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || age < 0 {
			return Event{}, fmt.Errorf("%%extended-output: bad age %q", clip(f[1]))
		}
		// Further fields may follow, up to a lone ":".
		tail := f[2]
		i := strings.Index(tail, ": ")
		switch {
		case tail == ":":
			tail = ""
		case strings.HasPrefix(tail, ": "):
			tail = tail[2:]
		case i >= 0:
			tail = tail[i+2:]
		default:
			return Event{}, errors.New("%extended-output without ' : '")
		}
		d, err := DecodeOutput(tail)
		if err != nil {
			return Event{}, err
		}
		ev.Pane, ev.Age, ev.Data = f[0], age, d
	case "begin", "end", "error":
		f := strings.Fields(rest)
		if len(f) != 3 {
			return Event{}, fmt.Errorf("%%%s needs time, number and flags", name)
		}
		var nums [3]int64
		for i, s := range f {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				return Event{}, fmt.Errorf("%%%s: bad number %q", name, clip(s))
			}
			nums[i] = v
		}
		ev.Time, ev.Number, ev.Flags = nums[0], nums[1], nums[2]
	case "exit":
		ev.Reason = rest
	case "layout-change", "window-add", "window-close", "unlinked-window-add", "unlinked-window-close", "unlinked-window-renamed",
		"window-renamed", "window-pane-changed", "session-window-changed":
		f := strings.Fields(rest)
		if name == "session-window-changed" {
			if len(f) < 2 {
				return Event{}, fmt.Errorf("%%%s needs a session and a window", name)
			}
			if err := checkID(f[0], '$'); err != nil {
				return Event{}, err
			}
			ev.Session, f = f[0], f[1:]
		}
		if len(f) < 1 {
			return Event{}, fmt.Errorf("%%%s needs a window", name)
		}
		if err := checkID(f[0], '@'); err != nil {
			return Event{}, err
		}
		ev.Window, ev.Args = f[0], f[1:]
		if name == "window-pane-changed" {
			if len(f) != 2 {
				return Event{}, errors.New("%window-pane-changed needs a window and a pane")
			}
			if err := checkID(f[1], '%'); err != nil {
				return Event{}, err
			}
			ev.Pane, ev.Args = f[1], nil
		}
	case "pane-mode-changed", "continue", "pause":
		if err := checkID(rest, '%'); err != nil {
			return Event{}, err
		}
		ev.Pane = rest
	case "session-changed", "client-session-changed", "session-renamed":
		f := strings.Fields(rest)
		for _, x := range f {
			if strings.HasPrefix(x, "$") {
				if err := checkID(x, '$'); err != nil {
					return Event{}, err
				}
				ev.Session = x
				break
			}
		}
		ev.Args = f
	default:
		// sessions-changed, client-detached, paste-buffer-changed,
		// subscription-changed, message, config-error, and any newer one.
		if name == "" {
			return Event{}, errors.New("empty notification")
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c == '-') {
				return Event{}, fmt.Errorf("bad notification name %q", clip(name))
			}
		}
		if rest != "" {
			ev.Args = strings.Fields(rest)
		}
	}
	return ev, nil
}

// checkID checks a tmux id like %3, @1 or $0.
func checkID(s string, sigil byte) error {
	if len(s) < 2 || s[0] != sigil || len(s) > 12 {
		return fmt.Errorf("bad id %q (want %c<number>)", clip(s), sigil)
	}
	if _, err := strconv.ParseUint(s[1:], 10, 32); err != nil {
		return fmt.Errorf("bad id %q (want %c<number>)", clip(s), sigil)
	}
	return nil
}

// DecodeOutput undoes tmux's escaping of pane output: a backslash and
// three octal digits for each byte below 32 and for the backslash itself.
func DecodeOutput(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+3 >= len(s) {
			return nil, fmt.Errorf("truncated escape at byte %d", i)
		}
		v := 0
		for _, d := range []byte(s[i+1 : i+4]) {
			if d < '0' || d > '7' {
				return nil, fmt.Errorf("bad escape %q at byte %d", s[i:i+4], i)
			}
			v = v*8 + int(d-'0')
		}
		if v > 255 {
			return nil, fmt.Errorf("escape %q at byte %d is above 255", s[i:i+4], i)
		}
		out = append(out, byte(v))
		i += 3
	}
	return out, nil
}

// EncodeOutput escapes bytes as tmux does (for tests and fakes).
func EncodeOutput(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c < 32 || c == '\\' {
			fmt.Fprintf(&sb, "\\%03o", c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func clip(s string) string { return logkey.Clip(s, 40) }
