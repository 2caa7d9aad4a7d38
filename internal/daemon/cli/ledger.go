package cli

import (
	"fmt"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/spf13/cobra"
)

func ledgerCmd(g *globals, o IO) *cobra.Command {
	var format string
	var withTranscript bool
	cmd := &cobra.Command{
		Use:   "ledger SESSION",
		Short: "Write a session's ledger: every API request and egress decision, joined to the tool calls behind them",
		Long: `Write a session's ledger to stdout: one record per request the credential proxy
forwarded (or refused) and per egress decision, in time order. Each request names
the tool calls whose results it carried and those its answer asked for; each
egress decision names the tool calls that were running when it was made.

With --with-transcript the calls are joined to Claude Code's transcript, read from
the session's running box: each gets its tool's name and input (for Bash, the
command line). The record format is versioned; see docs/LEDGER.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := ledger.CheckFormat(format); err != nil {
				return usageError{fmt.Errorf("--format: %w", err)}
			}
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			c := api.NewClient(dirSocket(dir))
			// An unknown name is an error, not an empty ledger.
			if _, err := c.Session(cmd.Context(), args[0]); err != nil {
				return err
			}
			res, err := c.Ledger(cmd.Context(), args[0], api.LedgerOptions{WithTranscript: withTranscript})
			if err != nil {
				return err
			}
			if t := res.Transcript; t != nil {
				if t.Cut {
					fmt.Fprintf(o.Stderr, "paddock: the transcript is larger than the %d bytes read of it: calls before that part have no tool or input\n", t.Bytes)
				}
				if t.Skipped > 0 {
					fmt.Fprintf(o.Stderr, "paddock: %d of the transcript's %d lines could not be read and were skipped (the calls in them have no tool or input):\n", t.Skipped, t.Lines)
					for _, p := range t.Problems {
						fmt.Fprintf(o.Stderr, "  %s\n", p)
					}
				}
			}
			return ledger.Write(o.Stdout, format, res.Records)
		},
	}
	cmd.Flags().StringVar(&format, "format", ledger.FormatJSONL, "jsonl (one JSON record per line) or csv")
	cmd.Flags().BoolVar(&withTranscript, "with-transcript", false, "join the tool calls to Claude Code's transcript (tool names and inputs); the session must be running")
	return cmd
}
