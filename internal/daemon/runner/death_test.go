package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// timedWait is a backend whose Wait results are noted with their time, so
// a test can tell how long the Runner took to act on one.
type timedWait struct {
	sandbox.Backend
	mu  sync.Mutex
	got map[string]time.Time // box id → when its Wait returned an end
}

func (b *timedWait) Wait(ctx context.Context, id string) (sandbox.ExitStatus, error) {
	st, err := b.Backend.(sandbox.Waiter).Wait(ctx, id)
	if err == nil {
		b.mu.Lock()
		b.got[id] = time.Now()
		b.mu.Unlock()
	}
	return st, err
}

func (b *timedWait) waited(id string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.got[id]
	return t, ok
}

// killFromOutside kills a running box behind the Runner's back: SIGKILL
// to every process of a local box, docker kill for a container. Its
// channel drops at the same moment, with the guest.
func killFromOutside(t *testing.T, be sandbox.Backend, id, boxID string) {
	t.Helper()
	objs, err := be.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, o := range objs {
		if o.Session != id {
			continue
		}
		switch {
		case be.Name() == "local" && o.Kind == sandbox.KindProcess:
			pid, _ := strconv.Atoi(o.ID)
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		case be.Name() == "docker" && o.Kind == sandbox.KindBox:
			if out, err := exec.Command("docker", "kill", o.ID).CombinedOutput(); err != nil {
				t.Fatalf("docker kill: %v: %s", err, out)
			}
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("nothing of box %s to kill among %+v", boxID, objs)
	}
}

// TestBoxDeathDecidedOnce kills a running session's box from outside, on
// every backend here: its channel drops with it, its backend's Wait
// returns, and claude's pane can no longer be read. The Runner decides
// the box's end once: one "session box ended" in its log, one reason in
// the record (asleep, saying how to resume), claude's activity exited,
// its token revoked, within a second of the Wait result; and the session
// leaves the Runner's memory.
func TestBoxDeathDecidedOnce(t *testing.T) {
	testenv.Root(t)
	for name, be := range testBackends(t) {
		t.Run(name, func(t *testing.T) {
			tw := &timedWait{Backend: be, got: map[string]time.Time{}}
			logs := &testenv.Buffer{}
			r, _ := runnerWith(t, map[string]sandbox.Backend{name: tw}, slog.New(slog.NewJSONHandler(logs, nil)), nil)
			ctx := context.Background()
			s, err := r.CreateSession(ctx, api.CreateRequest{Name: "doomed", Backend: name})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.RemoveSession(context.Background(), s.ID, false) })
			if _, ok, err := r.WaitActivity(ctx, s.ID, activity.Waiting); err != nil || !ok {
				t.Fatalf("claude never waited at its prompt: %v\n%s", err, logs.String())
			}
			tok := boxToken(t, r, s.ID)

			killFromOutside(t, be, s.ID, s.BoxID)
			var got session.Session
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if got, err = r.Session(ctx, s.ID); err != nil {
					t.Fatal(err)
				}
				if got.Observed != session.Running || time.Now().After(deadline) {
					break
				}
			}
			decided := time.Now()
			if got.Observed != session.Asleep || !strings.Contains(got.Reason, "stopped from outside") || !strings.Contains(got.Reason, "paddock wake") {
				t.Fatalf("after the kill: %s, reason %q\n%s", got.Observed, got.Reason, logs.String())
			}
			if got.Activity.State != activity.Exited || got.Activity.Reason == "" {
				t.Fatalf("claude's activity after the kill: %+v", got.Activity)
			}
			waited, ok := tw.waited(s.BoxID)
			if !ok {
				t.Fatal("the backend's Wait never returned the box's end")
			}
			// The record was read every 20 ms: the decision took at most
			// that much longer than what is measured here.
			if d := decided.Sub(waited); d > time.Second {
				t.Fatalf("the session was marked asleep %v after the backend's Wait returned", d)
			}
			if st, _ := proxied(t, r, tok); st != 401 {
				t.Fatalf("the dead box's token got %d", st)
			}
			// Once: whatever else saw the box go (its channel, a look at
			// claude's pane) decided nothing of its own.
			time.Sleep(linkGrace + time.Second)
			ended, lost, failed := 0, 0, 0
			for _, line := range strings.Split(logs.String(), "\n") {
				var e struct {
					Msg     string `json:"msg"`
					Session string `json:"session"`
				}
				if json.Unmarshal([]byte(line), &e) != nil || e.Session != s.ID {
					continue
				}
				switch e.Msg {
				case "session box ended":
					ended++
				case "session box lost", "claude exited":
					lost++
				case "session failed":
					failed++
				}
			}
			if ended != 1 || lost != 0 || failed != 0 {
				t.Fatalf("the box's end was decided %d times (and %d other verdicts, %d failures):\n%s", ended, lost, failed, logs.String())
			}
			if again, _ := r.Session(ctx, s.ID); again.Reason != got.Reason || again.Observed != session.Asleep {
				t.Fatalf("the record changed after the decision: %s %q, was %q", again.Observed, again.Reason, got.Reason)
			}
			if n := r.slotCount(); n != 0 {
				t.Fatalf("the dead box's session is still in the Runner's memory (%d slots)", n)
			}
		})
	}
}
