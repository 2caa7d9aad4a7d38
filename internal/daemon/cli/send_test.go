package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSendText: the message is the words after the name, a file's text,
// or stdin; words and --file together, and a missing file, are usage
// errors that say so.
func TestSendText(t *testing.T) {
	f := filepath.Join(t.TempDir(), "m.txt")
	if err := os.WriteFile(f, []byte("from\na file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin, file string
		words       []string
		want, err   string
	}{
		{words: []string{"fix", "the", "test"}, want: "fix the test"},
		{file: f, want: "from\na file\n"},
		{file: "-", stdin: "piped\n", want: "piped\n"},
		{stdin: "piped, no flag", want: "piped, no flag"},
		{words: []string{"x"}, file: f, err: "as words or with --file, not both"},
		{file: filepath.Join(t.TempDir(), "missing"), err: "--file: open"},
	} {
		got, err := sendText(IO{Stdin: strings.NewReader(c.stdin)}, c.words, c.file)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("sendText(%q, %q) = %q, %v; want %q", c.words, c.file, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("sendText(%q, %q): error %v, want one saying %q", c.words, c.file, err, c.err)
		}
	}
	// No message at all: run with no words and a terminal-less empty
	// stdin reaches the Runner's refusal ("the message is empty"); a nil
	// stdin is a usage error.
	if _, err := sendText(IO{}, nil, ""); err == nil || !strings.Contains(err.Error(), "no message: give it after the session's name") {
		t.Errorf("no message: %v", err)
	}
}
