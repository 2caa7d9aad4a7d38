package activity

import (
	"strings"
	"testing"
	"time"
)

const conv = "5f0c3a8e-1111-4222-8333-944455556666"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestApply(t *testing.T) {
	working := Activity{State: Working, Since: t0}
	waiting := Activity{State: Waiting, Since: t0}
	exited := Activity{State: Exited, Since: t0, ExitStatus: 1}
	now := t0.Add(time.Minute)
	for _, c := range []struct {
		name    string
		cur     Activity
		r       Report
		want    State
		changed bool
		effect  Effect
	}{
		{"prompt starts a turn", waiting, Report{Event: EventUserPromptSubmit, SessionID: conv}, Working, true, None},
		{"a tool keeps it working", working, Report{Event: EventPreToolUse, SessionID: conv}, Working, false, None},
		{"a tool after a question: working again", waiting, Report{Event: EventPreToolUse, SessionID: conv}, Working, true, None},
		{"stop ends the turn", working, Report{Event: EventStop, SessionID: conv}, Waiting, true, None},
		{"a question waits", working, Report{Event: EventNotification, SessionID: conv, Notification: "permission_prompt"}, Waiting, true, None},
		{"auth success is no question", working, Report{Event: EventNotification, SessionID: conv, Notification: "auth_success"}, Working, false, None},
		{"start: at its prompt", Activity{State: Starting, Since: t0}, Report{Event: EventSessionStart, SessionID: conv, Source: "startup"}, Waiting, true, None},
		{"compact is mid-turn", working, Report{Event: EventSessionStart, SessionID: conv, Source: "compact"}, Working, false, None},
		{"session end alone changes nothing", working, Report{Event: EventSessionEnd, SessionID: conv, Reason: "prompt_input_exit"}, Working, false, None},
		{"another conversation (claude -p in the box) counts for nothing", waiting, Report{Event: EventUserPromptSubmit, SessionID: "other"}, Waiting, false, None},
		{"no conversation id counts for nothing", waiting, Report{Event: EventUserPromptSubmit}, Waiting, false, None},
		{"pane died: the Runner looks", working, Report{Event: EventPaneDied}, Working, false, CheckPane},
		{"reaped: the Runner looks", working, Report{Event: EventReaped}, Working, false, CheckPane},
		{"a late report of a gone claude", exited, Report{Event: EventStop, SessionID: conv}, Exited, false, None},
		{"claude back at its prompt after an exit", exited, Report{Event: EventSessionStart, SessionID: conv, Source: "resume"}, Waiting, true, None},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed, eff := Apply(c.cur, c.r, conv, now)
			if got.State != c.want || changed != c.changed || eff != c.effect {
				t.Fatalf("Apply = %v %v %v, want %v %v %v", got.State, changed, eff, c.want, c.changed, c.effect)
			}
			if changed && !got.Since.Equal(now) {
				t.Errorf("Since = %v, want %v", got.Since, now)
			}
			if !changed && got != c.cur {
				t.Errorf("unchanged activity differs: %+v", got)
			}
		})
	}
}

func TestConversationFollowsClear(t *testing.T) {
	if got := Conversation(conv, Report{Event: EventSessionStart, Source: "clear", SessionID: "new-id"}); got != "new-id" {
		t.Errorf("after /clear: %q", got)
	}
	if got := Conversation(conv, Report{Event: EventSessionStart, Source: "startup", SessionID: "new-id"}); got != conv {
		t.Errorf("a new claude -p must not take over: %q", got)
	}
}

func TestEnded(t *testing.T) {
	for _, c := range []struct {
		name   string
		e      Exit
		status int
		signal string
		reason string
		failed bool
	}{
		{"/exit", Exit{Status: 0, EndReason: "prompt_input_exit"}, 0, "", "/exit", false},
		{"clean", Exit{Status: 0}, 0, "", "exited", false},
		{"crash", Exit{Status: 1}, 1, "", "exited with status 1", true},
		{"kill -9", Exit{Status: -1, Signal: 9}, 137, "SIGKILL", "killed by SIGKILL", true},
		{"oom", Exit{Status: -1, Signal: 9, OOM: true, MemoryLimit: 1 << 30}, 137, "SIGKILL", "killed: out of memory (limit 1024 MiB)", true},
		{"oom, limit unknown", Exit{Status: -1, Signal: 9, OOM: true}, 137, "SIGKILL", "killed: out of memory", true},
		{"an oom elsewhere does not explain a SIGTERM", Exit{Status: -1, Signal: 15, OOM: true}, 143, "SIGTERM", "killed by SIGTERM", true},
		{"tmux gone", Exit{Status: -1, Gone: true}, -1, "", "claude's terminal (tmux) is gone", true},
		{"status unknown", Exit{Status: -1}, -1, "", "claude ended; tmux did not say how", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Ended(c.e, t0)
			if a.State != Exited || a.ExitStatus != c.status || a.Signal != c.signal || a.Reason != c.reason || a.Failed() != c.failed {
				t.Fatalf("Ended(%+v) = %+v failed=%v", c.e, a, a.Failed())
			}
		})
	}
}

func TestShort(t *testing.T) {
	now := t0.Add(2*time.Minute + 5*time.Second)
	for _, c := range []struct {
		a    Activity
		want string
	}{
		{Activity{}, "-"},
		{Activity{State: Starting, Since: t0}, "starting"},
		{Activity{State: Working, Since: t0}, "working 2m"},
		{Activity{State: Waiting, Since: now.Add(-5 * time.Second)}, "waiting 5s"},
		{Activity{State: Exited, ExitStatus: 1}, "exited 1"},
		{Activity{State: Exited, ExitStatus: 137, Signal: "SIGKILL"}, "exited SIGKILL"},
		{Activity{State: Exited, ExitStatus: -1}, "exited ?"},
	} {
		if got := c.a.Short(now); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	fail := Activity{State: Exited, ExitStatus: 1}
	clean := Activity{State: Exited, ExitStatus: 0, Reason: "/exit"}
	recentN := func(n int, ago time.Duration) Restarts {
		var r Restarts
		for i := 0; i < n; i++ {
			r.Recent = append(r.Recent, t0.Add(-ago))
		}
		return r
	}
	for _, c := range []struct {
		name    string
		p       Policy
		a       Activity
		r       Restarts
		restart bool
		delay   time.Duration
		why     string
	}{
		{"no", RestartNo, fail, Restarts{}, false, 0, "policy no"},
		{"on-failure, failure", RestartOnFailure, fail, Restarts{}, true, time.Second, "restart 1 of 5"},
		{"default is on-failure", "", fail, Restarts{}, true, time.Second, "restart 1"},
		{"on-failure, /exit", RestartOnFailure, clean, Restarts{}, false, 0, "status 0"},
		{"always, /exit", RestartAlways, clean, Restarts{}, true, time.Second, "restart 1"},
		{"backoff doubles", RestartAlways, fail, recentN(3, time.Minute), true, 8 * time.Second, "restart 4 of 5"},
		{"gives up at the bound", RestartAlways, fail, recentN(5, time.Minute), false, 0, "gave up"},
		{"old restarts leave the window", RestartAlways, fail, recentN(5, 11*time.Minute), true, time.Second, "restart 1"},
		{"not exited", RestartAlways, Activity{State: Working}, Restarts{}, false, 0, "not exited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.p, c.a, c.r, t0)
			if d.Restart != c.restart || d.Delay != c.delay || !strings.Contains(d.Why, c.why) {
				t.Fatalf("Decide = %+v, want restart=%v delay=%v why~%q", d, c.restart, c.delay, c.why)
			}
		})
	}
}

func TestBackoffCapped(t *testing.T) {
	// Past six doublings the backoff stays at MaxBackoff; checked through
	// the formula directly since MaxRestarts bounds Decide before that.
	for n := 0; n < 70; n++ {
		d := MinBackoff << n
		if d > MaxBackoff || d <= 0 {
			d = MaxBackoff
		}
		if d > MaxBackoff || d < MinBackoff {
			t.Fatalf("n=%d: %v", n, d)
		}
	}
}

func TestRecord(t *testing.T) {
	var r Restarts
	for i := 0; i < 8; i++ {
		r = r.Record(t0.Add(time.Duration(i)*time.Second), "killed by SIGKILL")
	}
	if r.Count != 8 || len(r.Recent) != MaxRestarts || r.LastReason != "killed by SIGKILL" {
		t.Fatalf("%+v", r)
	}
	r = r.Record(t0.Add(time.Hour), "x")
	if len(r.Recent) != 1 {
		t.Fatalf("old restarts kept: %+v", r.Recent)
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"": RestartOnFailure, "no": RestartNo, "always": RestartAlways, "on-failure": RestartOnFailure} {
		if p, err := ParsePolicy(in); err != nil || p != want {
			t.Errorf("%q: %v %v", in, p, err)
		}
	}
	for _, bad := range []string{"yes", "On-Failure", "unless-stopped"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := Limiter{Rate: 10, Burst: 5}
	n := 0
	for i := 0; i < 100; i++ {
		if l.Allow(t0) {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("a burst at one instant let %d through, want 5", n)
	}
	if !l.Allow(t0.Add(100 * time.Millisecond)) {
		t.Fatal("one token after 100ms at 10/s")
	}
	if l.Allow(t0.Add(100 * time.Millisecond)) {
		t.Fatal("only one")
	}
	n = 0
	for i := 0; i < 1000; i++ { // a steady flood over 10 s
		if l.Allow(t0.Add(time.Second + time.Duration(i)*10*time.Millisecond)) {
			n++
		}
	}
	if n < 95 || n > 106 {
		t.Fatalf("a 100/s flood over 10s at 10/s let %d through", n)
	}
	var zero Limiter
	if zero.Allow(t0) {
		t.Fatal("the zero Limiter allows nothing")
	}
}
