package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// supervisor is the one goroutine that watches a linked box, from its
// link until the box ends or the Runner lets it go (as containerd's
// startContainerExitMonitor does for a container). It waits on the
// backend's Wait (on the channel's end where a backend has none), on the
// box's activity reports, on the pane tick and on the restart timer, and
// it alone decides, once, that the box died and why (boxEnded).
//
// Other code talks to it through these channels; each is buffered and
// sent to without blocking: a request the supervisor has not read yet
// is as good as another of the same kind.
type supervisor struct {
	baseline chan struct{}   // claude was (re)started: note the box's OOM kills now
	restart  chan restartReq // the restart policy asks for claude's restart
}

// restartReq is a restart of claude the policy decided (applyRestartPolicy).
type restartReq struct {
	delay  time.Duration
	gen    uint64 // the activity generation it was decided for
	reason string
}

// waitResult is what the backend's Wait said, and when.
type waitResult struct {
	st  sandbox.ExitStatus
	err error
	at  time.Time
}

// linkGrace is how long the supervisor lets a box whose channel ended go
// on running before it asks the backend and, if the box still runs, stops
// it: a box whose guest is unreachable must not keep running. A box that
// died takes the channel with it, and its backend's Wait says so at once.
var linkGrace = 3 * time.Second

// startSupervisor starts the supervisor of a newly linked box.
func (r *Runner) startSupervisor(sl *slot, l *Link) {
	l.sup = &supervisor{baseline: make(chan struct{}, 1), restart: make(chan restartReq, 1)}
	go r.supervise(sl, l)
}

// ours says l is still the session's link and the Runner is not shutting
// down: an end of it is then the box's doing, not the Runner's.
func (r *Runner) ours(sl *slot, l *Link) bool {
	if r.stopping.Load() {
		return false
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.live != nil && sl.live.link == l
}

// supervise is the supervisor's loop. It returns when the box ended (its
// end decided by boxEnded) or when the Runner let the link go (sleep, rm,
// a new link, shutdown); everything it started ends with it.
func (r *Runner) supervise(sl *slot, l *Link) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := r.reload(sl.id)
	if err != nil {
		r.log.Error("supervise box: read session", logkey.Session, sl.id, logkey.Error, err)
		return
	}
	// Reports count from the record's activity on (a re-adopted box's
	// claude has not been started by this Runner).
	sl.mu.Lock()
	sl.activityOf(&s)
	sl.mu.Unlock()
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		// Nothing to ask how the box is: its channel's end is its end.
		<-l.Client.Done()
		r.boxLost(sl, l, "lost the channel to its box, and its backend: "+err.Error())
		return
	}
	var waited chan waitResult
	if w, ok := be.(sandbox.Waiter); ok {
		waited = make(chan waitResult, 1)
		go func() {
			st, err := w.Wait(ctx, l.BoxID)
			waited <- waitResult{st: st, err: err, at: time.Now()}
		}()
	}
	reports := make(chan activity.Report, 16)
	go r.readReports(sl.id, l, reports)

	// A re-adopted box may have lost claude while no Runner watched; and
	// a report can be lost (a box may drop them all), so the pane is
	// looked at now and then too, one look at a time.
	checked := make(chan struct{}, 1)
	var checking, recheck bool
	check := func() {
		if checking {
			recheck = true
			return
		}
		checking = true
		go func() {
			r.checkPane(sl, l)
			checked <- struct{}{}
		}()
	}
	r.noteOOMBase(ctx, sl, be, l.BoxID)
	check()
	tick := time.NewTicker(paneCheckEvery)
	defer tick.Stop()
	restartT := time.NewTimer(0)
	if !restartT.Stop() {
		<-restartT.C
	}
	defer restartT.Stop()
	var pending restartReq
	linkDone := l.Client.Done()
	var grace <-chan time.Time
	for {
		select {
		case res := <-waited:
			if res.err != nil && !errdefs.Is(res.err, errdefs.ErrNotFound) {
				// The backend cannot tell: the channel's end decides.
				r.log.Warn("supervise box: wait", logkey.Session, sl.id, logkey.Error, res.err)
				waited = nil
				if linkDone == nil {
					r.boxEnded(sl, l, be, nil)
					return
				}
				continue
			}
			r.boxEnded(sl, l, be, &res)
			return
		case <-linkDone:
			linkDone = nil
			if !r.ours(sl, l) {
				return // the Runner let it go
			}
			if waited == nil {
				r.boxEnded(sl, l, be, nil)
				return
			}
			grace = time.After(linkGrace)
		case <-grace:
			r.boxEnded(sl, l, be, nil)
			return
		case rep, ok := <-reports:
			if !ok {
				reports = nil
				continue
			}
			if r.applyReport(sl, rep) {
				check()
			}
		case <-tick.C:
			check()
		case <-checked:
			checking = false
			if recheck {
				recheck = false
				check()
			}
		case <-l.sup.baseline:
			r.noteOOMBase(ctx, sl, be, l.BoxID)
		case req := <-l.sup.restart:
			pending = req
			restartT.Reset(req.delay)
		case <-restartT.C:
			p := pending
			go r.restartClaude(sl.id, l, p.gen, p.reason)
		}
	}
}

// noteOOMBase notes the box's OOM kill count now, so a later SIGKILL of
// claude can be told to be the kernel's for want of memory.
func (r *Runner) noteOOMBase(ctx context.Context, sl *slot, be sandbox.Backend, boxID string) {
	mw, ok := be.(sandbox.MemoryWatcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, _, err := mw.OOMKills(ctx, boxID)
	if err != nil {
		return
	}
	sl.mu.Lock()
	if sl.act != nil {
		sl.act.oomBase = n
	}
	sl.mu.Unlock()
}

// boxEnded decides, once, that the box behind l ended without the Runner
// asking, and why: from the backend's Wait result if there is one (res),
// else from what the backend says of the box now. The session's token is
// revoked, its link dropped, what the backend holds for a running box
// released; the session becomes asleep (failed if its box is gone) with
// the reason, claude's activity exited with the box's, in one save.
// Nothing happens if the Runner let the link go meanwhile.
func (r *Runner) boxEnded(sl *slot, l *Link, be sandbox.Backend, res *waitResult) {
	unlock := r.sessionLock(sl.id)
	defer unlock()
	if !r.ours(sl, l) {
		return
	}
	s, err := r.reload(sl.id)
	if err != nil {
		r.log.Error("box ended: read session", logkey.Session, sl.id, logkey.Error, err)
		return
	}
	r.stampActivity(&s)
	_ = r.detach(s.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res == nil {
		st, failed := r.inspectEnded(ctx, be, &s)
		if failed != "" {
			r.endActivity(&s, "its box is gone", sandbox.ExitStatus{Code: -1})
			r.fail(&s, failed)
			return
		}
		res = &waitResult{st: st, at: time.Now()}
	} else {
		s.Reason = "its box stopped from outside paddock (killed, or it exited); paddock wake resumes it"
		// What the backend holds for a running box goes now, not at the
		// next wake: the host workspace's view and its placeholders in
		// the owner's directory, cgroups. Stop of a stopped box does that.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("box stopped from outside: release what it held", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	why := "its box stopped"
	if res.st.OOMKilled {
		why = "its box was killed: out of memory"
		if lim := r.limits().WithDefaults().MemoryBytes; lim > 0 {
			why += fmt.Sprintf(" (limit %d MiB)", lim>>20)
		}
		s.Reason = why + "; paddock wake resumes it"
	}
	r.endActivity(&s, why, res.st)
	s.Observed = session.Asleep
	s.Frozen, s.FrozenAt = false, time.Time{} // a frozen box killed from outside is no longer frozen
	// Logged first: whoever sees the record changed finds the line.
	r.log.Warn("session box ended", logkey.Session, s.ID, logkey.Reason, s.Reason, "exit_status", res.st.Code,
		"oom_killed", res.st.OOMKilled, "decided_ms", time.Since(res.at).Milliseconds())
	_ = r.save(&s)
}

// boxLost is boxEnded for a box the Runner cannot ask about: the session
// fails with why.
func (r *Runner) boxLost(sl *slot, l *Link, why string) {
	unlock := r.sessionLock(sl.id)
	defer unlock()
	if !r.ours(sl, l) {
		return
	}
	s, err := r.reload(sl.id)
	if err != nil {
		return
	}
	r.stampActivity(&s)
	_ = r.detach(s.ID)
	r.endActivity(&s, "its box is out of reach", sandbox.ExitStatus{Code: -1})
	r.fail(&s, why)
}

// endActivity marks claude's activity exited with the box's end, unless
// claude had already exited (its own exit says more).
func (r *Runner) endActivity(s *session.Session, why string, st sandbox.ExitStatus) {
	if s.Activity.State == activity.Exited {
		return
	}
	a := activity.Activity{State: activity.Exited, Since: time.Now().UTC(), ExitStatus: -1, Reason: why}
	if st.Code >= 0 {
		a.ExitStatus = st.Code
	}
	r.setActivity(s, a)
}

// inspectEnded asks the backend about a box whose channel ended with no
// Wait to say how: the exit it can tell, or why the session fails. A box
// still running is stopped (a box paddock cannot control must not keep
// running) and s.Reason set to say so. Backends update a killed box's state
// asynchronously, so a box that reads as running is asked again, briefly,
// before it is stopped.
func (r *Runner) inspectEnded(ctx context.Context, be sandbox.Backend, s *session.Session) (sandbox.ExitStatus, string) {
	var bx sandbox.Box
	var err error
	for i := 0; ; i++ {
		bx, err = be.Inspect(ctx, s.BoxID)
		if err != nil || bx.State != sandbox.StateRunning || i == 10 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	ended := sandbox.ExitStatus{Code: -1}
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		return ended, "its box disappeared (removed from outside paddock); paddock wake makes a new one on the same volume"
	case err != nil:
		return ended, "lost the channel to its box: inspect: " + err.Error()
	case bx.State == sandbox.StateRunning:
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			return ended, "lost the channel to its box, and could not stop it: " + err.Error()
		}
		s.Reason = "lost the channel to its box; paddock stopped it; paddock wake resumes it"
	default:
		s.Reason = "its box stopped from outside paddock (killed, or it exited); paddock wake resumes it"
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("box stopped from outside: release what it held", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	return ended, ""
}
