package diffstat

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.quotePath=true", "-c", "diff.renames=true"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COLUMNS=", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b",
		"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lines(n int, word string) string { return strings.Repeat(word+"\n", n) }

// TestFormatIsGits: for changes of every kind (small, large enough to
// scale, added, deleted, renamed in a directory and across, a long path
// cut to fit, names git quotes, a space, a binary file), Format of the
// numstat prints what git diff --stat prints, but a binary file's sizes.
func TestFormatIsGits(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name   string
		before map[string]string
		after  map[string]string
	}{
		{"small", map[string]string{"a.txt": "one\n"}, map[string]string{"a.txt": "two\n", "b.txt": "new\n"}},
		{"scaled", map[string]string{"big.txt": lines(300, "x"), "small.txt": "s\n"},
			map[string]string{"big.txt": lines(120, "x") + lines(200, "y"), "small.txt": "t\n", "new.txt": lines(500, "n")}},
		{"renames", map[string]string{"src/pkg/old.go": lines(40, "code"), "top.txt": lines(30, "t"), "x/y/z.txt": lines(20, "z")},
			map[string]string{"src/pkg/new.go": lines(40, "code") + "more\n", "moved/top.txt": lines(30, "t"), "x/w/z.txt": lines(20, "z")}},
		{"long path", map[string]string{}, map[string]string{
			"a/very/long/directory/name/that/goes/on/and/on/and/on/until/it/cannot/fit/file.txt": lines(3, "l"),
			"short": lines(100, "s")}},
		{"quoted", map[string]string{}, map[string]string{"ünïcode.txt": "u\n", "with space.txt": "s\n", "tab\there.txt": "t\n", `quo"te.txt`: "q\n"}},
		{"deleted", map[string]string{"gone.txt": lines(7, "g"), "kept.txt": "k\n"}, map[string]string{"kept.txt": "k\n"}},
		{"binary", map[string]string{"bin.dat": "a\x00b"}, map[string]string{"bin.dat": "a\x00c\x00d", "text.txt": "t\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			gitIn(t, dir, "init", "-q", "-b", "main")
			for p, s := range c.before {
				write(t, dir, p, s)
			}
			gitIn(t, dir, "add", "-A")
			gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "base")
			for p := range c.before {
				if _, ok := c.after[p]; !ok {
					os.Remove(filepath.Join(dir, p))
				}
			}
			for p, s := range c.after {
				write(t, dir, p, s)
			}
			gitIn(t, dir, "add", "-A")
			want := gitIn(t, dir, "diff", "--cached", "--stat", "HEAD")
			fs, err := Parse([]byte(gitIn(t, dir, "diff", "--cached", "--numstat", "-z", "HEAD")))
			if err != nil {
				t.Fatal(err)
			}
			got := Format(fs, false)
			want = regexp.MustCompile(`Bin \d+ -> \d+ bytes`).ReplaceAllString(want, "Bin")
			if got != want {
				t.Fatalf("Format:\n%s\ngit diff --stat:\n%s", got, want)
			}
			if c.name == "renames" {
				if n := strings.Join(Names(fs), ","); !strings.Contains(n, "src/pkg/old.go,src/pkg/new.go") {
					t.Fatalf("Names: %s", n)
				}
			}
		})
	}
}

func TestFormatColor(t *testing.T) {
	got := Format([]File{{Added: 2, Deleted: 1, Path: "a"}}, true)
	if want := " a | 3 \x1b[32m++\x1b[m\x1b[31m-\x1b[m\n 1 file changed, 2 insertions(+), 1 deletion(-)\n"; got != want {
		t.Fatalf("%q", got)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{"1\t2\n", "x\t1\ta\x00", "1\t2\t", "-\t3\ta\x00", "1\t2\t\x00a\x00", "+1\t2\ta\x00", "99999999999\t1\ta\x00", "1\t2\t\x00\x00b\x00"} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrBadNumstat) {
			t.Errorf("Parse(%q): %v", in, err)
		}
	}
}

// FuzzParse: any bytes either are refused or give files with a path each,
// counts of zero or more, and a Format whose every line is printable.
func FuzzParse(f *testing.F) {
	f.Add([]byte("1\t2\ta.txt\x00-\t-\tb.bin\x00"))
	f.Add([]byte("3\t0\t\x00old\x00new\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := Parse(b)
		if err != nil {
			return
		}
		for _, x := range fs {
			if x.Path == "" || x.Added < 0 || x.Deleted < 0 {
				t.Fatalf("Parse(%q): %+v", b, x)
			}
		}
		out := Format(fs, false)
		for _, c := range []byte(out) {
			if c < 0x20 && c != '\n' || c == 0x7f {
				t.Fatalf("Format of %q printed %q", b, out)
			}
		}
		if len(fs) > 0 && !bytes.Contains([]byte(out), []byte("changed")) {
			t.Fatalf("no summary: %q", out)
		}
	})
}
