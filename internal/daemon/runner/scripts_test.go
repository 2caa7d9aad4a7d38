package runner

import (
	"embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

//go:embed scripts/*.sh
var scriptFiles embed.FS

// boxScripts names every embedded script by its file (scripts.go).
var boxScripts = map[string]string{
	"launch.sh":      launchScript,
	"readconfig.sh":  readConfigScript,
	"writefile.sh":   writeFileScript,
	"transcript.sh":  transcriptScript,
	"readstate.sh":   readStateScript,
	"writestate.sh":  writeStateScript,
	"exitwrap.sh":    exitWrapScript,
	"panestate.sh":   paneStateScript,
	"clone.sh":       cloneScript,
	"clonestream.sh": cloneStreamScript,
	"diff.sh":        diffScript,
	"branchstate.sh": branchStateScript,
}

// TestBoxScripts: every file under scripts/ is one of the Runner's named
// scripts, parses as sh, and opens with its contract: what it does, its
// arguments, its stdin and its exit status.
func TestBoxScripts(t *testing.T) {
	ents, err := scriptFiles.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(boxScripts) {
		t.Errorf("%d files under scripts/, %d named in scripts.go", len(ents), len(boxScripts))
	}
	for _, e := range ents {
		b, err := scriptFiles.ReadFile("scripts/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		v, ok := boxScripts[e.Name()]
		if !ok || v != string(b) {
			t.Errorf("scripts/%s has no var in scripts.go (or another's)", e.Name())
		}
		var head []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "#") {
				break
			}
			head = append(head, l)
		}
		h := strings.Join(head, "\n")
		for _, want := range []string{"# " + e.Name() + ": ", "Arguments: ", "Stdin: ", "Exit status: "} {
			if !strings.Contains(h, want) {
				t.Errorf("scripts/%s: its opening comment does not say %q", e.Name(), want)
			}
		}
		if out, err := exec.Command("sh", "-n", "-c", string(b)).CombinedOutput(); err != nil {
			t.Errorf("scripts/%s does not parse: %v: %s", e.Name(), err, out)
		}
	}
}

// TestReadConfigScript: both files, NUL-separated, each cut at $3 bytes;
// a FIFO or a missing file reads as empty, without blocking.
func TestReadConfigScript(t *testing.T) {
	dir := t.TempDir()
	cj, sj := filepath.Join(dir, ".claude.json"), filepath.Join(dir, "settings.json")
	if err := os.WriteFile(cj, []byte(`{"a":"0123456789"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(max string) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", readConfigScript, "sh", cj, sj, max).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if got := run("8"); got != `{"a":"01`+"\x00" {
		t.Errorf("cut at 8, settings missing: %q", got)
	}
	if err := syscall.Mkfifo(sj, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := run("100"); got != `{"a":"0123456789"}`+"\x00" {
		t.Errorf("settings a FIFO: %q", got)
	}
}

// TestCloneScriptFinishesACutCheckout: clone.sh makes the clone; a
// checkout cut short (its marker left) is finished at the next run; a
// whole clone is left as it is, the session's changes in it included.
func TestCloneScriptFinishesACutCheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	origin, ws := filepath.Join(dir, "origin"), filepath.Join(dir, "ws")
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a"}
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		c := exec.Command(name, args...)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	os.MkdirAll(ws, 0o755)
	run(dir, "git", "init", "-q", "-b", "main", origin)
	os.WriteFile(filepath.Join(origin, "a.txt"), []byte("a\n"), 0o644)
	run(origin, "git", "add", "a.txt")
	run(origin, "git", "commit", "-qm", "base")
	base := run(origin, "git", "rev-parse", "HEAD")
	clone := func() { run(ws, "sh", "-c", cloneScript, "sh", filepath.Join(origin, ".git"), base, "paddock/s", ws) }
	clone()
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "a\n" {
		t.Fatalf("the clone's a.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "paddock-clone-incomplete")); err == nil {
		t.Fatal("the marker stayed after a whole checkout")
	}
	// A session's change stays through a later start.
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("the session's\n"), 0o644)
	clone()
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "the session's\n" {
		t.Fatalf("a later start undid the session's change: %q", b)
	}
	// A checkout cut short: finished.
	os.Remove(filepath.Join(ws, "a.txt"))
	os.WriteFile(filepath.Join(ws, ".git", "paddock-clone-incomplete"), nil, 0o644)
	clone()
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "a\n" {
		t.Fatalf("the cut checkout was not finished: %q", b)
	}
	if got := run(ws, "git", "rev-parse", "--abbrev-ref", "HEAD"); got != "paddock/s" {
		t.Fatalf("branch %q", got)
	}
}
