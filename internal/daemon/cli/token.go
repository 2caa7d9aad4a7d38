package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/events"
)

func tokenCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke your API tokens, for programs that call the Runner's API",
		Long: `An API token lets a program call the Runner's HTTP API on its web listener (web.listen) as
you, within a scope: read (list, get, wait, the last turn, events, diffs, usage), drive (read,
and send messages and answer egress approvals) or operate (drive, and create, sleep, wake and
remove sessions). A token never reaches what the socket alone may do: a terminal, exec,
credentials, secrets, or another token. The API is described by GET /v1/openapi.json
(docs/API.md).

The token is printed once, when it is made; the Runner keeps only its hash. Revoke it with
paddock token rm ID: it is refused from the next request on.`,
	}
	var scope, name string
	create := &cobra.Command{
		Use:   "create --scope read|drive|operate [--name NAME]",
		Short: "Make a token; it is printed once",
		Example: `  paddock token create --scope read --name dashboard
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7777/v1/sessions`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scope == "" {
				return usageError{fmt.Errorf("say what the token may do: --scope read, drive or operate (paddock token --help says what each allows)")}
			}
			sc, err := api.ParseScope(scope)
			if err != nil {
				return usageError{err}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.CreateAPIToken(cmd.Context(), api.TokenRequest{Scope: sc, Name: name})
			if err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, res.Token.Reveal())
			fmt.Fprintf(o.Stderr, "API token %s (scope %s) made; it is shown this once: keep it where a password would go. Send it as Authorization: Bearer TOKEN to the API under /v1/ on the Runner's web listener (web.listen); revoke it with paddock token rm %s\n", res.ID, res.Scope, res.ID)
			return nil
		},
	}
	create.Flags().StringVar(&scope, "scope", "", "read, drive or operate")
	create.Flags().StringVar(&name, "name", "", "a name to know it by")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List your tokens (never the tokens themselves)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ts, err := c.APITokens(cmd.Context())
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				fmt.Fprintln(o.Stderr, "no API tokens; make one with paddock token create --scope read")
				return nil
			}
			tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tNAME\tCREATED\tLAST USED")
			for _, t := range ts {
				used := "never"
				if !t.Used.IsZero() {
					used = t.Used.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Scope, t.Name, t.Created.Local().Format(time.DateTime), used)
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Revoke a token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			t, err := c.RemoveAPIToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "API token %s (scope %s) revoked\n", t.ID, t.Scope)
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm)
	return cmd
}

func eventsCmd(g *globals, o IO) *cobra.Command {
	var after uint64
	cmd := &cobra.Command{
		Use:   "events [NAME]",
		Short: "Follow what happens to your sessions (or one), one JSON line per event",
		Long: `Print the Runner's events as they happen, one JSON object per line: claude's activity
(working, waiting, exited), turns started and ended with the tokens they used, proxy and egress
decisions, connections waiting for approval, and sessions created, asleep, woken or removed.
The same stream is GET /v1/events (server-sent events) on the API. --after SEQ resumes after
an event's seq, while the Runner still keeps it.`,
		Example:           `  paddock events fix-login | jq 'select(.type=="turn.ended") | .usage'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			enc := json.NewEncoder(o.Stdout)
			var werr error
			err = c.Events(cmd.Context(), ref, after, func(e events.Event) bool {
				werr = enc.Encode(e)
				return werr == nil
			})
			if werr != nil {
				return werr
			}
			if cmd.Context().Err() != nil {
				return nil // interrupted: the ordinary end
			}
			return err
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "resume after this event's seq")
	return cmd
}
