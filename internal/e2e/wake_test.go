package e2e

import (
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
