package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func shareCmd(g *globals, o IO) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "share NAME USER",
		Short: "Let another user of this host see a session: observer (watch), driver (type) or operator (also sleep, wake, set, exec, rm)",
		Long: `Give USER a role on your session NAME (or change it). USER must be a member of the Runner's
group (api.group). Roles include the ones before them:

  observer   watches the terminal and the session's decisions; keys go nowhere
  driver     also types into Claude Code's terminal
  operator   also sleeps, wakes, sets, execs in and removes the session

Only the session's owner and admins share. Every share is in the audit log (paddock audit).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := session.ParseShareRole(role); err != nil {
				return usageError{fmt.Errorf("--role: %w", err)}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Share(cmd.Context(), args[0], args[1], role)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "%s is now %s of %s (shared with: %s)\n", args[1], withArticle(role), s.Name, sharesText(s))
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "observer", "observer, driver or operator")
	return cmd
}

func unshareCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "unshare NAME USER",
		Short: "Take a user's role on a session away; their open terminals and execs end at once",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Unshare(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "%s no longer has access to %s (shared with: %s)\n", args[1], s.Name, sharesText(s))
			return nil
		},
	}
}

func withArticle(role string) string {
	if role != "" && strings.IndexByte("aeiou", role[0]) >= 0 {
		return "an " + role
	}
	return "a " + role
}

// sharesText lists a session's shares: "ben (driver), cy (observer)".
func sharesText(s session.Session) string {
	if len(s.Shares) == 0 {
		return "nobody"
	}
	parts := make([]string, len(s.Shares))
	for i, sh := range s.Shares {
		parts[i] = fmt.Sprintf("%s (%s)", sh.Name, sh.Role)
	}
	return strings.Join(parts, ", ")
}

func auditCmd(g *globals, o IO) *cobra.Command {
	var q api.AuditQuery
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show who did what: creates, attaches, execs, shares, sets, sleeps, wakes, removals, credential changes",
		Long: `Print the Runner's audit log, oldest first. Admins see all of it; anyone else the entries about
their own actions and their own sessions. Credentials are never in it, only who changed theirs.

  paddock audit                      everything you may see
  paddock audit --session web -f     one session's, then new entries as they happen
  paddock audit --user ben --json    one person's actions, as JSON lines`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(o.Stdout)
			n := 0
			err = c.Audit(cmd.Context(), q, func(e audit.Entry) error {
				n++
				if asJSON {
					return enc.Encode(e)
				}
				_, err := fmt.Fprintln(o.Stdout, auditLine(e))
				return err
			})
			if q.Follow && errors.Is(err, cmd.Context().Err()) {
				return nil
			}
			if err == nil && n == 0 && !q.Follow {
				fmt.Fprintln(o.Stderr, "paddock: no audit entries match (you see your own actions and sessions; admins see all)")
			}
			return err
		},
	}
	cmd.Flags().StringVar(&q.Session, "session", "", "only this session (name or id)")
	cmd.Flags().StringVar(&q.User, "user", "", "only what this user did")
	cmd.Flags().IntVarP(&q.N, "tail", "n", 0, "only the last N entries (0: all)")
	cmd.Flags().BoolVarP(&q.Follow, "follow", "f", false, "keep printing new entries")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines")
	return cmd
}

// auditLine is one entry for people: time, who, what, on what, how.
func auditLine(e audit.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-10s %-14s", e.Time.Local().Format(time.DateTime), e.User, e.Action)
	if e.SessionName != "" || e.Session != "" {
		name := e.SessionName
		if name == "" {
			name = e.Session
		}
		fmt.Fprintf(&b, " %s", name)
		if e.Owner != "" && e.Owner != e.User {
			fmt.Fprintf(&b, " (%s's)", e.Owner)
		}
	}
	if e.Role != "" {
		fmt.Fprintf(&b, " as %s", e.Role)
	}
	if e.Target != "" && e.Action != audit.ActionCredentialSet && e.Action != audit.ActionCredentialRemove {
		fmt.Fprintf(&b, " user=%s", e.Target)
	}
	if len(e.Argv) > 0 {
		fmt.Fprintf(&b, " -- %s", strings.Join(e.Argv, " "))
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " %s", e.Detail)
	}
	if e.Admin {
		b.WriteString(" [admin]")
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " REFUSED: %s", e.Error)
	}
	return b.String()
}
