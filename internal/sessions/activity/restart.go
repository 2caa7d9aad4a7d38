package activity

import (
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Policy says when the Runner restarts claude after it exits in a
// running box (with --resume, so the conversation goes on).
type Policy string

// Restart policies.
const (
	// RestartNo never restarts: paddock wake brings claude back.
	RestartNo Policy = "no"
	// RestartOnFailure restarts after an exit with a non-zero status or a
	// signal; /exit (status 0) stays exited. The default.
	RestartOnFailure Policy = "on-failure"
	// RestartAlways restarts after every exit, /exit included.
	RestartAlways Policy = "always"
)

// DefaultPolicy applies where a session records none (older records too).
const DefaultPolicy = RestartOnFailure

// ParsePolicy checks a policy; "" is DefaultPolicy.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return DefaultPolicy, nil
	case RestartNo, RestartOnFailure, RestartAlways:
		return p, nil
	}
	return "", fmt.Errorf("restart policy %q is not no, on-failure or always: %w", s, errdefs.ErrInvalid)
}

// Bounds of automatic restarts: at most MaxRestarts within RestartWindow,
// each after a backoff that doubles from MinBackoff up to MaxBackoff.
const (
	MaxRestarts   = 5
	RestartWindow = 10 * time.Minute
	MinBackoff    = time.Second
	MaxBackoff    = 60 * time.Second
)

// Restarts is a session's record of automatic restarts.
type Restarts struct {
	// Count is every automatic restart of the session.
	Count int `json:"count,omitempty"`
	// Recent are the times of the restarts within RestartWindow, oldest
	// first (at most MaxRestarts).
	Recent []time.Time `json:"recent,omitempty"`
	// LastReason says why claude last exited before a restart, or why the
	// Runner gave up restarting it.
	LastReason string `json:"last_reason,omitempty"`
}

// recent keeps the times within RestartWindow before now.
func recent(ts []time.Time, now time.Time) []time.Time {
	var out []time.Time
	for _, t := range ts {
		if now.Sub(t) < RestartWindow {
			out = append(out, t)
		}
	}
	return out
}

// Decision is what Decide says about one exit.
type Decision struct {
	Restart bool
	// Delay before the restart (the backoff).
	Delay time.Duration
	// Why, in words, for the log and the session's record.
	Why string
}

// Decide says whether claude, which exited as a says, is restarted under
// policy p, given the earlier restarts r, and after what backoff.
func Decide(p Policy, a Activity, r Restarts, now time.Time) Decision {
	if p == "" {
		p = DefaultPolicy
	}
	switch {
	case a.State != Exited:
		return Decision{Why: "claude has not exited"}
	case p == RestartNo:
		return Decision{Why: "restart policy no; paddock wake brings claude back"}
	case p == RestartOnFailure && !a.Failed():
		return Decision{Why: "claude exited with status 0 and the restart policy is on-failure; paddock wake brings it back"}
	}
	n := len(recent(r.Recent, now))
	if n >= MaxRestarts {
		return Decision{Why: fmt.Sprintf("gave up: claude was restarted %d times within %v; paddock wake brings it back", n, RestartWindow)}
	}
	d := MinBackoff << n
	if d > MaxBackoff || d <= 0 {
		d = MaxBackoff
	}
	return Decision{Restart: true, Delay: d, Why: fmt.Sprintf("restart %d of %d within %v after %v", n+1, MaxRestarts, RestartWindow, d)}
}

// Record notes a restart at now after an exit for reason.
func (r Restarts) Record(now time.Time, reason string) Restarts {
	rs := append(recent(r.Recent, now), now)
	if len(rs) > MaxRestarts {
		rs = rs[len(rs)-MaxRestarts:]
	}
	return Restarts{Count: r.Count + 1, Recent: rs, LastReason: reason}
}

// Limiter is a token bucket: Rate reports a second, Burst at once. The
// zero value allows nothing; it is not safe for concurrent use.
type Limiter struct {
	Rate, Burst float64
	tokens      float64
	last        time.Time
}

// Allow takes one token at now, if there is one.
func (l *Limiter) Allow(now time.Time) bool {
	if l.last.IsZero() {
		l.tokens = l.Burst
	} else if dt := now.Sub(l.last).Seconds(); dt > 0 {
		l.tokens = min(l.Burst, l.tokens+dt*l.Rate)
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}
