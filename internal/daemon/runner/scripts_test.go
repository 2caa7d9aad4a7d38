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
