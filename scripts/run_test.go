// Package scripts holds the tests of the shell scripts behind the README's
// two commands; the scripts themselves are not Go.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakePaddock stands in for bin/paddock: it appends each call to calls.log
// (and what `credential set` read from stdin), and answers `credential
// status` with the status file's text, one line per write with a pause
// between them, as the real one writes its "no credential" line and then its
// note. `ls` succeeds once a Runner was "started" (serve was called; the
// fake one ends at once).
const fakePaddock = `#!/bin/bash
d="$(cd "$(dirname "$0")" && pwd)"
echo "$*" >> "$d/calls.log"
case "$1 $2" in
"credential status")
  [ -f "$d/status.exit" ] && exit "$(cat "$d/status.exit")"
  first=1
  while IFS= read -r line; do
    [ $first = 1 ] || sleep 0.2
    first=0
    printf '%s\n' "$line" || exit 141
  done < "$d/status"
  ;;
"credential set") echo "set: $(cat)" >> "$d/calls.log" ;;
"ls ") [ -f "$d/serving" ]; exit ;;
"serve ") touch "$d/serving" ;;
esac
exit 0
`

// runScript runs a copy of run.sh beside a fake bin/paddock whose
// `credential status` prints status (or exits with statusExit when it is
// not 0), with stdin, and returns the fake's calls.
func runScript(t *testing.T, status string, statusExit int, stdin string, args ...string) []string {
	t.Helper()
	src, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{"scripts", "bin", "state"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("scripts/run.sh", string(src), 0o755)
	write("bin/paddock", fakePaddock, 0o755)
	write("bin/status", status, 0o644)
	if statusExit != 0 {
		write("bin/status.exit", strconv.Itoa(statusExit), 0o644)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts/run.sh")}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PADDOCK_STATE_DIR=" + filepath.Join(root, "state")}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	calls, err := os.ReadFile(filepath.Join(root, "bin/calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(calls)), "\n")
}

// index is the first call that starts with prefix, or -1.
func index(calls []string, prefix string) int {
	for i, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return i
		}
	}
	return -1
}

func has(calls []string, prefix string) bool { return index(calls, prefix) >= 0 }

// TestRunAsksForAMissingCredential: with no credential (as `credential
// status` says it with no Runner up: the line, then a note), run.sh stores
// the one piped in before it starts the Runner and the session. The fake
// writes its note after a pause, so a check that stops reading at the first
// line (grep -q under pipefail) fails here every time, not one run in five.
func TestRunAsksForAMissingCredential(t *testing.T) {
	status := "no credential: store one with `paddock credential set`, or start `paddock serve` with CLAUDE_CODE_OAUTH_TOKEN or ANTHROPIC_API_KEY set\n" +
		"note:        the Runner is not running; this is what `paddock serve` would use, started from this shell\n"
	calls := runScript(t, status, 0, "sk-ant-oat01-piped\n", "-d", "--name", "demo")
	if !has(calls, "set: sk-ant-oat01-piped") {
		t.Fatalf("the piped credential was not stored; calls:\n%s", strings.Join(calls, "\n"))
	}
	// In order: the credential stored, the Runner started, the session run.
	if i, j, k := index(calls, "set:"), index(calls, "serve"), index(calls, "run -d --name demo"); !(i < j && j < k) {
		t.Fatalf("not stored, started, run, in that order; calls:\n%s", strings.Join(calls, "\n"))
	}
}

// TestRunKeepsAStoredCredential: with one stored, nothing is asked for.
func TestRunKeepsAStoredCredential(t *testing.T) {
	status := "kind:        oauth\nsource:      file\nlength:      108\nfingerprint: sha256:0123\n"
	calls := runScript(t, status, 0, "", "-d")
	if has(calls, "credential set") || has(calls, "set:") {
		t.Fatalf("asked for a credential although one is stored; calls:\n%s", strings.Join(calls, "\n"))
	}
	if !has(calls, "run -d") {
		t.Fatalf("no session run; calls:\n%s", strings.Join(calls, "\n"))
	}
}

// TestRunAsksWhenStatusFails: a Runner that answers "no credential" as an
// error (exit 3) is asked for one too.
func TestRunAsksWhenStatusFails(t *testing.T) {
	calls := runScript(t, "", 3, "sk-ant-api03-piped\n", "-d")
	if !has(calls, "set: sk-ant-api03-piped") {
		t.Fatalf("the piped credential was not stored; calls:\n%s", strings.Join(calls, "\n"))
	}
}
