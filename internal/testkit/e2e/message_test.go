package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// waitUserWords waits until a request to the fake upstream carries words
// as what the person said, and returns it.
func (e *env) waitUserWords(words string, d time.Duration) fakeapi.Request {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, r := range e.fake.Requests() {
			if r.UserWords() == words {
				return r
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var said []string
	for _, r := range e.fake.Requests() {
		if w := r.UserWords(); w != "" {
			said = append(said, w)
		}
	}
	if rs := e.fake.Requests(); len(rs) > 0 {
		var body struct {
			Messages []json.RawMessage `json:"messages"`
		}
		_ = json.Unmarshal(rs[len(rs)-1].Body, &body)
		if n := len(body.Messages); n > 0 {
			e.t.Logf("the last request's last message: %s", body.Messages[n-1])
		}
	}
	e.t.Fatalf("no request upstream said %q; they said %q", words, said)
	return fakeapi.Request{}
}

// TestSendMessage, with the real pinned Claude Code on each backend: a
// message of several lines, tabs and quotes sent with paddock send is
// the next user message upstream, word for word, as one message; one sent
// during a turn is queued and follows it; a control character is refused
// before anything is typed; a sleeping session says to wake it.
func TestSendMessage(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			name := "msg-" + backend
			e.pd("run", "-d", "--name", name, "--backend", backend)
			defer e.pdRun("rm", "-f", name)
			e.waitScreen(name, promptReady, 60*time.Second)

			// Many lines, a blank one, a tab, a line of 1200 bytes: the
			// person's own words, not a block of pasted material. Claude
			// Code makes a tab four spaces, as in any paste.
			text := "MSG-7731 review notes:\n\n- main.go:12: this `if` is never true\n\tindented, with \"quotes\" and $HOME @main.go /help\n" +
				strings.Repeat("a long line ", 100) + "\n"
			for i := range 30 {
				text += fmt.Sprintf("- note %d\n", i)
			}
			text += "- last line"
			if out := e.pd("send", name, text); !strings.Contains(out, "sent to "+name+": claude took the message") {
				t.Fatalf("send said %q", out)
			}
			e.waitUserWords(strings.ReplaceAll(text, "\t", "    "), 30*time.Second)
			e.waitFor(name, "waiting", 30*time.Second, 0)

			// During a slow turn: queued, and it follows.
			e.fake.SetPace(300*time.Millisecond, 20)
			defer e.fake.SetPace(0, 0)
			e.typeLine(name, "a slow turn")
			e.waitFor(name, "working", 30*time.Second, 0)
			if out := e.pd("send", name, "MSG-QUEUED after the slow turn"); !strings.Contains(out, "waits in its queue") {
				t.Fatalf("send during a turn said %q", out)
			}
			e.fake.SetPace(0, 0)
			e.waitUserWords("MSG-QUEUED after the slow turn", 60*time.Second)

			if _, errs, code := e.pdRun("send", name, "REFUSED-1\x1b[201~b"); code == 0 || !strings.Contains(errs, "control character U+001B") {
				t.Fatalf("send with an ESC: exit %d %q", code, errs)
			}
			time.Sleep(time.Second)
			for _, r := range e.fake.Requests() {
				if strings.Contains(r.UserWords(), "REFUSED-1") {
					t.Fatalf("a refused message reached upstream: %q", r.UserWords())
				}
			}
			if strings.Contains(e.screen(name), "REFUSED-1") {
				t.Fatalf("a refused message was typed:\n%s", e.screen(name))
			}

			e.pd("sleep", name)
			if _, errs, code := e.pdRun("send", name, "hello"); code == 0 || !strings.Contains(errs, "wake it first: paddock wake "+name) {
				t.Fatalf("send to a sleeping session: exit %d %q", code, errs)
			}
		})
	}
}
