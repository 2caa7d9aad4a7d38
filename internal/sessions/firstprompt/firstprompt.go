// Package firstprompt is the task a session starts with (`paddock run
// --prompt`): claude's first message, given once, at the session's first
// start, never on a resume.
//
// The prompt does not travel in tmux's command line (tmux caps a command at
// about 16 KiB): the Runner writes it to BoxPath in the box and starts
// claude through Wrap, a small shell that reads the file, removes it, and
// execs claude with the prompt as its last argument, after "--" so a
// prompt that starts with "-" is not taken for a flag.
package firstprompt

import (
	"fmt"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// MaxBytes bounds a prompt. Linux refuses one argument of 128 KiB or more
// (MAX_ARG_STRLEN) and claude gets the prompt as one argument.
const MaxBytes = 100 << 10

// BoxPath is where the prompt waits in the box, relative to the box
// user's home, until claude starts with it.
const BoxPath = ".cache/paddock/first-prompt"

// Text is a prompt. It is the person's words, not a secret, but no log
// line needs them: every formatter prints only its length.
type Text string

// String prints the length only.
func (t Text) String() string { return fmt.Sprintf("[prompt: %d bytes]", len(t)) }

// Format prints the length only, for every verb.
func (t Text) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// Check rejects a prompt over MaxBytes, not UTF-8, holding a NUL (which no
// argument can hold), or blank.
func Check(s string) error {
	switch {
	case len(s) > MaxBytes:
		return fmt.Errorf("the prompt is %d bytes; at most %d (%d KiB) fit: put the long part in a file in the workspace and ask claude to read it: %w",
			len(s), MaxBytes, MaxBytes>>10, errdefs.ErrInvalid)
	case !utf8.ValidString(s):
		return fmt.Errorf("the prompt is not UTF-8 text: %w", errdefs.ErrInvalid)
	}
	blank := true
	for _, r := range s {
		if r == 0 {
			return fmt.Errorf("the prompt holds a NUL byte: %w", errdefs.ErrInvalid)
		}
		blank = blank && (r == ' ' || r == '\t' || r == '\n' || r == '\r')
	}
	if blank {
		return fmt.Errorf("the prompt is empty: %w", errdefs.ErrInvalid)
	}
	return nil
}

// script runs as `sh -c script FILE ARGV...`: with a prompt file, and
// unless ARGV resumes a conversation, claude gets the file's text as its
// last argument; the file is removed either way, before claude runs, so
// a later start never repeats the task.
const script = `f=$0
p=
if [ -f "$f" ]; then p=$(cat "$f"; printf x); p=${p%x}; fi
rm -f "$f"
for a; do [ "$a" = --resume ] && p=; done
if [ -n "$p" ]; then exec "$@" -- "$p"; fi
exec "$@"`

// Wrap returns argv (claude's command line) wrapped so that claude starts
// with the prompt in file, an absolute path in the box.
func Wrap(argv []string, file string) []string {
	return append([]string{"sh", "-c", script, file}, argv...)
}
