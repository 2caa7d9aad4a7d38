package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/activity"
	"github.com/paddockhq/paddock/internal/channel"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/session"
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
// prompt. launch calls it, under the session's lock; s is saved by the
// caller. The box's supervisor notes its OOM kills now (a new link's
// does when it starts).
func (r *Runner) claudeStarted(s *session.Session) {
	now := time.Now().UTC()
	sl := r.pin(s.ID)
	defer r.unpin(sl)
	sl.mu.Lock()
	e := sl.activityOf(s)
	e.a = activity.Activity{State: activity.Starting, Since: now}
	e.conv, e.endReason = s.ClaudeSessionID, ""
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
	if a.State == activity.Waiting || a.State == activity.Exited {
		r.notify(s, a)
	}
	r.persistActivity(s.ID)
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
	prev := e.a
	next, changed, effect := activity.Apply(e.a, rep, e.conv, now)
	if changed {
		e.a = next
	}
	sl.mu.Unlock()
	if changed {
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

// paneTimeout bounds the look at claude's pane; paneCheckEvery is how
// often the Runner looks without a report (one tmux command in the box).
const (
	paneTimeout    = 10 * time.Second
	paneCheckEvery = 5 * time.Second
)

// checkPane asks tmux in the box whether claude's pane is dead and, if it
// is, records claude's exit and applies the restart policy. It runs under
// the session's lock, so it never sees the tmux of a launch in progress.
//
// The supervisor runs it, one at a time.
func (r *Runner) checkPane(sl *slot, l *Link) {
	id := sl.id
	unlock := r.sessionLock(id)
	defer unlock()
	lv := r.getLive(id)
	if lv == nil || lv.link != l || r.stopping.Load() {
		return
	}
	s, err := r.reload(id)
	if err != nil || s.Observed != session.Running || s.Frozen { // a frozen box answers nothing
		return
	}
	sl.mu.Lock()
	e := sl.activityOf(&s)
	already := e.a.State == activity.Exited
	endReason, oomBase := e.endReason, e.oomBase
	sl.mu.Unlock()
	if already {
		return
	}
	// tmux's view of the pane, then what claude's wrapper recorded
	// (exitWrap): tmux 3.3 can lose how a pane died, the wrapper cannot.
	out, code, err := runInLimits(l.Client, paneTimeout, 4096, lv.env, nil, "sh", "-c",
		`tmux -L `+TmuxSocket+` display-message -p -t `+TmuxSession+` '#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}' 2>&1; c=$?; echo `+exitMark+`; head -c 16 `+claudeExitFile+` 2>/dev/null; exit $c`)
	if err != nil {
		return // the channel is in trouble: the supervisor sees to that
	}
	tmuxOut, recorded, _ := strings.Cut(out, exitMark+"\n")
	ex, dead := parsePane(tmuxOut, code)
	ex, dead = withRecordedExit(ex, dead, recorded)
	if !dead {
		r.log.Debug("claude's pane checked: alive", logkey.Session, id, "tmux", logkey.Clip(strings.TrimSpace(out), 200))
		return
	}
	ex.EndReason = endReason
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if be, err := r.backend(ctx, s.Backend); err == nil {
		if mw, ok := be.(sandbox.MemoryWatcher); ok {
			if n, limit, err := mw.OOMKills(ctx, s.BoxID); err == nil {
				ex.OOM, ex.MemoryLimit = n > oomBase, limit
			}
		}
	}
	a := activity.Ended(ex, time.Now().UTC())
	r.setActivity(&s, a)
	r.log.Warn("claude exited", logkey.Session, s.ID, "exit_status", a.ExitStatus, "signal", a.Signal, logkey.Reason, a.Reason)
	r.applyRestartPolicy(&s, l)
}

// parsePane reads `#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}`
// (tmux 3.3 gives the signal by number; a name, with or without SIG, is
// read too). The pane counts as dead when tmux says so, and also when
// tmux already has claude's exit status but has not yet marked the pane
// dead (it waits for the terminal to drain, which a process claude left
// behind may delay). A tmux that has no server or no claude session any
// more counts as dead, with nothing known of how.
func parsePane(out string, code int) (activity.Exit, bool) {
	if code != 0 {
		if strings.Contains(out, "no server running") || strings.Contains(out, "can't find session") ||
			strings.Contains(out, "error connecting") || strings.Contains(out, "server exited") {
			return activity.Exit{Status: -1, Gone: true}, true
		}
		return activity.Exit{}, false
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	if len(f) < 3 || f[0] != "1" && f[1] == "" && f[2] == "" {
		return activity.Exit{}, false
	}
	ex := activity.Exit{Status: -1}
	if n, err := strconv.Atoi(f[1]); err == nil {
		ex.Status = n
	}
	if sig := f[2]; sig != "" {
		if n, err := strconv.Atoi(sig); err == nil {
			ex.Signal = n
		} else {
			ex.Signal = signalNumber(sig)
		}
	}
	return ex, true
}

// claudeExitFile is where exitWrap leaves claude's exit status ($?) in the
// box; launch removes it before each start. The box may write it too:
// that changes nothing but what its own session says of claude's end.
const claudeExitFile = "/run/paddock/claude-exit"

// exitMark separates tmux's answer from the recorded status in checkPane.
const exitMark = "--paddock-claude-exit--"

// exitWrapScript runs claude (its argv after the script) as a child, not
// by exec, so that its exit status, a signal's included (128+n), is
// written down before the pane dies, and the guest told at once.
const exitWrapScript = `rm -f ` + claudeExitFile + `; "$@"; s=$?; echo "$s" > ` + claudeExitFile + `; paddock guest hook pane-died </dev/null >/dev/null 2>&1; exit "$s"`

// exitWrap wraps claude's command line in the pane with exitWrapScript.
func exitWrap(argv []string) []string {
	return append([]string{"sh", "-c", exitWrapScript, "sh"}, argv...)
}

// withRecordedExit completes tmux's view of the pane with the status
// exitWrap recorded, if any: a recorded status means claude has ended
// (even while tmux still shows the wrapper alive for a moment), and it is
// the status of claude itself, where tmux's is the wrapper's (which
// exits with claude's status, so a signal shows there as 128+n).
func withRecordedExit(ex activity.Exit, dead bool, recorded string) (activity.Exit, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(recorded))
	if err != nil || n < 0 || n > 255 {
		if dead && ex.Signal == 0 && ex.Status > 128 && ex.Status < 128+65 {
			ex.Signal, ex.Status = ex.Status-128, -1 // the wrapper passed a signal on
		}
		return ex, dead
	}
	ex.Gone = false
	if n > 128 && n < 128+65 {
		ex.Status, ex.Signal = -1, n-128
	} else {
		ex.Status, ex.Signal = n, 0
	}
	return ex, true
}

// signalNumber is the number of a signal named "KILL" or "SIGKILL"; 0 if unknown.
func signalNumber(name string) int {
	name = "SIG" + strings.TrimPrefix(strings.ToUpper(name), "SIG")
	for n := 1; n < 65; n++ {
		if activity.SignalName(n) == name {
			return n
		}
	}
	return 0
}

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
