package runner

import (
	"context"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// waitAdopted blocks until the start-up reconciliation is done.
func (r *Runner) waitAdopted(ctx context.Context) error {
	select {
	case <-r.adopted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reconcile runs at start: it compares every live session with what its
// backend reports. Running boxes are re-adopted: the channel is opened
// again and, since token hashes survive in the store, claude keeps running
// with its token; if the token is gone, a new one is issued and claude is
// restarted with --resume. Boxes that stopped are marked asleep, missing
// ones failed, each with the reason.
func (r *Runner) reconcile(ctx context.Context) {
	all, err := r.Sessions(ctx)
	if err != nil {
		r.log.Error("reconcile: list sessions", logkey.Error, err)
		return
	}
	for _, s := range all {
		if !s.Live() || s.Observed == session.Created && s.BoxID == "" {
			continue
		}
		s := s
		func() {
			unlock := r.sessionLock(s.ID)
			defer unlock()
			r.reconcileOne(ctx, &s)
		}()
	}
}

// adoptWait bounds the re-adoption of one session at the Runner's start.
const adoptWait = 2 * time.Minute

func (r *Runner) reconcileOne(ctx context.Context, s *session.Session) {
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		r.fail(s, "backend unavailable after restart: "+err.Error())
		return
	}
	// Every session waits for the reconcile loop: one box must not hold it
	// (each step below has its own bound too: Connect, runIn). The backend
	// above is the Runner's, not the box's: it may install Claude Code.
	ctx, cancel := context.WithTimeout(ctx, adoptWait)
	defer cancel()
	bx, err := be.Inspect(ctx, s.BoxID)
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		_ = r.tokens.Revoke(s.ID)
		r.fail(s, "its box disappeared while the Runner was down; paddock wake makes a new one on the same volume")
		return
	case err != nil:
		r.fail(s, "inspect box after restart: "+err.Error())
		return
	}
	if bx.State != sandbox.StateRunning {
		_ = r.tokens.Revoke(s.ID)
		// As in boxEnded: release what the stopped box still holds (its
		// workspace view and placeholders), as a stop would have.
		if bx.State == sandbox.StateStopped && s.Workspace != "" {
			if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
				r.log.Warn("stopped box: release what it held", logkey.Session, s.ID, logkey.Error, err)
			}
		}
		if s.Observed == session.Running {
			s.Observed, s.Reason = session.Asleep, "its box stopped while the Runner was down; paddock wake resumes it"
			s.Frozen, s.FrozenAt = false, time.Time{}
			_ = r.save(s)
		}
		return
	}
	if s.Desired == session.Asleep {
		// An asleep session's box runs only while paddock reads its volume
		// (session export); a restart cut that short. It stays asleep.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("stop the running box of an asleep session", logkey.Session, s.ID, logkey.Error, err)
		}
		r.log.Info("the box of an asleep session was running (an export cut short); stopped it", logkey.Session, s.ID)
		return
	}
	if s.Frozen {
		// Still frozen: its token stays suspended, its channel closed,
		// until a wake or an attach thaws it.
		r.tokens.Suspend(s.ID)
		r.log.Info("session still frozen", logkey.Session, s.ID)
		return
	}
	// Running: re-adopt.
	if _, err := r.setPolicy(s); err != nil {
		r.fail(s, "egress policy: "+err.Error())
		return
	}
	r.trackLimits(s)
	link, err := r.linkSession(ctx, be, s)
	if err != nil {
		r.fail(s, "re-adopt: "+err.Error())
		return
	}
	env, err := readTmuxEnv(link.Client)
	if err != nil || !r.tokens.Live(s.ID) && s.CredentialMode == session.ModeProxy {
		// Without the old environment or token: new token, claude --resume.
		if env, err = r.launch(ctx, s, link); err != nil {
			link.Close()
			r.fail(s, "restart claude after re-adoption: "+err.Error())
			return
		}
	}
	r.setLive(s.ID, &live{link: link, env: env})
	s.Observed, s.Reason = session.Running, ""
	_ = r.save(s)
	r.log.Info("session re-adopted", logkey.Session, s.ID)
}
