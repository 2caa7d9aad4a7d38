package runner

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestSafeText: a box's diff reaches a terminal with its text, newlines,
// tabs and (when asked) colours, and nothing else a terminal acts on.
func TestSafeText(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    []string // written in these pieces
		color bool
		want  string
	}{
		{"text", []string{"+a\tb\n-c\n"}, false, "+a\tb\n-c\n"},
		{"colour kept", []string{"\x1b[31m-x\x1b[m\n"}, true, "\x1b[31m-x\x1b[m\n"},
		{"colour off", []string{"\x1b[31m-x\n"}, false, "?[31m-x\n"},
		{"colour cut across writes", []string{"\x1b", "[3", "2m+y"}, true, "\x1b[32m+y"},
		{"title set", []string{"\x1b]0;pwned\x07x"}, true, "?]0;pwned?x"},
		{"clipboard", []string{"\x1b]52;c;aGk=\x1b\\"}, true, "?]52;c;aGk=?\\"},
		{"cursor moved", []string{"\x1b[2J\x1b[H"}, true, "?[2J?[H"},
		{"bell, backspace, CR", []string{"a\x07b\x08c\rd"}, false, "a?b?c?d"},
		{"DEL", []string{"\x7f"}, false, "?"},
		{"long SGR", []string{"\x1b[" + string(bytes.Repeat([]byte("1;"), 40)) + "m"}, true, ""},
		{"escape at the end", []string{"x\x1b["}, true, "x?["},
		{"UTF-8 passes", []string{"é ✓\n"}, false, "é ✓\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			st := &safeText{w: &out, color: c.color}
			for _, p := range c.in {
				if n, err := st.Write([]byte(p)); err != nil || n != len(p) {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			if err := st.flush(); err != nil {
				t.Fatal(err)
			}
			if c.name == "long SGR" {
				if bytes.Contains(out.Bytes(), []byte("\x1b")) {
					t.Fatalf("a sequence longer than any colour passed: %q", out.String())
				}
				return
			}
			if out.String() != c.want {
				t.Fatalf("got %q, want %q", out.String(), c.want)
			}
		})
	}
}

// FuzzSafeText: whatever a box prints, what reaches the terminal holds no
// control byte but newline and tab, and an escape only as the start of a
// colour sequence (ESC [ digits and ';' m) when colours were asked for.
func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"+a\n", "\x1b[31mx\x1b[m", "\x1b]0;t\x07", "\x1b[2J", "\x1b", "\x1b[", "\x1b[1;2;3m\x1b[", "a\rb\x08"} {
		f.Add([]byte(s), true, 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, color bool, split int) {
		var out bytes.Buffer
		st := &safeText{w: &out, color: color}
		if split > 0 && split < len(in) {
			st.Write(in[:split])
			st.Write(in[split:])
		} else {
			st.Write(in)
		}
		st.flush()
		b := out.Bytes()
		for i := 0; i < len(b); i++ {
			c := b[i]
			switch {
			case c == 0x1b:
				if !color {
					t.Fatalf("an escape passed without colours: %q → %q", in, b)
				}
				j := i + 1
				if j >= len(b) || b[j] != '[' {
					t.Fatalf("an escape not of a colour: %q → %q", in, b)
				}
				for j++; j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == ';'); j++ {
				}
				if j >= len(b) || b[j] != 'm' {
					t.Fatalf("an escape not of a colour: %q → %q", in, b)
				}
				i = j
			case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
				t.Fatalf("control byte %#x passed: %q → %q", c, in, b)
			}
		}
	})
}

// streamed is a backend whose clone boxes see no host repository (as
// kubernetes'): the Runner streams the history in.
type streamed struct{ sandbox.Backend }

func (s streamed) Capabilities(ctx context.Context) sandbox.Capabilities {
	c := s.Backend.Capabilities(ctx)
	c.StreamedClone = true
	return c
}

// TestStreamedClone: in a box that cannot see the host repository, the
// clone is made from a pack of the base streamed in: the base's files on
// the branch, the whole history, nothing of the host's config, the host
// repository unchanged; a later start does nothing; a clone whose pack
// was cut short is streamed again, one whose checkout was cut short is
// finished.
func TestStreamedClone(t *testing.T) {
	be := streamed{testBackends(t)["docker"]}
	tr := startRunner(t, []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}, []string{ownerOAuth}, "off")
	ctx := context.Background()
	repo := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", repo}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644)
	git("add", "a.txt")
	git("commit", "-qm", "first")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two\n"), 0o644)
	git("commit", "-qam", "second")
	git("config", "core.hooksPath", "/tmp/host-hooks") // nothing of the host's config goes in
	base := git("rev-parse", "HEAD")
	if err := filepath.Walk(repo, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner)
	}); err != nil {
		t.Fatal(err)
	}
	before := git("for-each-ref")

	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: "streamed"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	if _, err := be.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	link, err := tr.Link(ctx, be, bx.ID, "streamed")
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	s := &session.Session{Name: "streamed", Workspace: repo, Clone: &session.Clone{Branch: "paddock/streamed", Base: base}}
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + sandbox.HomeDir}
	box := func(script string) string {
		t.Helper()
		out, code := execIn(t, link.Client, env, "sh", "-c", script)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", script, code, out)
		}
		return out
	}
	const look = "cd /workspace && git log --format=%s && git rev-parse --abbrev-ref HEAD && cat a.txt && git status --porcelain && git config --get core.hooksPath || true; ls .git/paddock-clone-incomplete 2>/dev/null || true"
	const want = "second\nfirst\npaddock/streamed\ntwo\n"
	if err := setupClone(ctx, be, link, s); err != nil {
		t.Fatal(err)
	}
	if got := box(look); got != want {
		t.Fatalf("the streamed clone: %q, want %q", got, want)
	}
	if got := git("for-each-ref"); got != before {
		t.Fatalf("the host's refs changed: %q", got)
	}
	// A later start: nothing to do, the work kept.
	box("cd /workspace && echo mine > b.txt")
	if err := setupClone(ctx, be, link, s); err != nil {
		t.Fatal(err)
	}
	if got := box("cat /workspace/b.txt"); got != "mine\n" {
		t.Fatalf("a later start touched the clone: %q", got)
	}
	// A checkout cut short is finished; a pack cut short is streamed again.
	box("cd /workspace && : > .git/paddock-clone-incomplete && rm a.txt")
	if err := setupClone(ctx, be, link, s); err != nil {
		t.Fatal(err)
	}
	if got := box(look); got != want+"?? b.txt\n" {
		t.Fatalf("after a cut checkout: %q", got)
	}
	box("cd /workspace && rm -rf .git/objects/pack && : > .git/paddock-clone-incomplete")
	if err := setupClone(ctx, be, link, s); err != nil {
		t.Fatal(err)
	}
	if got := box(look); got != want+"?? b.txt\n" {
		t.Fatalf("after a cut pack: %q", got)
	}
}

// TestBranchReadingsInOrder: readings of a clone's branch run at once (a
// turn's end, the web page's diff); the one begun last stays, whichever
// finishes last.
func TestBranchReadingsInOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	older := branchState{head: strings.Repeat("a", 40), ahead: 1, dirty: true, at: t0}
	newer := branchState{head: strings.Repeat("b", 40), ahead: 2, at: t0.Add(time.Second)}
	var c session.Clone
	newer.apply(&c)
	older.apply(&c) // finished last, begun first
	if c.Head != newer.head || c.Ahead != 2 || c.Dirty || !c.Checked.Equal(newer.at) {
		t.Fatalf("an older reading overwrote a newer one: %+v", c)
	}
	later := branchState{head: strings.Repeat("c", 40), ahead: 3, at: t0.Add(2 * time.Second)}
	later.apply(&c)
	if c.Head != later.head || c.Ahead != 3 {
		t.Fatalf("a newer reading was not recorded: %+v", c)
	}
}
