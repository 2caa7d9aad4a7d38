package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
)

func secretCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Your credentials for other services (GitHub, GitLab, a header), held by the Runner, never by a box",
		Long: `A service credential is kept by the Runner (a 0600 file in its state directory, yours
alone on a team server) and used on the way out of a box, for the requests a session's
grant allows; the box holds only a placeholder, worth nothing anywhere else.

  gh auth token | paddock secret set github --kind github
  paddock run --workspace . --clone --secret github:OWNER/REPO:push --egress allowlist --allow github.com

See docs/SECURITY.md (service credentials) for each rule.`,
	}
	cmd.AddCommand(secretSetCmd(g, o), secretLsCmd(g, o), secretRmCmd(g, o))
	return cmd
}

func secretSetCmd(g *globals, o IO) *cobra.Command {
	var req api.SecretRequest
	var fromCommand, file string
	cmd := &cobra.Command{
		Use:   "set NAME --kind github|gitlab|header [--from-command CMD | --file F | -]",
		Short: "Store a service credential (from stdin, a file or a command's output; never from the command line)",
		Long: `Store a service credential under NAME, replacing one of that name. The value is read from
stdin (hidden on a terminal), from --file, or from what --from-command prints (run by your
shell here, as you: 'gh auth token', say). It is never taken as an argument, where other
users could see it.

Kinds:
  github   a GitHub token; --host for GitHub Enterprise (default github.com)
  gitlab   a GitLab token; --host for a self-managed GitLab (default gitlab.com)
  header   one header (--header NAME, its value as stored) for --host, under --path-prefix

paddock secret ls shows names, kinds and fingerprints; no command shows a value.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Kind == "" {
				return usageError{fmt.Errorf("give --kind github, gitlab or header: %w", errdefs.ErrInvalid)}
			}
			v, err := readServiceSecret(cmd.Context(), o, fromCommand, file)
			if err != nil {
				return err
			}
			req.Value = api.SecretString(v.Reveal())
			c, err := g.client(o)
			if err != nil {
				return err
			}
			st, err := c.SetSecret(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			where := st.Host
			if st.HeaderName != "" {
				where = st.HeaderName + " for " + st.Host + st.PathPrefix
			}
			fmt.Fprintf(o.Stdout, "stored %s credential %s (%s; %d bytes, fingerprint %s) in %s\ngive a session its use with paddock run --secret %s", st.Kind, st.Name, where, st.Length, st.Fingerprint, cmp.Or(st.Where, "the Runner"), st.Name)
			if st.Kind != "header" {
				fmt.Fprint(o.Stdout, ":OWNER/REPO[:read|push]")
			}
			fmt.Fprintln(o.Stdout)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Kind, "kind", "", "github, gitlab or header")
	f.StringVar(&req.Host, "host", "", "the service's host (default github.com or gitlab.com; required for header)")
	f.StringVar(&req.HeaderName, "header", "", "header kind: the header's name (its value is the secret, as stored)")
	f.StringVar(&req.PathPrefix, "path-prefix", "", "header kind: only under this path (default every path)")
	f.StringVar(&fromCommand, "from-command", "", "run this command (sh -c, as you, here) and store what it prints")
	f.StringVar(&file, "file", "", "read the value from this file")
	return cmd
}

// readServiceSecret reads the value from the command, the file or stdin:
// one line, trimmed.
func readServiceSecret(ctx context.Context, o IO, fromCommand, file string) (secret.Value, error) {
	switch {
	case fromCommand != "" && file != "":
		return secret.Value{}, usageError{fmt.Errorf("--from-command or --file: give one: %w", errdefs.ErrInvalid)}
	case fromCommand != "":
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "sh", "-c", fromCommand)
		c.Stdin, c.Stderr = os.Stdin, o.Stderr
		out, err := c.Output()
		if err != nil {
			return secret.Value{}, fmt.Errorf("--from-command: %v (its output is not shown)", err)
		}
		return cleanServiceSecret(string(out))
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return secret.Value{}, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 16<<10+1))
		if err != nil {
			return secret.Value{}, err
		}
		return cleanServiceSecret(string(b))
	}
	return readSecret(o)
}

func cleanServiceSecret(s string) (secret.Value, error) {
	line, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if strings.TrimSpace(rest) != "" {
		return secret.Value{}, usageError{fmt.Errorf("the value is more than one line; give only the token: %w", errdefs.ErrInvalid)}
	}
	return clean(line)
}

func secretLsCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List your service credentials: names, kinds, hosts and fingerprints, never a value",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			l, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			if len(l) == 0 {
				fmt.Fprintln(o.Stdout, "no service credentials; store one with paddock secret set NAME --kind github|gitlab|header")
				return nil
			}
			tw := tabwriter.NewWriter(o.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tHOST\tFINGERPRINT\tSET")
			for _, s := range l {
				host := s.Host
				if s.HeaderName != "" {
					host = s.HeaderName + " @ " + s.Host + s.PathPrefix
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, host, s.Fingerprint, s.SetAt.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
}

func secretRmCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a service credential; sessions granted it are refused its use from their next request",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			if err := c.RemoveSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "removed %s\n", args[0])
			return nil
		},
	}
}
