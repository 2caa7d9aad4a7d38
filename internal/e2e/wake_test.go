package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestWakeBeforeFirstPrompt: a session slept before anyone typed has no
// transcript yet; wake must start a new conversation, not --resume one.
func TestWakeBeforeFirstPrompt(t *testing.T) {
	e := newEnv(t)
	for _, be := range []string{"local", "docker"} {
		name := "x-" + be
		e.pd("run", "-d", "--name", name, "--backend", be)
		poll(t, e, name, "create "+be)
		e.pd("sleep", name)
		e.pd("wake", name)
		poll(t, e, name, "wake "+be)
		e.pd("rm", name)
	}
	// The Runner's log tells a first start from a wake.
	first, again := 0, 0
	for _, l := range strings.Split(e.log.String(), "\n") {
		if strings.Contains(l, `msg="session running"`) {
			first += strings.Count(l, "resume=false")
			again += strings.Count(l, "resume=true")
		}
	}
	if first != 2 || again != 2 {
		t.Errorf("the log says %d first starts and %d resumes, want 2 and 2:\n%s", first, again, e.log.String())
	}
}

func poll(t *testing.T, e *env, name, what string) {
	t0 := time.Now()
	for time.Since(t0) < 20*time.Second {
		if e.ready(name) {
			t.Logf("%s: ready after %v", what, time.Since(t0))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s := e.screen(name)
	t.Fatalf("%s: never ready: %q", what, s[max(0, len(s)-600):])
}
