package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// applyRestartPolicy applies the session's restart policy to claude's
// exit: a restart with --resume after the backoff (the box's supervisor
// keeps the timer), or the reason it stays exited. Call with the
// session's lock held; it saves s.
func (r *Runner) applyRestartPolicy(s *session.Session, l *Link) {
	d := activity.Decide(s.Restart, s.Activity, s.Restarts, time.Now())
	if !d.Restart {
		if s.Restart != activity.RestartNo && s.Activity.Failed() {
			s.Restarts.LastReason = d.Why
		}
		_ = r.save(s)
		r.log.Info("claude stays exited", logkey.Session, s.ID, logkey.Reason, d.Why)
		return
	}
	_ = r.save(s)
	sl := r.slot(s.ID) // under the session's lock: there is one
	sl.mu.Lock()
	gen := sl.activityOf(s).gen
	sl.mu.Unlock()
	r.log.Info("claude will be restarted", logkey.Session, s.ID, "in", d.Delay.String(), logkey.Reason, d.Why)
	req := restartReq{delay: d.Delay, gen: gen, reason: s.Activity.Reason}
	for { // the latest request wins: one restart timer per box
		select {
		case l.sup.restart <- req:
			return
		default:
		}
		select {
		case <-l.sup.restart:
		default:
		}
	}
}

// restartClaude starts claude again with --resume in a box whose claude
// exited, unless anything happened since (a wake, a sleep, another exit).
func (r *Runner) restartClaude(id string, l *Link, gen uint64, reason string) {
	unlock := r.sessionLock(id)
	defer unlock()
	lv := r.getLive(id)
	if lv == nil || lv.link != l || r.stopping.Load() {
		return
	}
	sl := r.slot(id)
	sl.mu.Lock()
	e := sl.act
	current := e != nil && e.gen == gen && e.a.State == activity.Exited
	sl.mu.Unlock()
	s, err := r.reload(id)
	if !current || err != nil || s.Observed != session.Running {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := r.launch(ctx, &s, l)
	if err != nil {
		s.Restarts.LastReason = "restart failed: " + err.Error()
		_ = r.save(&s)
		r.log.Warn("claude restart failed", logkey.Session, id, logkey.Error, err)
		return
	}
	r.setLive(id, &live{link: l, env: env})
	s.Restarts = s.Restarts.Record(time.Now().UTC(), reason)
	_ = r.save(&s)
	r.log.Info("claude restarted", logkey.Session, id, "restarts", s.Restarts.Count, logkey.Reason, reason)
}

// wakeExited brings back claude that exited in a running box (paddock
// wake, paddock restart): claude --resume, as a restart does, and the
// count of recent automatic restarts starts again. handled is false when
// the session is not such a one; Wake then goes on as usual.
func (r *Runner) wakeExited(ctx context.Context, ref string) (s session.Session, handled bool, err error) {
	if err := r.waitAdopted(ctx); err != nil {
		return s, false, nil
	}
	if s, err = r.Session(ctx, ref); err != nil || s.Observed != session.Running || s.Activity.State != activity.Exited {
		return s, false, nil
	}
	unlock := r.sessionLock(s.ID)
	defer unlock()
	if s, err = r.reload(s.ID); err != nil {
		return s, true, err
	}
	r.stampActivity(&s)
	lv := r.getLive(s.ID)
	if s.Observed != session.Running || s.Activity.State != activity.Exited || lv == nil {
		return s, false, nil
	}
	env, err := r.launch(ctx, &s, lv.link)
	if err != nil {
		return s, true, fmt.Errorf("start claude again in session %q: %w", s.Name, err)
	}
	r.setLive(s.ID, &live{link: lv.link, env: env})
	s.Restarts.Recent = nil
	r.log.Info("claude woken", logkey.Session, s.ID)
	return s, true, r.save(&s)
}
