package firstprompt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"fix the tests", true},
		{"-x starts with a dash", true},
		{"line one\nline two\n", true},
		{strings.Repeat("a", MaxBytes), true},
		{strings.Repeat("a", MaxBytes+1), false},
		{"", false},
		{" \n\t", false},
		{"a\x00b", false},
		{"\xff\xfe", false},
	} {
		if err := Check(tc.in); (err == nil) != tc.ok {
			t.Errorf("Check(%.20q): %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

// TestTextNeverPrinted: a prompt in a log line or an error shows its
// length only.
func TestTextNeverPrinted(t *testing.T) {
	p := Text("the secret plan")
	for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%v %s %q %+v %#v", p, p, p, p, p), fmt.Sprintf("%+v", struct{ P Text }{p})} {
		if strings.Contains(s, "secret plan") {
			t.Fatalf("printed: %s", s)
		}
	}
}

// TestWrap runs the wrapper with sh: the prompt comes last, after "--",
// exactly (newlines, a leading dash, trailing newlines kept); the file is
// gone after; a resume or no file runs the command as it was.
func TestWrap(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "first-prompt")
	run := func(argv ...string) string {
		t.Helper()
		w := Wrap(argv, file)
		out, err := exec.Command(w[0], w[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", w, err, out)
		}
		return string(out)
	}
	prompt := "-rf the task\n  with lines \"quoted\" $HOME `x`\n\n"
	os.WriteFile(file, []byte(prompt), 0o600)
	if got := run("printf", "[%s]", "--session-id", "u"); got != "[--session-id][u][--]["+prompt+"]" {
		t.Fatalf("first start: %q", got)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatal("prompt file not removed")
	}
	if got := run("printf", "[%s]", "--session-id", "u"); got != "[--session-id][u]" {
		t.Fatalf("no file: %q", got)
	}
	os.WriteFile(file, []byte(prompt), 0o600)
	if got := run("printf", "[%s]", "--resume", "u"); got != "[--resume][u]" {
		t.Fatalf("resume: %q", got)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatal("prompt file not removed on resume")
	}
}
