package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/usage"
	"github.com/spf13/cobra"
)

func usageCmd(g *globals, o IO) *cobra.Command {
	var since, by string
	var asJSON, allUsers bool
	cmd := &cobra.Command{
		Use:   "usage [NAME] [--since D] [--by session|user|model|day|hour] [--json]",
		Short: "Print requests, tokens and estimated cost of a session, or of every session you see",
		Long: `Print the credential proxy's forwarded requests with their input, output, cache-read and
cache-creation tokens and an estimated cost in US dollars, from the sessions' decision logs.

Costs are estimates at the list prices of the Runner's price table ([prices] in its config,
dated by prices.as_of); a model with no price there shows its cost as "unknown". --since
takes a duration back from now (90m, 24h, 7d, 2w) or a date (2026-11-30, from midnight UTC).
"user" is whose credential a request went out with; day and hour are UTC.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("give at most one session NAME (got %d); without one, every session you see", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			q := api.UsageQuery{AllUsers: allUsers}
			if len(args) == 1 {
				if allUsers {
					return usageError{fmt.Errorf("give a session NAME or --all-users, not both")}
				}
				q.Session = args[0]
			}
			k, err := usage.ParseKey(by)
			if err != nil {
				return usageError{fmt.Errorf("--by: %v", err)}
			}
			q.By = k
			if since != "" {
				if q.Since, err = usage.ParseSince(since, time.Now()); err != nil {
					return usageError{err}
				}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			rep, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(o.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return writeUsage(o, rep)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only requests since a duration ago (24h, 7d) or a date (2026-11-30, UTC)")
	cmd.Flags().StringVar(&by, "by", string(usage.BySession), "sum rows by session, user, model, day or hour")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (rows, total, prices_as_of)")
	cmd.Flags().BoolVar(&allUsers, "all-users", false, "every person's sessions, not only yours and those shared with you (admins)")
	return cmd
}

// writeUsage prints a report as an aligned table with a total row, and
// what the costs rest on below it (on stderr: stdout stays the table).
func writeUsage(o IO, rep usage.Report) error {
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tREQUESTS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST USD\n", strings.ToUpper(string(rep.By)))
	row := func(r usage.Row) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", dash(r.Key), r.Requests, r.Input, r.Output, r.CacheRead, r.CacheCreation, costText(r.CostUSD))
	}
	for _, r := range rep.Rows {
		row(r)
	}
	tot := rep.Total
	tot.Key = "TOTAL"
	row(tot)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "costs are estimates at the list prices of %s (the Runner's [prices])\n", rep.PricesAsOf)
	if len(rep.UnpricedModels) > 0 {
		fmt.Fprintf(o.Stderr, "cost unknown: %d requests went to models with no price (%s); add them to the Runner's config as [prices.models.\"ID\"]\n",
			rep.Total.Unpriced, strings.Join(rep.UnpricedModels, ", "))
	}
	return nil
}

// costText is a cost in dollars, or "unknown".
func costText(c *float64) string {
	if c == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.4f", *c)
}

// budgetUSDText is a budget in money, or "none".
func budgetUSDText(v float64) string {
	if v == 0 {
		return "none"
	}
	return "$" + strconv.FormatFloat(v, 'f', -1, 64)
}
