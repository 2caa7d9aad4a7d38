// Package message is a message a person sends to a running session's
// claude (paddock send, the web page's review comments): text typed into
// claude's prompt as one paste, as if the person had pasted it at its
// terminal, then submitted.
//
// It is box-bound input from a person, so Parse is strict about what a
// terminal would take for something else: no control character but tab
// and newline (an ESC could end the paste and type the rest as keys), no
// NUL, valid UTF-8, not blank, and at most MaxBytes.
package message

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// MaxBytes bounds a message, as a first prompt is bounded: a longer text
// belongs in a file in the workspace that claude is asked to read.
const MaxBytes = 100 << 10

// Text is a checked message: the person's words, not a secret, but no log
// line needs them, so every formatter prints only its length.
type Text string

// String prints the length only.
func (t Text) String() string { return fmt.Sprintf("[message: %d bytes]", len(t)) }

// Format prints the length only, for every verb.
func (t Text) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// Parse checks s and returns it as a Text, with its line ends made "\n"
// (a "\r\n" or a lone "\r", as a browser's form or a Windows file has
// them: in a paste a carriage return would be an Enter). Every refusal
// wraps errdefs.ErrInvalid and says what to change.
func Parse(s string) (Text, error) {
	switch {
	case len(s) > MaxBytes:
		return "", fmt.Errorf("the message is %d bytes; at most %d (%d KiB) fit: put the long part in a file in the workspace and ask claude to read it: %w",
			len(s), MaxBytes, MaxBytes>>10, errdefs.ErrInvalid)
	case !utf8.ValidString(s):
		return "", fmt.Errorf("the message is not UTF-8 text: %w", errdefs.ErrInvalid)
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	blank := true
	for i, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
			return "", fmt.Errorf("the message holds the control character %U at byte %d; only text, tabs and newlines can be typed into claude's prompt: %w", r, i, errdefs.ErrInvalid)
		}
		blank = blank && unicode.IsSpace(r)
	}
	if blank {
		return "", fmt.Errorf("the message is empty: %w", errdefs.ErrInvalid)
	}
	return Text(s), nil
}

// PieceBytes bounds one piece of a message (Pieces). Claude Code keeps a
// short paste of at most two lines in the person's own words, but turns a
// longer one into a block of pasted content that its instructions tell
// claude to treat as material from elsewhere, not as what the person asks.
const PieceBytes = 400

// Pieces cuts t into the pastes that type it as the person's own words:
// each at most PieceBytes, cut at a rune's start, and holding at most one
// newline, at its end. Joined they are t.
func (t Text) Pieces() []string {
	var out []string
	s := string(t)
	for s != "" {
		n := min(len(s), PieceBytes)
		if i := strings.IndexByte(s[:n], '\n'); i >= 0 {
			n = i + 1
		} else {
			for n < len(s) && !utf8.RuneStart(s[n]) {
				n--
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
