package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// activityState broadcasts the changes of claude's activity in every
// session (WaitActivity) and bounds the notify commands. Each session's
// activity itself is in its slot (live.go): the truth while this Runner
// runs. save() stamps it into the record it writes and Sessions() lays it
// over what it reads, so no operation that saves a record it read earlier
// can put an old activity back.
//
// Reports change it without the session's lock (a turn must not wait for
// a wake); everything that looks into the box or restarts claude (pane
// checks, restarts) takes the lock, so it never races a launch.
type activityState struct {
	mu sync.Mutex
	// changed is closed and replaced at every change (WaitActivity).
	changed chan struct{}
	notify  notifier
}

// actEntry is one session's activity and what is needed to keep it.
type actEntry struct {
	a activity.Activity
	// conv is the Claude Code conversation whose hooks count.
	conv string
	// endReason is claude's own SessionEnd reason, for its exit's reason.
	endReason string
	// gen changes at every start and every exit of claude: a restart
	// scheduled for one exit does nothing after a later start.
	gen uint64
	// oomBase is the box's OOM kill count when claude started.
	oomBase int64
	// prompts counts the prompts claude took (UserPromptSubmit of its
	// conversation): SendMessage's proof that claude took a message.
	prompts uint64
	// promptPending: claude was started with a first prompt (paddock run
	// --prompt, a create with a prompt) it has not taken yet. Until it
	// does, its activity stays starting: it is not waiting for anyone,
	// and a wait for waiting must see the prompt's turn, not the moment
	// before it.
	promptPending bool
}

// Bounds on the reports of one box as the Runner reads them, after the
// guest's own: a token bucket (reports beyond it are dropped, logged once
// per channel) and the line length.
const (
	linkReportRate  = 20
	linkReportBurst = 40
)

// broadcast wakes every WaitActivity.
func (st *activityState) broadcast() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed != nil {
		close(st.changed)
	}
	st.changed = make(chan struct{})
}

// waitChan is closed at the next change.
func (st *activityState) waitChan() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return st.changed
}

// stampActivity puts the session's current activity into s (save calls it).
func (r *Runner) stampActivity(s *session.Session) {
	if a, ok := r.current(s.ID); ok {
		s.Activity = a
	}
}

// overlayActivity lays the current activities over records read from
// the store.
func (r *Runner) overlayActivity(ss []session.Session) {
	for i := range ss {
		if a, ok := r.current(ss[i].ID); ok {
			ss[i].Activity = a
		}
	}
}

// claudeStarted records that claude was just (re)started in s's box: its
// activity is starting until its SessionStart hook says it waits at its
// prompt, or, started with a first prompt (withPrompt), until it takes
// that prompt. launch calls it, under the session's lock; s is saved by
// the caller. The box's supervisor notes its OOM kills now (a new link's
// does when it starts).
func (r *Runner) claudeStarted(s *session.Session, withPrompt bool) {
	now := time.Now().UTC()
	sl := r.pin(s.ID)
	defer r.unpin(sl)
	sl.mu.Lock()
	e := sl.activityOf(s)
	e.a = activity.Activity{State: activity.Starting, Since: now}
	e.conv, e.endReason = s.ClaudeSessionID, ""
	e.promptPending = withPrompt
	e.gen++
	s.Activity = e.a
	var sup *supervisor
	if sl.live != nil {
		sup = sl.live.link.sup
	}
	sl.mu.Unlock()
	r.act.broadcast()
	if sup != nil {
		select {
		case sup.baseline <- struct{}{}:
		default:
		}
	}
}

// setActivity changes the session's activity, wakes its waiters, runs the
// notify command on a change to waiting or exited, and saves it in the
// background.
func (r *Runner) setActivity(s *session.Session, a activity.Activity) {
	sl := r.pin(s.ID)
	defer r.unpin(sl)
	sl.mu.Lock()
	e := sl.activityOf(s)
	prev := e.a
	e.a = a
	if a.State == activity.Exited {
		e.gen++
	}
	sl.mu.Unlock()
	r.act.broadcast()
	s.Activity = a
	r.activityChanged(*s, prev, a)
}

// activityChanged logs a change, notifies, and persists it.
func (r *Runner) activityChanged(s session.Session, prev, a activity.Activity) {
	if prev.State == a.State {
		return
	}
	r.log.Debug("session activity", logkey.Session, s.ID, "activity", string(a.State), "was", string(prev.State))
	r.events.ActivityChanged(s.ID, s.Name, prev, a)
	if a.State == activity.Waiting || a.State == activity.Exited {
		r.notify(s, a)
	}
	r.persistActivity(s.ID)
	if s.Clone != nil && prev.State == activity.Working {
		go r.refreshClone(s.ID) // a turn ended: what its branch holds now, for ls and rm
	}
}

// persistActivity saves the session's record with its current activity,
// once the session's lock is free; one save at a time per session, and
// changes meanwhile ride along with it.
func (r *Runner) persistActivity(id string) {
	sl := r.slot(id)
	if sl == nil {
		return
	}
	sl.mu.Lock()
	if sl.persisting {
		sl.mu.Unlock()
		return
	}
	sl.persisting = true // keeps the slot until the save (idle)
	sl.mu.Unlock()
	go func() {
		_, unlock := r.lockSlot(id) // sl, kept by persisting
		defer unlock()
		sl.mu.Lock()
		sl.persisting = false
		sl.mu.Unlock()
		s, err := r.reload(id)
		if err != nil || !s.Live() {
			return
		}
		_ = r.save(&s) // stamps the activity
	}()
}

// readReports reads the activity reports of the box behind l until its
// channel ends, and hands each to the supervisor on out, which it closes
// at the end. Bounds: the guest's own, then a token bucket here (reports
// beyond it are dropped, logged once per channel) and the line length.
func (r *Runner) readReports(id string, l *Link, out chan<- activity.Report) {
	defer close(out)
	st, br, err := l.Client.Events(time.Now().Add(30 * time.Second))
	if err != nil {
		var re *channel.RemoteError
		if errors.As(err, &re) {
			r.log.Warn("the box's guest sends no activity reports (an older paddock guest; rebuild the image with paddock image build); claude's activity stays unknown",
				logkey.Session, id)
		}
		return
	}
	defer st.Close() // yamux ends the stream's reads when the channel ends
	lim := activity.Limiter{Rate: linkReportRate, Burst: linkReportBurst}
	var warned atomic.Bool
	warn := func(msg string) {
		if warned.CompareAndSwap(false, true) {
			r.log.Warn(msg, logkey.Session, id)
		}
	}
	for {
		line, err := readLine(br, channel.MaxEventLine)
		if errors.Is(err, bufio.ErrBufferFull) {
			warn("the box sent an activity report over the size limit; its reports are no longer read until it reconnects")
			return
		}
		if err != nil {
			return
		}
		if !lim.Allow(time.Now()) {
			warn("the box sends activity reports faster than allowed; the excess is dropped (logged once)")
			continue
		}
		rep, err := activity.ParseReport(line)
		if err != nil {
			warn("the box sent a malformed activity report; it and later ones like it are dropped (logged once)")
			continue
		}
		select {
		case out <- rep:
		case <-l.Client.Done():
			return
		}
	}
}

// readLine reads one line of at most max bytes (newline included) and
// returns it without the newline; a longer line is bufio.ErrBufferFull.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max {
			return nil, bufio.ErrBufferFull
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// applyReport moves the session's activity as a report says; check says
// the report may mean claude ended, which a look at its pane tells.
func (r *Runner) applyReport(sl *slot, rep activity.Report) (check bool) {
	now := time.Now().UTC()
	sl.mu.Lock()
	e := sl.act
	if e == nil {
		sl.mu.Unlock()
		return false
	}
	e.conv = activity.Conversation(e.conv, rep)
	if rep.Event == activity.EventSessionEnd && rep.SessionID == e.conv {
		e.endReason = rep.Reason
	}
	took := rep.Event == activity.EventUserPromptSubmit && rep.SessionID == e.conv
	if took {
		e.prompts++
		e.promptPending = false
	}
	prev := e.a
	next, changed, effect := activity.Apply(e.a, rep, e.conv, now)
	if e.promptPending && next.State == activity.Waiting {
		changed = false // the first prompt comes next: still starting
	}
	if changed {
		e.a = next
	}
	sl.mu.Unlock()
	if changed || took {
		r.act.broadcast()
	}
	if effect == activity.CheckPane {
		r.log.Debug("box reports a possible end of claude", logkey.Session, sl.id, "event", rep.Event)
	}
	if changed {
		if s, err := r.reload(sl.id); err == nil {
			s.Activity = next
			r.activityChanged(s, prev, next)
		}
	}
	return effect == activity.CheckPane
}

// WaitActivity blocks until the session's claude is in state want, the
// session stops running (asleep, failed, removed), or ctx ends; met says
// whether want holds. Exited holds also for a session whose box ended.
func (r *Runner) WaitActivity(ctx context.Context, ref string, want activity.State) (session.Session, bool, error) {
	if !activity.ValidState(want) {
		return session.Session{}, false, fmt.Errorf("activity %q is not starting, working, waiting or exited: %w", want, errdefs.ErrInvalid)
	}
	if err := r.waitAdopted(ctx); err != nil {
		return session.Session{}, false, err
	}
	tick := time.NewTicker(time.Second) // lifecycle changes do not broadcast
	defer tick.Stop()
	for {
		changed := r.act.waitChan()
		s, err := r.Session(ctx, ref)
		if err != nil {
			return s, false, err
		}
		switch {
		case s.Activity.State == want && (want == activity.Exited || s.Observed == session.Running):
			return s, true, nil
		case s.Observed != session.Running:
			return s, false, nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return s, false, nil
		}
	}
}
