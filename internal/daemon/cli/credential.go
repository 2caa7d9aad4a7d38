package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/runner"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func credentialCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credential",
		Short: "Store or inspect your Anthropic credential (never printed): the owner's, or on a team server your own",
	}
	cmd.AddCommand(credentialSetCmd(g, o), credentialStatusCmd(g, o), credentialRmCmd(g, o), credentialLoginCmd(g, o), credentialLogoutCmd(g, o))
	return cmd
}

func credentialSetCmd(g *globals, o IO) *cobra.Command {
	var kindName string
	var fileOnly bool
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Store the credential read from stdin (the OS keyring where there is one, else a 0600 file)",
		Long: `Read a credential from stdin and store it in the OS keyring where this host has one (the Secret
Service), else in <state-dir>/credential.json, mode 0600; it says which.
It is never taken from the command line, where other users could see it.

  claude setup-token          # prints a long-lived token for your subscription
  paddock credential set      # paste it, then Enter (input is hidden on a terminal)
  paddock credential set --kind api_key < key.txt

The kind is detected from the prefix (sk-ant-oat… is oauth, sk-ant-api… is api_key);
give --kind for anything else (auth_token for a gateway's bearer token).
A running Runner picks the new credential up within a second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			s, err := readSecret(o)
			if err != nil {
				return err
			}
			if !ownsStateDir(dir) {
				// Another user's Runner (a team server): this person's own
				// credential, kept by that Runner.
				st, err := api.NewClient(dirSocket(dir)).SetCredential(cmd.Context(), kindName, s)
				if err != nil {
					return err
				}
				fmt.Fprintf(o.Stdout, "stored your own %s credential (%d bytes, fingerprint %s) with the Runner of %s; your sessions use it from their next request\n",
					st.Kind, st.Length, st.Fingerprint, dir)
				return nil
			}
			kind, ok := credential.DetectKind(s)
			if kindName != "" {
				if kind, err = credential.ParseKind(kindName); err != nil {
					return usageError{fmt.Errorf("--kind: %w", err)}
				}
			} else if !ok {
				return usageError{fmt.Errorf("cannot tell the kind of this credential from its prefix; give --kind oauth, api_key or auth_token: %w", errdefs.ErrInvalid)}
			}
			if err := statedir.Ensure(dir); err != nil {
				return err
			}
			f := credential.File{Path: runner.CredentialFile(dir)}
			where := ""
			if !fileOnly {
				if ok, why := credential.KeyringAvailable(); ok {
					if err := (credential.Keyring{Account: dir}).Save(kind, s); err != nil {
						return err
					}
					_ = f.Remove() // one stored credential, not two
					where = "the OS keyring"
				} else {
					where = fmt.Sprintf("%s (mode 0600; no OS keyring here: %s)", f.Path, why)
				}
			}
			if where == "" || strings.HasPrefix(where, f.Path) {
				if err := f.Save(kind, s); err != nil {
					return err
				}
				if where == "" {
					where = f.Path + " (mode 0600)"
				}
			}
			st := credential.Credential{Kind: kind, Secret: s}.Status()
			fmt.Fprintf(o.Stdout, "stored %s credential (%d bytes, fingerprint %s) in %s\n", kind, st.Length, st.Fingerprint, where)
			return nil
		},
	}
	cmd.Flags().StringVar(&kindName, "kind", "", "oauth, api_key or auth_token (default: from the prefix)")
	cmd.Flags().BoolVar(&fileOnly, "file", false, "store in the 0600 file even where an OS keyring exists")
	return cmd
}

// readSecret reads one line from stdin; on a terminal, without echo.
func readSecret(o IO) (secret.Value, error) {
	if f, ok := o.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(o.Stderr, "Paste the credential and press Enter: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(o.Stderr)
		if err != nil {
			return secret.Value{}, fmt.Errorf("read credential: %w", err)
		}
		return clean(string(b))
	}
	line, err := bufio.NewReader(io.LimitReader(o.Stdin, 16<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return secret.Value{}, fmt.Errorf("read credential from stdin: %w", err)
	}
	return clean(line)
}

func clean(s string) (secret.Value, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return secret.Value{}, usageError{fmt.Errorf("no credential on stdin: pipe it in or paste it: %w", errdefs.ErrInvalid)}
	}
	return secret.New(s), nil
}

func credentialStatusCmd(g *globals, o IO) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the kind and source of the credential in use, never the secret",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			c := api.NewClient(dirSocket(dir))
			st, err := c.CredentialStatus(cmd.Context())
			note := ""
			if errors.Is(err, api.ErrNoRunner) {
				// No Runner: say what one started from this shell would use.
				ch := &credential.Chain{File: credential.File{Path: runner.CredentialFile(dir)}, Env: o.Env}
				var cred credential.Credential
				cred, err = ch.Current()
				if err == nil {
					st = cred.Status()
				}
				note = "the Runner is not running; this is what `paddock serve` would use, started from this shell"
			}
			if err != nil {
				switch {
				case errors.Is(err, credential.ErrMissing):
					st = credential.Status{Present: false}
					err = nil
				case errors.Is(err, errdefs.ErrForbidden) && !ownsStateDir(dir):
					// A team server's member with none of their own.
					fmt.Fprintln(o.Stdout, "no credential of your own:", err)
					return nil
				case note == "" && loginShown(cmd.Context(), o, c, err):
					// paddock's login is the credential, and unusable: say why.
					return nil
				default:
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(o.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			if !st.Present {
				fmt.Fprintln(o.Stdout, "no credential: store one with `paddock credential set`, or start `paddock serve` with CLAUDE_CODE_OAUTH_TOKEN or ANTHROPIC_API_KEY set")
			} else {
				fmt.Fprintf(o.Stdout, "kind:        %s\nsource:      %s\nlength:      %d\nfingerprint: %s\n", st.Kind, st.Source, st.Length, st.Fingerprint)
				if st.User != "" {
					fmt.Fprintf(o.Stdout, "whose:       %s\n", st.User)
				}
				if p := st.Plan; p.SubscriptionType != "" || p.RateLimitTier != "" || p.Scopes != "" {
					fmt.Fprintf(o.Stdout, "plan:        %s %s %s\n", dash(p.SubscriptionType), dash(p.RateLimitTier), dash(p.Scopes))
				}
				if st.Expires != nil {
					state := "valid"
					if time.Now().After(*st.Expires) {
						state = "EXPIRED"
					}
					fmt.Fprintf(o.Stdout, "expires:     %s (%s)\n", st.Expires.Local().Format(time.RFC3339), state)
				}
			}
			if note != "" {
				fmt.Fprintln(o.Stdout, "note:        "+note)
			}
			if ls, err := c.LoginStatus(cmd.Context()); err == nil && ls.LoggedIn {
				printLogin(o, ls)
			}
			if st.Present && strings.HasPrefix(st.Source, "claude-login:") && st.Expires != nil {
				if left := time.Until(*st.Expires); left < 2*time.Hour {
					fmt.Fprintf(o.Stdout, "warning:     this token comes from Claude Code's own login and expires in %s; paddock never refreshes that one (a refresh would sign your Claude Code out).\n"+
						"             Credentials that last: paddock credential login (refreshed by the Runner), a setup token (claude setup-token | paddock credential set: a year), an API key.\n",
						left.Round(time.Minute))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func credentialRmCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "rm",
		Short: "Delete the stored credential file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			if !ownsStateDir(dir) {
				if err := api.NewClient(dirSocket(dir)).RemoveCredential(cmd.Context()); err != nil {
					return err
				}
				fmt.Fprintf(o.Stdout, "removed your own credential from the Runner of %s\n", dir)
				return nil
			}
			f := credential.File{Path: runner.CredentialFile(dir)}
			if err := f.Remove(); err != nil {
				return err
			}
			if ok, _ := credential.KeyringAvailable(); ok {
				if err := (credential.Keyring{Account: dir}).Remove(); err != nil {
					return err
				}
			}
			fmt.Fprintln(o.Stdout, "removed the stored credential (file and OS keyring)")
			return nil
		},
	}
}

func dirSocket(dir string) string { return dir + "/" + statedir.APISocket }

// ownsStateDir reports whether dir is the caller's own (or not made yet):
// its credential is then "the owner's", kept on this host; otherwise it is
// another user's Runner, which keeps the caller's own credential for them.
func ownsStateDir(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid()
}

// printLogin says how paddock's own login stands.
func printLogin(o IO, ls oauth.Status) {
	fmt.Fprintf(o.Stdout, "login:       paddock's own, refreshed by the Runner; expires %s", ls.Expires.Local().Format(time.RFC3339))
	if !ls.LastRefresh.IsZero() {
		fmt.Fprintf(o.Stdout, ", last refreshed %s (%d since the Runner started)", ls.LastRefresh.Local().Format(time.RFC3339), ls.Refreshes)
	}
	fmt.Fprintln(o.Stdout)
	switch {
	case ls.Dead:
		fmt.Fprintf(o.Stdout, "LOGIN DEAD:  the OAuth server refused it (%s); run paddock credential login\n", ls.LastError)
	case ls.Failing:
		fmt.Fprintf(o.Stdout, "REFRESH FAILING since %s: %s; next try %s (or run paddock credential login)\n",
			ls.FailingSince.Local().Format(time.RFC3339), ls.LastError, ls.NextAttempt.Local().Format(time.RFC3339))
	}
}

func credentialLoginCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "login",
		Short: "Log paddock in to your Claude subscription; the Runner keeps the login and refreshes it",
		Long: `Log paddock in with your Claude account, as Claude Code's own /login does (OAuth with PKCE),
but for paddock alone: the Runner stores the tokens (0600, in the state directory) and is the one
that refreshes them, ahead of expiry, so sessions can run for days. Claude Code's own login on
this machine is untouched.

It prints a URL: open it in a browser on any machine, log in, and paste the code the page shows
("…#…") here. A credential stored with paddock credential set is replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			u, err := c.StartLogin(cmd.Context())
			if errors.Is(err, api.ErrNoRunner) {
				return fmt.Errorf("the Runner keeps and refreshes paddock's login, and it is not running: start it (paddock serve, or systemctl start paddock), then run paddock credential login again: %w", errdefs.ErrUnavailable)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "Open this URL in a browser (on any machine), log in with your Claude account,\nand paste the code the page shows:\n\n  %s\n\nCode: ", u)
			line, err := bufio.NewReader(io.LimitReader(o.Stdin, 4<<10)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read the code: %w", err)
			}
			if f, ok := o.Stdin.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
				fmt.Fprintln(o.Stderr) // what follows starts a line of its own
			}
			if strings.TrimSpace(line) == "" {
				return usageError{fmt.Errorf("no code given; run paddock credential login again and paste the code the page shows: %w", errdefs.ErrInvalid)}
			}
			st, err := c.FinishLogin(cmd.Context(), strings.TrimSpace(line))
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "paddock is logged in; the token expires %s and the Runner refreshes it ahead of time from now on (paddock credential status)\n",
				st.Expires.Local().Format(time.RFC3339))
			return nil
		},
	}
}

func credentialLogoutCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget paddock's own login (paddock credential login)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			if err := c.Logout(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, "paddock's login is forgotten; store a credential with paddock credential set or log in again")
			return nil
		},
	}
}

// loginShown prints an unusable credential's error with paddock's login's
// state, when there is a login; false when there is none.
func loginShown(ctx context.Context, o IO, c *api.Client, err error) bool {
	ls, lerr := c.LoginStatus(ctx)
	if lerr != nil || !ls.LoggedIn {
		return false
	}
	fmt.Fprintln(o.Stdout, "UNUSABLE:    "+err.Error())
	printLogin(o, ls)
	return true
}
