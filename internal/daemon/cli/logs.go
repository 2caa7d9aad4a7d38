package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/spf13/cobra"
)

func logsCmd(g *globals, o IO) *cobra.Command {
	var asJSON, egressOnly, servicesOnly, follow bool
	var n int
	cmd := &cobra.Command{
		Use:   "logs SESSION",
		Short: "Print a session's credential proxy decisions (or, with --egress, egress decisions; with --services, its service credentials' requests), one line each",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return usageError{fmt.Errorf("--tail %d: must be 0 (all) or more", n)}
			}
			if egressOnly && servicesOnly {
				return usageError{fmt.Errorf("--egress or --services: give one")}
			}
			kind := ""
			switch {
			case egressOnly:
				kind = "egress"
			case servicesOnly:
				kind = "service"
			}
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			c := api.NewClient(dirSocket(dir))
			// An unknown name is an error, not an empty log.
			if _, err := c.Session(cmd.Context(), args[0]); err != nil {
				return err
			}
			// The log grows at its end and, past logs.max_size or
			// logs.max_age, loses its oldest lines: what was printed is
			// marked by the last line printed, not by a count.
			var last *decisionlog.Entry
			header := true
			show := func() error {
				all, err := c.Logs(cmd.Context(), args[0], 0)
				if err != nil {
					return err
				}
				var es []decisionlog.Entry
				for _, e := range all {
					if e.Kind == kind {
						es = append(es, e)
					}
				}
				from := 0
				if last != nil {
					// After the last line printed; if it is gone, every
					// line kept is newer (the oldest go first).
					for i := len(es) - 1; i >= 0; i-- {
						if es[i].RequestID == last.RequestID && es[i].Time.Equal(last.Time) {
							from = i + 1
							break
						}
					}
				}
				if header && n > 0 && len(es) > n { // --tail applies to the first batch
					from = len(es) - n
				}
				if len(es) > 0 {
					last = &es[len(es)-1]
				}
				if err := writeEntries(o, es[min(from, len(es)):], asJSON, kind, header); err != nil {
					return err
				}
				header = false
				return nil
			}
			if err := show(); err != nil || !follow {
				return err
			}
			// Follow: new entries as they come, until the session is gone
			// or the person stops it (ctrl-c).
			t := time.NewTicker(followEvery)
			defer t.Stop()
			for i := 1; ; i++ {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-t.C:
				}
				if err := show(); err != nil {
					return err
				}
				if i%10 == 0 {
					s, err := c.Session(cmd.Context(), args[0])
					if err != nil || !s.Live() {
						return err
					}
				}
			}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines")
	cmd.Flags().BoolVar(&egressOnly, "egress", false, "the egress proxy's decisions (one per connection) instead of the API's")
	cmd.Flags().BoolVar(&servicesOnly, "services", false, "the requests made with the session's service credentials (paddock run --secret), each allowed or refused, with a push's ref updates")
	cmd.Flags().IntVarP(&n, "tail", "n", 0, "only the last N lines (0: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing new lines as they come, until the session is removed (ctrl-c stops)")
	return cmd
}

// followEvery is how often logs -f asks the Runner for new lines.
const followEvery = 500 * time.Millisecond

// writeEntries prints decisions as JSON Lines or a table (with its header
// line when header).
func writeEntries(o IO, es []decisionlog.Entry, asJSON bool, kind string, header bool) error {
	if asJSON {
		enc := json.NewEncoder(o.Stdout)
		for _, e := range es {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	if kind == "service" {
		if header {
			fmt.Fprintln(tw, "TIME\tDECISION\tSTATUS\tMETHOD\tHOST\tPATH\tREPO\tREFS\tREASON")
		}
		for _, e := range es {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), e.Decision, e.Status,
				e.Method, dash(e.Host), e.Path, dash(e.Repo), dash(strings.Join(e.RefUpdates, ", ")), e.Reason)
		}
		return tw.Flush()
	}
	if kind == "egress" {
		if header {
			fmt.Fprintln(tw, "TIME\tDECISION\tHOST\tPORT\tADDRESS\tRULE\tIN\tOUT\tREASON")
		}
		for _, e := range es {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", e.Time.Local().Format("15:04:05.000"), e.Decision,
				dash(e.Host), e.Port, dash(e.Addr), dash(e.Rule), e.BytesIn, e.BytesOut, e.Reason)
		}
		return tw.Flush()
	}
	if header {
		fmt.Fprintln(tw, "TIME\tDECISION\tSTATUS\tMETHOD\tPATH\tMODEL\tIN\tOUT\tMS\tREASON")
	}
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%.1f\t%s\n",
			e.Time.Local().Format("15:04:05.000"), e.Decision, e.Status, e.Method, e.Path,
			dash(e.Model), e.InputTokens, e.OutputTokens, e.DurationMS, e.Reason)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
