package runner

import (
	"time"

	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func (r *Runner) policy(session string) *egress.Policy {
	sl := r.slot(session)
	if sl == nil {
		return nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.policy
}

// setPolicy installs a session's egress policy (none for offline).
// Open tunnels the new policy refuses are cut, and connections waiting for
// approval that it now decides are answered; it returns how many tunnels
// it cut.
func (r *Runner) setPolicy(s *session.Session) (int, error) {
	var p *egress.Policy
	if s.Egress != session.EgressOffline {
		sp, err := r.egressSpec(*s)
		if err != nil {
			return 0, err
		}
		if p, err = sp.Policy(); err != nil {
			return 0, err
		}
	}
	sl := r.pin(s.ID)
	sl.mu.Lock()
	sl.policy = p
	r.armExpiryLocked(sl)
	sl.mu.Unlock()
	r.unpin(sl)
	return r.egress.Recheck(s.ID), nil
}

// armExpiryLocked has the session's tunnels checked again when the next of
// its timed approvals (egress approve --for) ends: new connections stop
// matching an approval by themselves, and the check cuts a tunnel that it
// alone allowed. One timer per session, replaced with each policy (so a
// Runner started again arms it from the stored approvals), stopped with
// the policy. Under sl.mu.
func (r *Runner) armExpiryLocked(sl *slot) {
	if sl.expiry != nil {
		sl.expiry.Stop()
		sl.expiry = nil
	}
	p := sl.policy
	if p == nil {
		return
	}
	now := time.Now()
	var next time.Time
	for _, a := range p.Approved {
		if !a.Until.IsZero() && a.Until.After(now) && (next.IsZero() || a.Until.Before(next)) {
			next = a.Until
		}
	}
	if next.IsZero() {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(next)+10*time.Millisecond, func() {
		r.egress.Recheck(sl.id)
		sl.mu.Lock()
		if sl.expiry == t { // not replaced meanwhile: on to the next one
			r.armExpiryLocked(sl)
		}
		sl.mu.Unlock()
		r.dropIfIdle(sl)
	})
	sl.expiry = t
}

// dropPolicy ends a session's egress: its tunnels are cut, its waiting
// connections refused.
func (r *Runner) dropPolicy(id string) {
	if sl := r.slot(id); sl != nil {
		sl.mu.Lock()
		sl.policy = nil
		r.armExpiryLocked(sl)
		sl.mu.Unlock()
		r.dropIfIdle(sl)
	}
	if r.egress != nil {
		r.egress.Recheck(id)
	}
}
