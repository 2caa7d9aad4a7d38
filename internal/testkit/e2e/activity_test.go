package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/session"
)

// killClaude is a shell line that SIGKILLs claude in the box (the boxes
// have no pkill): every process whose comm is claude.
const killClaude = `for p in /proc/[0-9]*; do c=$(cat $p/comm 2>/dev/null); echo "${p#/proc/} $c"; [ "$c" = claude ] && kill -9 "${p#/proc/}" && echo killed; done; true`

// inspect reads a session's record through the CLI.
func (e *env) inspect(name string) session.Session {
	e.t.Helper()
	var s session.Session
	if err := json.Unmarshal([]byte(e.pd("inspect", name)), &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// waitFor runs paddock wait and fails the test unless it exits with want.
func (e *env) waitFor(name, state string, timeout time.Duration, want int) string {
	e.t.Helper()
	out, code := e.pdCode("wait", name, "--for", state, "--timeout", timeout.String())
	if code != want {
		s := e.inspect(name)
		e.t.Fatalf("paddock wait %s --for %s: exit %d, want %d: %s\nactivity %+v\nscreen:\n%s", name, state, code, want, out, s.Activity, e.screen(name))
	}
	return out
}

// TestActivityAndSupervision drives claude's activity on each backend
// with the real pinned Claude Code: starting → waiting at its prompt,
// working during a slow streamed turn, waiting after it; exited after a
// kill -9 and back (on-failure) with its history; exited after /exit and
// left so; back with paddock restart. The notify command sees each
// waiting and exit with the right variables, and never a token.
func TestActivityAndSupervision(t *testing.T) {
	notes := filepath.Join(testenvDir(t), "notify.log")
	e := newEnv(t, "[log]", `level = "debug"`, "[notify]", `command = "env | grep ^PADDOCK_ | sort | tr '\\n' ' ' >> `+notes+`; echo >> `+notes+`"`, `timeout = "5s"`)
	for _, backend := range []string{"local", "docker"} {
		func() {
			t.Logf("backend %s", backend)
			name := "act-" + backend
			e.pd("run", "-d", "--name", name, "--backend", backend)
			e.waitFor(name, "waiting", 60*time.Second, 0)
			e.waitScreen(name, promptReady, 30*time.Second)

			// A slow streamed turn: working while it streams, waiting after.
			e.fake.SetPace(250*time.Millisecond, 24)
			e.typeLine(name, "say hi")
			e.waitFor(name, "working", 30*time.Second, 0)
			if ls := e.pd("ls"); !strings.Contains(ls, "working") {
				t.Errorf("ls during a turn shows no working:\n%s", ls)
			}
			// Timeout: still working after 300ms.
			e.waitFor(name, "waiting", 300*time.Millisecond, 6)
			e.waitFor(name, "waiting", 60*time.Second, 0)
			e.fake.SetPace(0, 0)
			e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)

			// kill -9: exited with the signal, then on-failure restarts
			// claude with --resume.
			if out := e.pd("exec", name, "--", "sh", "-c", killClaude); !strings.Contains(out, "killed") {
				t.Fatalf("no claude process to kill in the box:\n%s", out)
			}
			t0 := time.Now()
			out := e.waitFor(name, "exited", 30*time.Second, 0)
			// claude's wrapper in the pane records how it ended, which
			// tmux 3.3 alone sometimes loses.
			if !strings.Contains(out, "SIGKILL") {
				t.Errorf("wait --for exited after kill -9 says %q", out)
			}
			t.Logf("exit seen %v after the kill", time.Since(t0))
			e.waitFor(name, "waiting", 90*time.Second, 0)
			s := e.inspect(name)
			if s.Restarts.Count != 1 || !strings.Contains(s.Restarts.LastReason, "SIGKILL") {
				t.Errorf("after one restart: %+v", s.Restarts)
			}
			if ls := e.pd("ls"); !strings.Contains(ls, "RESTARTS") {
				t.Errorf("ls has no RESTARTS column:\n%s", ls)
			}
			// The resumed conversation carries the earlier turn upstream.
			before := len(e.fake.Requests())
			e.waitScreen(name, promptReady, 30*time.Second)
			e.typeLine(name, "say again")
			e.waitScreen(name, "hi from the fake server (turn 2)", 60*time.Second)
			e.waitFor(name, "waiting", 30*time.Second, 0)
			resumed := false
			for _, r := range e.fake.Requests()[before:] {
				if r.Path == "/v1/messages" && r.Messages >= 3 && strings.Contains(string(r.Body), "say hi") {
					resumed = true
				}
			}
			if !resumed {
				t.Errorf("no request after the restart carried the earlier turn")
			}

			// /exit: status 0; on-failure leaves it exited.
			e.typeLine(name, "/exit")
			out = e.waitFor(name, "exited", 30*time.Second, 0)
			if !strings.Contains(out, "exited 0") {
				t.Errorf("wait after /exit says %q", out)
			}
			time.Sleep(3 * time.Second)
			s = e.inspect(name)
			if s.Activity.State != "exited" || s.Activity.Reason != "/exit" || s.Restarts.Count != 1 || s.Observed != session.Running {
				t.Errorf("after /exit: %+v restarts %+v state %s", s.Activity, s.Restarts, s.Observed)
			}
			// paddock restart (wake's alias) brings it back.
			e.pd("restart", name)
			e.waitFor(name, "waiting", 60*time.Second, 0)
			e.waitScreen(name, promptReady, 30*time.Second)

			// A session that goes away: wait says so (exit 4).
			e.pd("rm", "-f", name)
			e.waitFor(name, "waiting", 5*time.Second, 4)

			b, _ := os.ReadFile(notes)
			log := string(b)
			killedBy := "PADDOCK_ACTIVITY=exited PADDOCK_EXIT_STATUS=137 PADDOCK_REASON=killed by SIGKILL PADDOCK_SESSION=" + name
			for _, want := range []string{
				"PADDOCK_ACTIVITY=waiting PADDOCK_SESSION=" + name,
				killedBy,
				"PADDOCK_ACTIVITY=exited PADDOCK_EXIT_STATUS=0 PADDOCK_REASON=/exit PADDOCK_SESSION=" + name,
				"PADDOCK_SESSION_ID=" + s.ID,
				"PADDOCK_SESSION_OWNER=root",
			} {
				if !strings.Contains(log, want) {
					t.Errorf("the notify command never saw %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, ownerToken) || strings.Contains(log, "sk-") || strings.Contains(log, "TOKEN") {
				t.Errorf("a credential reached the notify command:\n%s", log)
			}
		}()
	}
}

// TestHookFloodFromTheBox: a box that floods paddock's hook with reports
// (right and wrong conversation ids, garbage) is capped; its session
// still works a turn, its activity stays right, and the Runner answers.
func TestHookFloodFromTheBox(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		func() {
			t.Logf("backend %s", backend)
			name := "flood-" + backend
			e.pd("run", "-d", "--name", name, "--backend", backend)
			e.waitFor(name, "waiting", 60*time.Second, 0)
			s := e.inspect(name)
			flood := `i=0; while [ $i -lt 8 ]; do (j=0; while [ $j -lt 40 ]; do
  echo '{"session_id":"` + s.ClaudeSessionID + `"}' | paddock guest hook PreToolUse
  echo '{"session_id":"other"}' | paddock guest hook Stop
  echo 'garbage' | paddock guest hook Notification
  paddock guest hook pane-died </dev/null
  j=$((j+1)); done) & i=$((i+1)); done; wait`
			t0 := time.Now()
			e.pd("exec", name, "--", "sh", "-c", flood)
			t.Logf("flood of %d hook runs took %v", 8*40*4, time.Since(t0))
			// The Runner answers at once, the session runs.
			t1 := time.Now()
			e.pd("ls")
			if d := time.Since(t1); d > 2*time.Second {
				t.Errorf("ls took %v after the flood", d)
			}
			// The flood's PreToolUse left it working; a real turn ends
			// with waiting, and claude answers.
			e.waitScreen(name, promptReady, 30*time.Second)
			e.typeLine(name, "say hi")
			e.waitScreen(name, "hi from the fake server (turn 1)", 60*time.Second)
			e.waitFor(name, "waiting", 30*time.Second, 0)
			if s := e.inspect(name); s.Observed != session.Running || s.Activity.State != "waiting" || s.Restarts.Count != 0 {
				t.Errorf("after the flood: %s %+v %+v", s.Observed, s.Activity, s.Restarts)
			}
			e.pd("rm", "-f", name)
		}()
	}
}

// testenvDir is a directory the Runner (root) can write and the test read.
func testenvDir(t *testing.T) string {
	d := t.TempDir()
	_ = os.Chmod(d, 0o755)
	return d
}
