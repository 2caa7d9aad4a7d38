package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// webCmd prints a fresh one-time login URL of the Runner's web page.
func webCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
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
	cmd.AddCommand(&cobra.Command{
		Use:   "enroll [USER]",
		Short: "Print a one-time link that makes a passkey for the web page (good once, for 15 minutes)",
		Long: `Print a link that makes a passkey (WebAuthn: this device's, a phone's or a security key's)
for you, or, for an admin, for USER, and logs that browser in. Open it where the passkey is to
live; after that, log in from there at /passkey, with no link. The link is good once, for 15
minutes; give it to no one else.

Passkeys need the page on a host name over TLS (web.tls and web.hosts in paddock.toml), or on
loopback without TLS, opened as localhost.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			user := ""
			if len(args) == 1 {
				user = args[0]
			}
			u, err := c.WebEnroll(cmd.Context(), user)
			if err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, u)
			fmt.Fprintln(o.Stderr, "Open it in the browser where the passkey is to live; it is good once, for 15 minutes. Later logins: the page's /passkey.")
			return nil
		},
	})
	return cmd
}
