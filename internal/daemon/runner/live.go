package runner

import (
	"context"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/box/mirror"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// The Runner's memory of its sessions is one slot per session, in one map
// (sessionsState). A slot is made when something needs it (an operation
// on the session, a policy, a running box) and dropped as soon as nothing
// does (no operation holds or waits for it, no box is linked, no egress
// policy is installed): an asleep or removed session costs the Runner no
// memory, and a Runner that lives for months keeps nothing of the sessions
// it had. Everything a running session has hangs off its slot: its link
// and claude's environment (live), the terminal mirror, claude's activity,
// its egress policy and the timer of its approvals' ends, the operation in
// progress; and one supervising goroutine per linked box (supervise.go)
// decides, once, how that box ended.
//
// Lock order, outermost first; a goroutine holding one may take those
// below it, never those above:
//
//  1. slot.op: one operation on one session at a time (create, start,
//     sleep, wake, rm, set, freeze, thaw, a restart of claude, the
//     supervisor's decision that the box died, a save of its activity).
//     Taken only through lockSlot/sessionLock.
//  2. sessionsState.mu: the map of slots and each slot's reference count.
//  3. slot.mu: the slot's fields below it.
//  4. live.mmu: the terminal mirror.
//  5. activityState.mu: the broadcast of activity changes.
//
// Nothing blocking (a backend call, a command in the box) runs under 2–5.

// sessionsState is the Runner's session bookkeeping.
type sessionsState struct {
	mu sync.Mutex
	m  map[string]*slot // by session id
}

// slot is everything the Runner holds in memory for one session.
type slot struct {
	id string
	op sync.Mutex // lock order 1

	// refs counts the goroutines that hold op or wait for it; under
	// sessionsState.mu.
	refs int

	mu sync.Mutex // lock order 3; guards what follows
	// owner is the session's owner, as last saved or read (the proxy
	// asks for it on every request); known says it is set.
	owner      session.Person
	ownerKnown bool
	// noOwnCred: the session has no credential of its own (credentialOf).
	noOwnCred bool
	// ending is the operation ending its box now (Session.Ending).
	ending session.Op
	// act is claude's activity (activity.go); nil until claude starts or
	// a box is linked in this Runner.
	act *actEntry
	// live is the running box's side, nil when none is linked.
	live *live
	// policy is its egress policy (none: offline), expiry the timer of
	// its next timed approval's end (armExpiryLocked).
	policy *egress.Policy
	expiry *time.Timer
	// persisting: a save of the activity is on its way (persistActivity).
	persisting bool
}

// live is what the Runner holds for a running, linked session.
type live struct {
	link *Link
	env  []string // claude's environment, also used by exec and attach

	mmu    sync.Mutex
	mirror *mirror.Mirror // the terminal mirror, started on the first attach

	smu sync.Mutex // one message (SendMessage) at a time, whole
}

// idle says nothing keeps the slot. Call with sessionsState.mu held.
func (sl *slot) idle() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.refs == 0 && sl.live == nil && sl.policy == nil && sl.expiry == nil && !sl.persisting
}

// slot returns the session's slot if it has one, without making one.
func (r *Runner) slot(id string) *slot {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	return r.sess.m[id]
}

// pin returns the session's slot, made if needed, with a reference the
// caller gives back with unpin.
func (r *Runner) pin(id string) *slot {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	sl := r.sess.m[id]
	if sl == nil {
		sl = &slot{id: id}
		if r.sess.m == nil {
			r.sess.m = map[string]*slot{}
		}
		r.sess.m[id] = sl
	}
	sl.refs++
	return sl
}

// unpin gives back pin's reference and drops the slot if nothing keeps it.
func (r *Runner) unpin(sl *slot) {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	sl.refs--
	r.dropIdleLocked(sl)
}

// dropIdleLocked drops sl from the map if nothing keeps it. Under
// sessionsState.mu.
func (r *Runner) dropIdleLocked(sl *slot) {
	if sl.idle() && r.sess.m[sl.id] == sl {
		delete(r.sess.m, sl.id)
	}
}

// dropIfIdle drops sl if nothing keeps it (after its policy or a save
// went away outside an operation).
func (r *Runner) dropIfIdle(sl *slot) {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	r.dropIdleLocked(sl)
}

// lockSlot takes the session's operation lock; the caller runs unlock.
func (r *Runner) lockSlot(id string) (*slot, func()) {
	sl := r.pin(id)
	sl.op.Lock()
	return sl, func() {
		sl.op.Unlock()
		r.unpin(sl)
	}
}

// sessionLock takes the session's operation lock; the caller runs the
// function it returns.
func (r *Runner) sessionLock(id string) func() {
	_, unlock := r.lockSlot(id)
	return unlock
}

// slotCount is how many sessions the Runner holds in memory (tests).
func (r *Runner) slotCount() int {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	return len(r.sess.m)
}

func (r *Runner) getLive(id string) *live {
	sl := r.slot(id)
	if sl == nil {
		return nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.live
}

// setLive installs the session's running side (nil: none), under the
// session's lock. A new link gets its supervisor (supervise.go); the old
// link ends unless the new state keeps using it (set, a restart of claude).
func (r *Runner) setLive(id string, l *live) {
	sl := r.slot(id)
	if sl == nil { // under the session's lock, so never: but no slot, no live
		return
	}
	sl.mu.Lock()
	old := sl.live
	sl.live = l
	sl.mu.Unlock()
	if old != nil && old.link != nil && (l == nil || l.link != old.link) {
		old.link.Close()
		r.closePorts(id)
	}
	if l != nil && l.link != nil && (old == nil || old.link != l.link) {
		r.startSupervisor(sl, l.link)
		r.openPorts(id)
	}
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
// Under the session's lock.
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
	sl := r.slot(s.ID)
	setEnding := func(op session.Op) {
		sl.mu.Lock()
		sl.ending = op
		sl.mu.Unlock()
	}
	setEnding(op)
	unlock := func() {
		setEnding("")
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

// activityOf is the session's activity entry, made from s if it has none.
// Under sl.mu.
func (sl *slot) activityOf(s *session.Session) *actEntry {
	if sl.act == nil {
		sl.act = &actEntry{a: s.Activity, conv: s.ClaudeSessionID}
	}
	return sl.act
}

// current is the session's activity in memory, if the Runner has one.
func (r *Runner) current(id string) (activity.Activity, bool) {
	sl := r.slot(id)
	if sl == nil {
		return activity.Activity{}, false
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.act == nil {
		return activity.Activity{}, false
	}
	return sl.act.a, true
}
