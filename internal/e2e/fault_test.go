package e2e

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/session"
)

// TestBoxKilledFromOutside kills a running session's box behind paddock's
// back — SIGKILL to every process of a local box, `docker kill` for a
// container — while the Runner runs. The session becomes asleep with the
// reason, its token is revoked, and wake resumes the conversation.
func TestBoxKilledFromOutside(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			name := "killed-" + backend
			id, tok := e.chat(name, backend)
			// What Claude Code has written survives; wait until the answer
			// is in its transcript, as a user would see it there.
			for i := 0; !strings.Contains(e.pd("exec", name, "--", "sh", "-c", `cat "$CLAUDE_CONFIG_DIR"/projects/-workspace/*.jsonl`), "hi from the fake server (turn 1)"); i++ {
				if i == 100 {
					t.Fatal("the answer never reached the transcript")
				}
				time.Sleep(100 * time.Millisecond)
			}

			killed := 0
			for _, o := range e.objectsOf(id) {
				switch {
				case backend == "local" && o.Kind == sandbox.KindProcess:
					pid, _ := strconv.Atoi(o.ID)
					if syscall.Kill(pid, syscall.SIGKILL) == nil {
						killed++
					}
				case backend == "docker" && o.Kind == sandbox.KindBox:
					if out, err := exec.Command("docker", "kill", o.ID).CombinedOutput(); err != nil {
						t.Fatalf("docker kill: %v %s", err, out)
					}
					killed++
				}
			}
			if killed == 0 {
				t.Fatal("found nothing of the box to kill")
			}
			var got session.Session
			deadline := time.Now().Add(30 * time.Second)
			for {
				var all []session.Session
				if err := json.Unmarshal([]byte(e.pd("ls", "-a", "--json")), &all); err != nil {
					t.Fatal(err)
				}
				for _, s := range all {
					if s.Name == name {
						got = s
					}
				}
				if got.Observed == session.Asleep {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("session after its box was killed: %s %q", got.Observed, got.Reason)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(got.Reason, "stopped from outside") || !strings.Contains(got.Reason, "paddock wake") {
				t.Fatalf("reason %q", got.Reason)
			}
			if out := e.pd("ls", "-a"); !strings.Contains(out, "stopped from outside") {
				t.Fatalf("ls does not show the reason:\n%s", out)
			}
			if st := proxyStatus(t, e.dir, tok); st != 401 {
				t.Fatalf("the dead box's token got %d", st)
			}
			e.pd("wake", name)
			e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
			e.waitScreen(name, promptReady, 30*time.Second)
			e.typeLine(name, "again")
			e.waitScreen(name, "(turn 2)", 30*time.Second)
			e.pd("rm", name)
		})
	}
}

// TestUnresumableTranscriptKeptAside: a transcript without a user message
// (what a box killed mid-write can leave) would make claude --resume exit
// at once. Wake keeps the file aside and starts the conversation anew.
func TestUnresumableTranscriptKeptAside(t *testing.T) {
	e := newEnv(t)
	name := "unresumable"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	var all []session.Session
	if err := json.Unmarshal([]byte(e.pd("ls", "--json")), &all); err != nil || len(all) != 1 {
		t.Fatalf("ls: %v %d", err, len(all))
	}
	path := `"$CLAUDE_CONFIG_DIR"/projects/-workspace/` + all[0].ClaudeSessionID + ".jsonl"
	e.pd("exec", name, "--", "sh", "-c", `mkdir -p "$(dirname `+path+`)" && echo '{"type":"summary","summary":"x"}' > `+path)
	e.pd("sleep", name)
	e.pd("wake", name)
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "hello again")
	e.waitScreen(name, "(turn 1)", 30*time.Second)
	if out := e.pd("exec", name, "--", "sh", "-c", "cat "+path+".unresumable"); !strings.Contains(out, `"summary":"x"`) {
		t.Fatalf("the unresumable transcript was not kept: %q", out)
	}
	e.pd("rm", name)
}
