package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
)

// egressFlags are set's egress flags.
type egressFlags struct {
	posture     string
	allow, deny []string
	ask         bool
}

func (e *egressFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.posture, "egress", "", "change the network posture at once: offline, anthropic or allowlist (claude keeps running; tunnels the new one refuses are cut)")
	f.StringArrayVar(&e.allow, "allow", nil, "replace the allowlist: NAME[:PORT] or *.NAME[:PORT]; repeat (--allow '' empties it)")
	f.StringArrayVar(&e.deny, "deny", nil, "replace the deny rules: NAME[:PORT] or *.NAME[:PORT]; repeat")
	f.BoolVar(&e.ask, "ask", false, "hold connections no rule decides for your approval (--ask=false: refuse them at once)")
}

// setEgressFlags copies the egress flags given into req, reporting whether
// there were any.
func setEgressFlags(cmd *cobra.Command, req *api.SetRequest, e *egressFlags) bool {
	given := false
	if cmd.Flags().Changed("egress") {
		req.Egress, given = &e.posture, true
	}
	nonEmpty := func(xs []string) []string {
		var out []string
		for _, x := range xs {
			if strings.TrimSpace(x) != "" {
				out = append(out, x)
			}
		}
		return out
	}
	if cmd.Flags().Changed("allow") {
		a := nonEmpty(e.allow)
		req.Allow, given = &a, true
	}
	if cmd.Flags().Changed("deny") {
		d := nonEmpty(e.deny)
		req.Deny, given = &d, true
	}
	if cmd.Flags().Changed("ask") {
		req.Ask, given = &e.ask, true
	}
	return given
}

func egressCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Steer a running session's network: connections waiting for approval, approve, deny, named policies",
		Long: `A session in ask mode (paddock run --egress allowlist --ask, or paddock set NAME --ask)
holds each connection that no rule decides until someone approves or denies it, for up to
egress.ask_timeout (60s by default); unanswered, it is refused. The notify command hears of
each (PADDOCK_ACTIVITY=egress_pending). Forbidden address classes (loopback, private,
link-local, metadata) stay forbidden whatever is approved.

approve --always puts the rule on the session owner's standing list, which every ask-mode
session of theirs uses; only the owner (or an admin) may. paddock egress always ls lists
yours, paddock egress always rm HOST[:PORT] takes one off.`,
	}
	cmd.AddCommand(egressPendingCmd(g, o), egressApproveCmd(g, o, false), egressApproveCmd(g, o, true),
		egressPolicyCmd(g, o, true), egressPolicyCmd(g, o, false), egressAlwaysCmd(g, o))
	return cmd
}

func egressPendingCmd(g *globals, o IO) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pending [NAME]",
		Short: "List the connections waiting for approval (of one session, or all you can see)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ps, err := c.EgressPending(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				keep := ps[:0]
				for _, p := range ps {
					if p.Name == args[0] || p.Session == args[0] {
						keep = append(keep, p)
					}
				}
				ps = keep
			}
			if asJSON {
				enc := json.NewEncoder(o.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(ps)
			}
			if len(ps) == 0 {
				fmt.Fprintln(o.Stdout, "No connection is waiting for approval.")
				return nil
			}
			tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tHOST\tWAITING\tREFUSED IN")
			now := time.Now()
			for _, p := range ps {
				fmt.Fprintf(tw, "%s\t%s:%d\t%s\t%s\n", p.Name, p.Host, p.Port, now.Sub(p.Since).Round(time.Second), max(p.Deadline.Sub(now), 0).Round(time.Second))
			}
			tw.Flush()
			fmt.Fprintln(o.Stdout, "Approve: paddock egress approve SESSION HOST[:PORT] [--for 1h|--session|--always]; refuse: paddock egress deny SESSION HOST[:PORT]")
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func egressApproveCmd(g *globals, o IO, deny bool) *cobra.Command {
	var forD string
	var sess, always bool
	use, short := "approve NAME HOST[:PORT]", "Let a session reach a name: its waiting connections go through, and later ones too"
	if deny {
		use, short = "deny NAME HOST[:PORT]", "Refuse a session's waiting connections to a name (--session: and every later one)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.
HOST is a name or *.DOMAIN (a registrable domain or below: never *.com); the port is 443 unless
given. Never an address: the box asks by name, and address classes stay forbidden anyway.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.ApproveRequest{Rule: args[1], Deny: deny}
			n := 0
			if forD != "" {
				req.Scope, req.For, n = "for", forD, n+1
			}
			if sess {
				req.Scope, n = "session", n+1
			}
			if always {
				req.Scope, n = "always", n+1
			}
			if n > 1 {
				return usageError{errors.New("give one of --for, --session, --always")}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.ApproveEgress(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			switch {
			case deny && res.Recorded:
				fmt.Fprintf(o.Stdout, "%s: denied %s: %d waiting connection(s) refused, and later ones will be.\n", args[0], res.Rule, res.Answered)
			case deny:
				fmt.Fprintf(o.Stdout, "%s: denied %s: %d waiting connection(s) refused. Later ones will wait again; --session refuses them for good.\n", args[0], res.Rule, res.Answered)
			default:
				scope := "for the session's life"
				switch req.Scope {
				case "for":
					scope = "for " + forD
				case "always":
					scope = "always, in every ask-mode session of its owner (paddock egress always ls)"
				}
				fmt.Fprintf(o.Stdout, "%s: approved %s %s: %d waiting connection(s) let through.\n", args[0], res.Rule, scope, res.Answered)
			}
			return nil
		},
	}
	if !deny {
		cmd.Flags().StringVar(&forD, "for", "", "approve for a while only (like 30m or 1h)")
		cmd.Flags().BoolVar(&always, "always", false, "approve for every ask-mode session of the session's owner, now and later (the owner or an admin only; undo with paddock egress always rm)")
	}
	cmd.Flags().BoolVar(&sess, "session", false, "for the session's life (the default for approve)")
	return cmd
}

func egressPolicyCmd(g *globals, o IO, attach bool) *cobra.Command {
	use, short := "attach NAME POLICY", "Attach a named policy of the Runner's config (egress.policies.POLICY) to a running session"
	if !attach {
		use, short = "detach NAME POLICY", "Detach a named policy from a running session (tunnels it alone allowed are cut)"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.SetRequest{}
			if attach {
				req.Attach = []string{args[1]}
			} else {
				req.Detach = []string{args[1]}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Set(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "%s: egress %s\n", s.Name, s.EgressSummary())
			return nil
		},
	}
}

func egressAlwaysCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "always",
		Short: "Your standing approvals (egress approve --always): list them, take one off",
		Long: `A standing approval lets every ask-mode session of its owner reach a name, now and later,
without asking. Only the owner (or an admin) makes one: paddock egress approve NAME HOST --always.
Admins may name anyone's list with --user.`,
	}
	var user string
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List your standing approvals (--user NAME: someone's, for admins)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			l, err := c.EgressAlways(cmd.Context(), user)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(o.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(l)
			}
			if len(l.Approvals) == 0 {
				fmt.Fprintf(o.Stdout, "%s has no standing egress approvals (paddock egress approve NAME HOST[:PORT] --always makes one).\n", l.User)
				return nil
			}
			tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RULE\tAPPROVED BY\tAT")
			for _, a := range l.Approvals {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Rule, a.By, a.At.Local().Format(time.DateTime))
			}
			tw.Flush()
			fmt.Fprintf(o.Stdout, "Every ask-mode session of %s uses these. Remove one: paddock egress always rm HOST[:PORT]\n", l.User)
			return nil
		},
	}
	ls.Flags().StringVar(&user, "user", "", "whose list (admins only; default: yours)")
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var rmUser string
	rm := &cobra.Command{
		Use:   "rm HOST[:PORT]",
		Short: "Take a standing approval off: your running ask-mode sessions stop using it at once",
		Long: `Take a standing approval off your list (--user NAME: someone's, for admins). Each of your
running sessions has its egress policy set again without it: later connections to the name wait
for approval again, and open tunnels it alone allowed are cut. An approval of the same name made
for one session alone (egress approve without --always) stays. The audit log records it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.RemoveEgressAlways(cmd.Context(), api.AlwaysRemoveRequest{Rule: args[0], User: rmUser})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "removed %s from the standing approvals of %s: %d running session(s) no longer use it, %d open tunnel(s) cut.\n",
				res.Rule, res.User, res.Sessions, res.Cut)
			return nil
		},
	}
	rm.Flags().StringVar(&rmUser, "user", "", "whose list (admins only; default: yours)")
	cmd.AddCommand(ls, rm)
	return cmd
}
