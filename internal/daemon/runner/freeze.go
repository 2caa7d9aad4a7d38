package runner

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// The freeze tier: a frozen session keeps its box and every process's
// memory, stopped at once (the cgroup freezer of a local box, docker pause
// for a docker one). Its session token is suspended, so the proxy refuses
// it exactly as a revoked one. Its channel stays open with its keepalive
// paused (a frozen guest answers none), and so does the terminal mirror,
// whose participants are sent away (whoever attaches next thaws it).
// Thawing resumes the processes where they were, the keepalive and the
// token: no new claude, no --resume, the same token, the same channel.
// After a Runner restart a frozen session has no channel; its thaw links
// one.

// Freeze freezes a running session (paddock sleep --freeze). reason says
// why, for the session's record ("" for a person's request).
func (r *Runner) Freeze(ctx context.Context, ref string) (session.Session, error) {
	return r.freezeSession(ctx, ref, "")
}

func (r *Runner) freezeSession(ctx context.Context, ref, reason string) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpSleep)
	if err != nil {
		return s, err
	}
	defer unlock()
	if s.Frozen {
		return s, nil
	}
	if s.Observed != session.Running {
		return s, fmt.Errorf("session %q is %s; only a running session can be frozen: %w", s.Name, s.Observed, errdefs.ErrConflict)
	}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return s, err
	}
	fz, ok := be.(sandbox.Freezer)
	if !ok {
		return s, fmt.Errorf("the %s backend cannot freeze a box; paddock sleep %s (without --freeze) stops it instead: %w", s.Backend, s.Name, errdefs.ErrUnavailable)
	}
	lv := r.getLive(s.ID)
	if lv == nil {
		return s, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
	}
	// The token first: from here the proxy refuses it, as a revoked one.
	r.tokens.Suspend(s.ID)
	lv.link.Client.PauseKeepAlive() // a frozen guest answers no keepalive
	if err := fz.Freeze(ctx, s.BoxID); err != nil {
		lv.link.Client.ResumeKeepAlive()
		r.tokens.Resume(s.ID)
		return s, err
	}
	now := time.Now().UTC()
	s.Frozen, s.FrozenAt = true, now
	s.Reason = "frozen: its memory is kept and its processes are stopped; paddock wake (or attach) thaws it"
	if reason != "" {
		s.Reason = "frozen " + reason + "; paddock wake (or attach) thaws it"
	}
	r.log.Info("session frozen", logkey.Session, s.ID, logkey.Reason, cmp.Or(reason, "asked"))
	err = r.save(&s)
	// Attached people leave once the freeze is on record, so that what
	// they ask next (attach says why its terminal ended) finds it; the
	// mirror stays.
	lv.evict()
	return s, err
}

// thaw resumes a frozen session's processes, links its channel again and
// lifts its token's suspension. The session is locked by the caller.
func (r *Runner) thaw(ctx context.Context, s *session.Session) error {
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return err
	}
	fz, ok := be.(sandbox.Freezer)
	if !ok {
		return fmt.Errorf("the %s backend cannot thaw a box: %w", s.Backend, errdefs.ErrUnavailable)
	}
	if err := fz.Thaw(ctx, s.BoxID); err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
		return err
	}
	if lv := r.getLive(s.ID); lv != nil {
		// Frozen by this Runner: its channel and mirror are still there
		// (the mirror starts now if it never had: the next attach is near).
		lv.link.Client.ResumeKeepAlive()
		r.tokens.Resume(s.ID)
		go func() { _, _ = lv.mirrorOf(context.Background()) }()
		s.Frozen, s.FrozenAt, s.Reason = false, time.Time{}, ""
		r.log.Info("session thawed", logkey.Session, s.ID)
		return r.save(s)
	}
	// Frozen before this Runner started: link a channel.
	link, err := r.linkSession(ctx, be, s)
	if err != nil {
		return fmt.Errorf("thaw: link its box again: %w", err)
	}
	env, err := readTmuxEnv(link.Client)
	if err != nil {
		link.Close()
		return fmt.Errorf("thaw: read claude's environment: %w", err)
	}
	r.tokens.Resume(s.ID)
	if _, err := r.setPolicy(s); err != nil {
		link.Close()
		return err
	}
	lv := &live{link: link, env: env}
	r.setLive(s.ID, lv)
	// A thaw is most often for a person who attaches next: the terminal
	// mirror starts now, beside the rest, not after their attach.
	go func() { _, _ = lv.mirrorOf(context.Background()) }()
	s.Frozen, s.FrozenAt, s.Reason = false, time.Time{}, ""
	r.log.Info("session thawed", logkey.Session, s.ID)
	return r.save(s)
}

// thawIfFrozen thaws a frozen session for an operation that needs its box
// (attach, exec), under the session's lock.
func (r *Runner) thawIfFrozen(ctx context.Context, ref string) error {
	s, err := r.Session(ctx, ref)
	if err != nil || !s.Frozen || s.Desired == session.Removed { // (removed while frozen, before that was cleared)
		return err
	}
	unlock := r.sessionLock(s.ID)
	defer unlock()
	if s, err = r.reload(s.ID); err != nil || !s.Frozen {
		return err
	}
	return r.thaw(ctx, &s)
}

// autoSleep applies sessions.freeze_after and sessions.sleep_after: a
// running session that has waited for a person that long is frozen, then
// fully slept; each with its reason recorded. Off (both 0) by default.
func (r *Runner) autoSleep(ctx context.Context) {
	fa, sa := r.opts.Config.Sessions.FreezeAfter.D(), r.opts.Config.Sessions.SleepAfter.D()
	if fa <= 0 && sa <= 0 {
		return
	}
	every := 5 * time.Second
	for _, d := range []time.Duration{fa, sa} {
		if d > 0 && d/4 < every {
			every = max(d/4, time.Second)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		all, err := r.Sessions(ctx)
		if err != nil {
			continue
		}
		now := time.Now()
		for _, s := range all {
			if s.Observed != session.Running || s.Activity.State != activity.Waiting {
				continue
			}
			waited := now.Sub(s.Activity.Since)
			switch {
			case sa > 0 && waited >= sa:
				reason := fmt.Sprintf("asleep: it waited for a person for %s (sessions.sleep_after); paddock wake resumes it", waited.Round(time.Second))
				if _, err := r.sleepWithReason(ctx, s.ID, reason); err != nil {
					r.log.Warn("sessions.sleep_after: sleep", logkey.Session, s.ID, logkey.Error, err)
				}
			case fa > 0 && !s.Frozen && waited >= fa:
				reason := fmt.Sprintf("automatically: it waited for a person for %s (sessions.freeze_after)", waited.Round(time.Second))
				if _, err := r.freezeSession(ctx, s.ID, reason); err != nil {
					r.log.Warn("sessions.freeze_after: freeze", logkey.Session, s.ID, logkey.Error, err)
				}
			}
		}
	}
}
