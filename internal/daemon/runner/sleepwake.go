package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// thawToEnd thaws a frozen session's box that is about to be stopped or
// removed: a frozen box ends like any other, its guest seeing SIGTERM. The
// thaw is on record at once, so that if the stop or removal then fails the
// session reads as what it is, running (its token already revoked), as
// any session whose sleep failed: not frozen, which a wake would "thaw"
// without a token.
func (r *Runner) thawToEnd(ctx context.Context, be sandbox.Backend, s *session.Session) error {
	fz, ok := be.(sandbox.Freezer)
	if !ok || !s.Frozen || s.BoxID == "" {
		return nil
	}
	if err := fz.Thaw(ctx, s.BoxID); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) && !errdefs.Is(err, errdefs.ErrConflict) {
		return err
	}
	s.Frozen, s.FrozenAt = false, time.Time{}
	return r.save(s)
}

// Sleep revokes the session's token and stops its box; the volume keeps
// the conversation.
func (r *Runner) Sleep(ctx context.Context, ref string) (session.Session, error) {
	return r.sleepWithReason(ctx, ref, "")
}

// sleepWithReason is Sleep, recording why (the automatic policy's).
func (r *Runner) sleepWithReason(ctx context.Context, ref, reason string) (session.Session, error) {
	if s, err := r.Session(ctx, ref); err == nil && s.Clone != nil {
		r.refreshClone(s.ID) // its branch as the box leaves it, for ls and rm
	}
	s, be, unlock, err := r.lockAndDetach(ctx, ref, session.OpSleep)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.thawToEnd(ctx, be, &s); err != nil {
		return s, err
	}
	if s.BoxID != "" {
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			return s, err
		}
	}
	s.Desired, s.Observed, s.Reason = session.Asleep, session.Asleep, reason
	s.Frozen, s.FrozenAt = false, time.Time{}
	r.decisions.Release(s.ID) // an asleep session holds no descriptor either
	r.log.Info("session asleep", logkey.Session, s.ID, logkey.Reason, cmp.Or(reason, "asked"))
	return s, r.save(&s)
}

func (r *Runner) reload(id string) (session.Session, error) {
	b, err := r.store.Get(store.BucketSessions, id)
	if err != nil {
		return session.Session{}, err
	}
	var s session.Session
	if err := json.Unmarshal(b, &s); err != nil {
		return s, err
	}
	r.fillOwner(&s)
	return s, nil
}

// Wake starts an asleep (or failed, or never started) session: a new
// token, and claude --resume.
func (r *Runner) Wake(ctx context.Context, ref string) (session.Session, error) {
	if cur, err := r.Session(ctx, ref); err == nil && cur.Frozen && cur.Desired != session.Removed {
		// The freeze tier: the same processes, where they were.
		if err := r.thawIfFrozen(ctx, cur.ID); err != nil {
			return cur, err
		}
		if s, err := r.Session(ctx, cur.ID); err != nil || s.Observed == session.Running {
			return s, err
		}
		// Slept or removed before the thaw had the lock: woken (or
		// refused) below as it is now.
		ref = cur.ID
	}
	if s, ok, err := r.wakeExited(ctx, ref); ok { // claude exited in a running box (activity.go)
		return s, err
	}
	s, unlock, err := r.lockSession(ctx, ref, session.OpWake)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.checkMaxSessions(ctx, s.Owner, s.ID); err != nil {
		return s, err
	}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return s, err
	}
	// A failed session may have lost its box: make a new one on the same volume.
	if _, err := be.Inspect(ctx, s.BoxID); errdefs.Is(err, errdefs.ErrNotFound) || s.BoxID == "" {
		co := sandbox.CreateOptions{Session: s.ID, Workspace: s.Workspace, WorkspaceUID: s.WorkspaceUID, UnsafeHostCode: s.UnsafeHostCode,
			Clone: s.Clone != nil, Limits: r.limits(), Runtime: s.Runtime}
		if s.ClaudeVersion != "" {
			if co, err = r.withClaudeVersion(ctx, co, be.Name(), s.ClaudeVersion); err != nil {
				r.fail(&s, err.Error())
				return s, err
			}
		}
		if s.Project != nil && s.Project.Image != "" {
			co.Image = s.Project.Image // by id: the image it was made from
		}
		bx, err := be.Create(ctx, co)
		if err != nil {
			if s.Project != nil && s.Project.Image != "" && errdefs.Is(err, errdefs.ErrNotFound) {
				err = fmt.Errorf("the box of %s is gone, and so is the project image %s it was made from: remove the session and start another (its image is made again): %w", s.Name, s.Project.Image, err)
			}
			r.fail(&s, "re-create box: "+err.Error())
			return s, err
		}
		s.BoxID = bx.ID
	}
	return s, r.start(ctx, &s, be, time.Now(), 0)
}
