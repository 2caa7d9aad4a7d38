package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// webCmd prints a fresh one-time login URL of the Runner's web page.
func webCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "web",
		Short: "Print a one-time login URL of the web page (good once, for 10 minutes)",
		Long: `Print a fresh login URL of the Runner's web page. Open it in a browser on this host: it
logs that browser in for 24 hours (or until "log out"), and is dead after that one use or
after 10 minutes. Only whoever can use the Runner's socket can get one; the Runner never
prints or stores it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			u, err := c.WebLogin(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, u)
			return nil
		},
	}
}
