// Package activity is the pure model of what Claude Code in a session is
// doing, beside the session's lifecycle state: starting, working (a turn
// is in progress), waiting (its turn is over, or it asks a person for
// input) or exited (claude is gone, with its exit status and the reason
// where known). No I/O here: the Runner feeds it reports and decides.
//
// Reports come from Claude Code's own hooks in the box (installed as
// managed settings, see claudecode.ManagedSettings), through the guest and
// the channel, and from tmux when claude's pane dies. They are box input:
// ParseReport bounds and checks every byte of them, and a report can only
// move its own session's activity (the channel says which session).
package activity

import (
	"fmt"
	"strconv"
	"time"
)

// State is what claude is doing.
type State string

// States. The zero State ("") means unknown: the session never ran, or
// the Runner has not seen it since it started.
const (
	// Starting: claude was (re)started and has not reached its prompt yet.
	Starting State = "starting"
	// Working: a turn is in progress.
	Working State = "working"
	// Waiting: claude finished its turn, or asks a person for input.
	Waiting State = "waiting"
	// Exited: claude is gone; ExitStatus, Signal and Reason say how.
	Exited State = "exited"
)

// ValidState reports whether s names a state one can wait for.
func ValidState(s State) bool {
	switch s {
	case Starting, Working, Waiting, Exited:
		return true
	}
	return false
}

// Activity is a session's activity and the time it last changed.
type Activity struct {
	State State     `json:"state,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// ExitStatus is claude's exit status when Exited (128+n when signal n
	// ended it, as a shell reports it); -1 when nobody could tell.
	ExitStatus int `json:"exit_status,omitempty"`
	// Signal names the signal that ended claude ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// Reason says why claude exited, in words ("killed: out of memory
	// (limit 1024 MiB)", "/exit"), where known.
	Reason string `json:"reason,omitempty"`
}

// Short is the activity for a table: "working 2m", "waiting 5s",
// "exited 1", "exited SIGKILL", "starting", or "-" when unknown.
func (a Activity) Short(now time.Time) string {
	switch a.State {
	case "":
		return "-"
	case Exited:
		if a.Signal != "" {
			return "exited " + a.Signal
		}
		if a.ExitStatus < 0 {
			return "exited ?"
		}
		return "exited " + strconv.Itoa(a.ExitStatus)
	case Working, Waiting:
		if a.Since.IsZero() {
			return string(a.State)
		}
		return string(a.State) + " " + shortDuration(now.Sub(a.Since))
	}
	return string(a.State)
}

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(0, int(d.Seconds()))) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// Effect is what a report asks of the Runner besides a new activity.
type Effect int

// Effects of Apply.
const (
	// None: nothing more.
	None Effect = iota
	// CheckPane: claude's pane may have died; the Runner looks at tmux
	// itself (a report alone never marks claude exited: the box could
	// send one while claude runs).
	CheckPane
)

// Apply returns the activity after report r, whether it changed, and
// what the Runner should do next. conversation is the id of the
// session's Claude Code conversation: hook reports of another one (a
// `claude -p` the agent runs inside the box fires the same managed
// hooks) change nothing. Reports cannot mark claude exited (see
// CheckPane), and once it has exited only a SessionStart (claude back at
// its prompt) moves the activity on.
func Apply(cur Activity, r Report, conversation string, now time.Time) (Activity, bool, Effect) {
	switch r.Event {
	case EventPaneDied, EventReaped:
		return cur, false, CheckPane
	}
	if r.SessionID != conversation {
		return cur, false, None
	}
	var next State
	switch r.Event {
	case EventUserPromptSubmit, EventPreToolUse:
		next = Working
	case EventStop:
		next = Waiting
	case EventNotification:
		if r.Notification == "auth_success" { // informational, not a question to a person
			return cur, false, None
		}
		next = Waiting
	case EventSessionStart:
		if r.Source == "compact" { // after a compaction, possibly mid-turn
			return cur, false, None
		}
		next = Waiting
	default: // SessionEnd: the exit itself comes from the pane
		return cur, false, None
	}
	if cur.State == Exited && r.Event != EventSessionStart {
		return cur, false, None // a late report of the claude that is gone
	}
	if next == cur.State {
		return cur, false, None
	}
	return Activity{State: next, Since: now}, true, None
}

// Exit describes how claude ended, as tmux and the backend saw it.
type Exit struct {
	// Status is the exit status (-1: unknown); Signal the signal number
	// that ended it (0: none).
	Status, Signal int
	// OOM: the box's memory cgroup killed a process for want of memory
	// since claude started; MemoryLimit is that limit in bytes (0: unknown).
	OOM         bool
	MemoryLimit int64
	// EndReason is Claude Code's own SessionEnd reason, if one was
	// reported ("prompt_input_exit" after /exit).
	EndReason string
	// Gone: tmux itself is gone, so nothing says how claude ended.
	Gone bool
}

// Ended is the activity for an exit of claude.
func Ended(e Exit, now time.Time) Activity {
	a := Activity{State: Exited, Since: now, ExitStatus: e.Status}
	if e.Signal > 0 {
		a.Signal = SignalName(e.Signal)
		a.ExitStatus = 128 + e.Signal
	}
	switch {
	case e.Gone:
		a.ExitStatus = -1
		a.Reason = "claude's terminal (tmux) is gone"
	case e.OOM && (e.Signal == 9 || e.Signal == 0 && e.Status == 137):
		if e.MemoryLimit > 0 {
			a.Reason = fmt.Sprintf("killed: out of memory (limit %d MiB)", e.MemoryLimit>>20)
		} else {
			a.Reason = "killed: out of memory"
		}
	case e.Signal > 0:
		a.Reason = "killed by " + a.Signal
	case e.Status == 0 && e.EndReason == "prompt_input_exit":
		a.Reason = "/exit"
	case e.Status == 0:
		a.Reason = "exited"
	case e.Status < 0:
		// tmux 3.3 can mark a pane dead before it has its process's
		// status, and then never learn it (nor run pane-died).
		a.Reason = "claude ended; tmux did not say how"
	default:
		a.Reason = "exited with status " + strconv.Itoa(e.Status)
	}
	return a
}

// Failed reports whether an exit counts as a failure for on-failure: any
// exit but status 0 without a signal.
func (a Activity) Failed() bool {
	return a.State == Exited && (a.ExitStatus != 0 || a.Signal != "")
}

var signalNames = map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS"}

// SignalName names a Linux signal number ("SIGKILL"), or "signal N".
func SignalName(n int) string {
	if s, ok := signalNames[n]; ok {
		return s
	}
	return "signal " + strconv.Itoa(n)
}

// Conversation is the conversation whose hooks count after report r, when
// cur counted before: a SessionStart from /clear starts a new
// conversation in the same claude, and its hooks carry the new id.
func Conversation(cur string, r Report) string {
	if r.Event == EventSessionStart && r.Source == "clear" && r.SessionID != "" {
		return r.SessionID
	}
	return cur
}
