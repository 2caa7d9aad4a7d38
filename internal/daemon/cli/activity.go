package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/spf13/cobra"
)

// Exit codes of paddock wait besides 0 (the condition holds) and the
// usual ones (4: no such session, or it was removed).
const (
	// exitWaitTimeout: --timeout passed first.
	exitWaitTimeout = 6
	// exitWaitStopped: the session stopped running (asleep, failed)
	// before the condition held, so it cannot hold without a wake.
	exitWaitStopped = 7
)

func waitCmd(g *globals, o IO) *cobra.Command {
	var forState string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME [--for waiting|working|exited] [--timeout D]",
		Short: "Wait until a session's Claude Code waits for you (or works, or exits)",
		Long: `Block until the session's claude is in the given activity: waiting (its turn is over, or it
asks for input; the default), working (a turn is in progress) or exited (claude is gone).
Exit status: 0 the condition holds; 4 no such session, or it was removed; 6 --timeout passed
first; 7 the session stopped running (asleep or failed) before the condition held.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			want := activity.State(forState)
			if want != activity.Waiting && want != activity.Working && want != activity.Exited {
				return usageError{fmt.Errorf("--for %q: give waiting, working or exited", forState)}
			}
			if timeout < 0 {
				return usageError{errors.New("--timeout must be 0 (none) or more")}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var deadline time.Time
			if timeout > 0 {
				deadline = time.Now().Add(timeout)
			}
			for {
				poll := 30 * time.Second
				if !deadline.IsZero() {
					left := time.Until(deadline)
					if left <= 0 {
						fmt.Fprintf(o.Stderr, "paddock: %s is not %s after %v\n", args[0], want, timeout)
						return exitError{exitWaitTimeout}
					}
					poll = min(poll, left)
				}
				res, err := c.WaitActivity(ctx, args[0], want, max(poll, time.Millisecond))
				if err != nil {
					return err
				}
				s := res.Session
				switch {
				case res.Met:
					fmt.Fprintf(o.Stdout, "%s %s\n", s.Name, s.Activity.Short(time.Now()))
					return nil
				case s.Observed == session.Removed:
					fmt.Fprintf(o.Stderr, "paddock: session %s was removed\n", s.Name)
					return exitError{4}
				case s.Observed != session.Running:
					fmt.Fprintf(o.Stderr, "paddock: session %s is %s, not running (paddock wake %s)\n", s.Name, s.Observed, s.Name)
					return exitError{exitWaitStopped}
				}
			}
		},
	}
	cmd.Flags().StringVar(&forState, "for", string(activity.Waiting), "the activity to wait for: waiting, working or exited")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (exit status 6); 0 waits forever")
	return cmd
}

func inspectCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME",
		Short: "Print a session's whole record as JSON: state, activity, restarts, limits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(o.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		},
	}
}

// activityText is the ACTIVITY column of ls: claude's activity while the
// session runs, or how it exited.
func activityText(s session.Session, now time.Time) string {
	if s.Observed != session.Running && s.Activity.State != activity.Exited {
		return "-"
	}
	return s.Activity.Short(now)
}

// reasonText is the REASON column of ls: the session's own reason, else
// why claude exited, else why it was last restarted.
func reasonText(s session.Session) string {
	switch {
	case s.Reason != "":
		return s.Reason
	case s.Activity.State == activity.Exited && s.Activity.Reason != "":
		if s.Restarts.LastReason != "" && s.Restarts.LastReason != s.Activity.Reason {
			return s.Activity.Reason + "; " + s.Restarts.LastReason
		}
		return s.Activity.Reason
	case s.Restarts.LastReason != "":
		return "last restart: " + s.Restarts.LastReason
	}
	return ""
}
