package runner

import (
	"context"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/mirror"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/session"
)

// live is what the Runner holds in memory for a running session.
type live struct {
	link *Link
	env  []string // claude's environment, also used by exec and attach

	mmu    sync.Mutex
	mirror *mirror.Mirror // the terminal mirror, started on the first attach
}

// sessionsState is the Runner's session bookkeeping.
type sessionsState struct {
	mu    sync.Mutex             // guards live and locks
	live  map[string]*live       // by session id
	locks map[string]*sync.Mutex // one operation at a time per session
}

func (r *Runner) sessionLock(id string) func() {
	r.sess.mu.Lock()
	l := r.sess.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		r.sess.locks[id] = l
	}
	r.sess.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (r *Runner) getLive(id string) *live {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	return r.sess.live[id]
}

func (r *Runner) setLive(id string, l *live) {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	// The old channel ends unless the new state keeps using it (set).
	if old := r.sess.live[id]; old != nil && old.link != nil && (l == nil || l.link != old.link) {
		old.link.Close()
	}
	if l != nil && l.link != nil {
		if old := r.sess.live[id]; old == nil || old.link != l.link {
			go r.watchLink(id, l.link)
			go r.watchEvents(id, l.link) // claude's activity (activity.go)
		}
	}
	if l == nil {
		delete(r.sess.live, id)
	} else {
		r.sess.live[id] = l
	}
}

// watchLink waits for a live session's channel to end. An end the Runner
// did not ask for (sleep, rm and shutdown all replace or drop the link
// first, or set stopping) means the box died or was killed from outside:
// the session's token is revoked and the session is marked asleep, or
// failed if its box is gone, with the reason; paddock wake resumes it.
func (r *Runner) watchLink(id string, l *Link) {
	<-l.Client.Done()
	current := func() bool {
		lv := r.getLive(id)
		return !r.stopping.Load() && lv != nil && lv.link == l
	}
	if !current() {
		return
	}
	unlock := r.sessionLock(id)
	defer unlock()
	if !current() {
		return
	}
	s, err := r.reload(id)
	if err != nil {
		r.log.Error("box channel lost: reload session", logkey.Session, id, logkey.Error, err)
		return
	}
	_ = r.detach(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		r.fail(&s, "lost the channel to its box, and its backend: "+err.Error())
		return
	}
	// A box killed from outside may still read as running for a moment
	// after its channel ended (Docker updates its state asynchronously).
	var bx sandbox.Box
	for i := 0; ; i++ {
		bx, err = be.Inspect(ctx, s.BoxID)
		if err != nil || bx.State != sandbox.StateRunning || i == 30 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		r.fail(&s, "its box disappeared (removed from outside paddock); paddock wake makes a new one on the same volume")
		return
	case err != nil:
		r.fail(&s, "lost the channel to its box: inspect: "+err.Error())
		return
	case bx.State == sandbox.StateRunning:
		// Alive but unreachable: a box paddock cannot control must not
		// keep running; stop it so wake starts it clean.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.fail(&s, "lost the channel to its box, and could not stop it: "+err.Error())
			return
		}
		s.Reason = "lost the channel to its box; paddock stopped it; paddock wake resumes it"
	default:
		s.Reason = "its box stopped from outside paddock (killed, or it exited); paddock wake resumes it"
		// What the backend holds for a running box goes now, not at the
		// next wake: the host workspace's view and its placeholders in
		// the owner's directory, cgroups. Stop of a stopped box does that.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("box stopped from outside: release what it held", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	s.Observed = session.Asleep
	s.Frozen, s.FrozenAt = false, time.Time{} // a frozen box killed from outside is no longer frozen
	_ = r.save(&s)
	r.log.Warn("session box lost", logkey.Session, s.ID, logkey.Reason, s.Reason)
}

// lockSession is how every operation on one session begins: wait for the
// start-up re-adoption, resolve ref, take the session's lock, read the
// record again under it, and check op against the state (the one guard).
// The caller runs unlock when done.
func (r *Runner) lockSession(ctx context.Context, ref string, op session.Op) (session.Session, func(), error) {
	if err := r.waitAdopted(ctx); err != nil {
		return session.Session{}, nil, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return s, nil, err
	}
	unlock := r.sessionLock(s.ID)
	if s, err = r.reload(s.ID); err != nil {
		unlock()
		return s, nil, err
	}
	if err := session.Check(op, s.Name, s.Observed); err != nil {
		unlock()
		return s, nil, err
	}
	return s, unlock, nil
}

// detach cuts a session's live side in the Runner: its token is revoked
// (refused from now on), its egress policy dropped, its channel closed.
func (r *Runner) detach(id string) error {
	if err := r.tokens.Revoke(id); err != nil {
		return err
	}
	r.tokens.Resume(id) // a frozen session's suspension ends with its token
	r.dropPolicy(id)
	r.setLive(id, nil)
	return nil
}

// lockAndDetach locks the session for op, cuts its live side (detach) and
// opens its backend: the common start of sleeping and removing. On error
// nothing stays locked.
func (r *Runner) lockAndDetach(ctx context.Context, ref string, op session.Op) (session.Session, sandbox.Backend, func(), error) {
	s, locked, err := r.lockSession(ctx, ref, op)
	if err != nil {
		return s, nil, nil, err
	}
	// From the detach on, the session says what is ending it (Ending),
	// until the operation is over.
	r.ending.Store(s.ID, op)
	unlock := func() {
		r.ending.Delete(s.ID)
		locked()
	}
	if err := r.detach(s.ID); err != nil {
		unlock()
		return s, nil, nil, err
	}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		unlock()
		return s, nil, nil, err
	}
	return s, be, unlock, nil
}
