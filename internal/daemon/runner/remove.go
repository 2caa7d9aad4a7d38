package runner

import (
	"context"
	"errors"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// RemoveSession stops and deletes the box and, unless keepVolume (which is
// recorded), the volume.
func (r *Runner) RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error) {
	s, be, unlock, err := r.lockAndDetach(ctx, ref, session.OpRemove)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.thawToEnd(ctx, be, &s); err != nil {
		// The removal ends the box's processes frozen or not.
		r.log.Warn("remove: could not thaw the box first; removing it frozen", logkey.Session, s.ID, logkey.Error, err)
	}
	if s.BoxID != "" {
		if err := be.Remove(ctx, s.BoxID, sandbox.RemoveOptions{KeepVolume: keepVolume}); err != nil {
			return s, err
		}
	}
	if !keepVolume {
		// A box removed earlier (failed session) may have left the volume.
		if err := r.removeSessionObjects(ctx, be, s.ID, false); err != nil {
			return s, err
		}
	}
	r.usage.Forget(s.ID) // its log keeps what it used
	if err := r.sessionCredFile(s.ID).Remove(); err != nil {
		return s, err
	}
	if err := r.dropFirstStart(s.ID); err != nil {
		return s, err
	}
	for _, rl := range r.opts.Config.Relays {
		if err := r.relaySecretFile(s.ID, rl.Name).Remove(); err != nil {
			return s, err
		}
	}
	r.forgetServiceCA(s.ID)
	s.Desired, s.Observed, s.Reason, s.KeepVolume = session.Removed, session.Removed, "", keepVolume
	// No longer frozen: else a wake would try to thaw the box that is gone.
	s.Frozen, s.FrozenAt = false, time.Time{}
	r.decisions.Release(s.ID) // its log stays readable; its descriptor goes
	r.log.Info("session removed", logkey.Session, s.ID, "keep_volume", keepVolume)
	return s, r.save(&s)
}

// removeSessionObjects removes the backend's objects of one session;
// volumes only when withVolumes.
func (r *Runner) removeSessionObjects(ctx context.Context, be sandbox.Backend, id string, keepVolumes bool) error {
	objs, err := be.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if o.Session != id || o.Kind == sandbox.KindVolume && keepVolumes {
			continue
		}
		if err := be.RemoveObject(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Prune removes every labelled object that no live session owns: boxes,
// processes and networks always; volumes unless a removed session kept
// them on purpose (then only with volumes=true).
func (r *Runner) Prune(ctx context.Context, volumes bool) (api.PruneResult, error) {
	if err := r.waitAdopted(ctx); err != nil {
		return api.PruneResult{}, err
	}
	all, err := r.Sessions(ctx)
	if err != nil {
		return api.PruneResult{}, err
	}
	owner := map[string]session.Session{}
	for _, s := range all {
		owner[s.ID] = s
	}
	var res api.PruneResult
	var errs []error
	for _, name := range []string{"local", "docker", "kubernetes"} {
		be, err := r.pruneBackend(ctx, name)
		if err != nil {
			continue // a backend this host cannot run has nothing to prune
		}
		objs, err := be.List(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			s, known := owner[o.Session]
			if known && s.Live() {
				continue
			}
			if o.Kind == sandbox.KindVolume && known && s.KeepVolume && !volumes {
				continue
			}
			if err := be.RemoveObject(ctx, o); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Removed = append(res.Removed, o)
		}
	}
	return res, errors.Join(errs...)
}
