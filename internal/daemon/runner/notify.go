package runner

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Bounds on the notify command ([notify] command): at most
// maxNotifications run at once (more are dropped, with a log line), and
// at most notifyOutput bytes of their output reach the Runner's log.
const (
	maxNotifications = 4
	notifyOutput     = 4 << 10
)

// notifier runs the notify command without ever blocking the Runner.
type notifier struct {
	sem chan struct{}
}

// notifyEnv is the whole environment of the notify command: a fixed PATH
// and the session's facts. Never the Runner's own environment, which may
// hold the owner's credential; never a token.
func notifyEnv(s session.Session, a activity.Activity) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"PADDOCK_SESSION=" + s.Name,
		"PADDOCK_SESSION_ID=" + s.ID,
		// Whose session: on a team server, whom to tell.
		"PADDOCK_SESSION_OWNER=" + s.Owner.Name,
		"PADDOCK_ACTIVITY=" + string(a.State),
		"PADDOCK_SINCE=" + a.Since.UTC().Format(time.RFC3339),
	}
	if a.State == activity.Exited {
		env = append(env, "PADDOCK_EXIT_STATUS="+strconv.Itoa(a.ExitStatus), "PADDOCK_SIGNAL="+a.Signal, "PADDOCK_REASON="+a.Reason)
	}
	return env
}

// notify runs the configured command for a session that started waiting
// or whose claude exited, in the background: /bin/sh -c COMMAND with
// notifyEnv, no stdin, ended after notify.timeout; its output and exit
// status go to the Runner's log.
func (r *Runner) notify(s session.Session, a activity.Activity) {
	if r.opts.Config.Notify.Command == "" {
		return
	}
	if s.Owner.Name == "" {
		s.Owner = r.ownerOf(s.ID)
	}
	r.runNotify(s.ID, string(a.State), notifyEnv(s, a))
}

// notifyEgress runs the notify command for a connection of the session
// that waits for a person's approval (ask mode): PADDOCK_ACTIVITY is
// egress_pending and PADDOCK_EGRESS_HOST the name and port it asks for
// (a normalized host name: letters, digits, '.', '-').
func (r *Runner) notifyEgress(s session.Session, hostPort string) {
	if r.opts.Config.Notify.Command == "" {
		return
	}
	if s.Owner.Name == "" {
		s.Owner = r.ownerOf(s.ID)
	}
	env := notifyEnv(s, activity.Activity{State: "egress_pending", Since: time.Now()})
	env = append(env, "PADDOCK_EGRESS_HOST="+hostPort)
	r.runNotify(s.ID, "egress_pending", env)
}

// runNotify runs the notify command with env in the background.
func (r *Runner) runNotify(id, what string, env []string) {
	cmdline := r.opts.Config.Notify.Command
	r.act.mu.Lock()
	if r.act.notify.sem == nil {
		r.act.notify.sem = make(chan struct{}, maxNotifications)
	}
	sem := r.act.notify.sem
	r.act.mu.Unlock()
	select {
	case sem <- struct{}{}:
	default:
		r.log.Warn("notify command skipped: too many still run", logkey.Session, id, "activity", what, "limit", maxNotifications)
		return
	}
	timeout := r.opts.Config.Notify.Timeout.D()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	go func() {
		defer func() { <-sem }()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
		cmd.Env = env
		cmd.Dir = "/"
		out := &capped{max: notifyOutput}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children end with it
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		text := strings.TrimSpace(out.buf.String())
		if out.over {
			text += " …(cut)"
		}
		switch {
		case ctx.Err() != nil:
			r.log.Warn("notify command timed out", logkey.Session, id, "activity", what, "timeout", timeout.String(), "output", text)
		case err != nil:
			r.log.Warn("notify command failed", logkey.Session, id, "activity", what, logkey.Error, err, "output", text)
		default:
			r.log.Info("notify command ran", logkey.Session, id, "activity", what, "output", text)
		}
	}()
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}
