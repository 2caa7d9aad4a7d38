package runner

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

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
	out, code, err := runInLimits(l.Client, paneTimeout, 4096, lv.env, nil, "sh", "-c", paneStateScript, "sh",
		TmuxSocket, TmuxSession, exitMark, claudeExitFile)
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

// exitWrap wraps claude's command line in the pane with exitWrapScript.
func exitWrap(argv []string) []string {
	return append([]string{"sh", "-c", exitWrapScript, "sh", claudeExitFile}, argv...)
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
