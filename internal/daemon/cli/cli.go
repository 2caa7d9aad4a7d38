// Package cli is paddock's command line. main calls Main; everything else
// lives here so the CLI can be driven as a library in tests.
//
// Exit codes (exitCode is the one place errors become them): 0 success,
// 1 failure, 2 bad usage or input, 3 the Runner or a dependency is
// unavailable, 4 not found, 5 conflict, forbidden or over a limit; paddock wait adds
// 6 timed out and 7 the session stopped running (activity.go).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/spf13/cobra"
)

// IO is what a command reads and writes, and the environment it sees.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Env            []string
	// Reexec, if set, runs first in serve: the command replaces its
	// process to start the Runner with its runtime settings
	// (runtimepolicy.Reexec). Tests, which run Main in their own
	// process, leave it nil.
	Reexec func() error
}

func (o IO) getenv(k string) string {
	for i := len(o.Env) - 1; i >= 0; i-- {
		if kk, v, ok := strings.Cut(o.Env[i], "="); ok && kk == k {
			return v
		}
	}
	return ""
}

// globals are the flags every command has.
type globals struct {
	stateDir  string
	logFormat string
	logLevel  string
	// serving: the command is serve, whose state directory is its own.
	serving bool
}

// Main runs the CLI and returns the process exit code.
func Main(ctx context.Context, args []string, o IO) int {
	err := Run(ctx, args, o)
	if err == nil {
		return 0
	}
	var ee exitError
	if !errors.As(err, &ee) { // a command's own exit code speaks for itself
		fmt.Fprintln(o.Stderr, "paddock:", err)
	}
	return exitCode(err)
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func exitCode(err error) int {
	var ue usageError
	var ce *config.Error
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.As(err, &ce), errors.Is(err, errdefs.ErrInvalid):
		return 2
	case errors.Is(err, errdefs.ErrUnavailable):
		return 3
	case errors.Is(err, errdefs.ErrNotFound):
		return 4
	case errors.Is(err, errdefs.ErrConflict), errors.Is(err, errdefs.ErrForbidden), errors.Is(err, errdefs.ErrUnauthorized), errors.Is(err, errdefs.ErrLimit), errors.Is(err, statedir.ErrLocked):
		return 5
	}
	return 1
}

// Run runs the CLI with args (without the program name).
func Run(ctx context.Context, args []string, o IO) error {
	g := &globals{}
	root := &cobra.Command{
		Use:   "paddock",
		Short: "Run Claude Code with every permission bypassed, in a sandbox that keeps your machine, network and credential safe",
		Long: `paddock runs the real Claude Code CLI inside an isolated sandbox on a machine you control.
Your Anthropic credential stays outside: the Runner's credential proxy swaps a per-session
token for it. Start the Runner with "paddock serve"; the other commands talk to it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetArgs(args)
	root.SetIn(o.Stdin)
	root.SetOut(o.Stdout)
	root.SetErr(o.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath())}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", "", "state directory (env "+statedir.EnvVar+"; default /var/lib/paddock for root, else $XDG_STATE_HOME/paddock)")
	pf.StringVar(&g.logFormat, "log-format", "", "log format: text or json (default from config, else text)")
	pf.StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn, error (default from config, else info)")

	root.AddCommand(
		serveCmd(g, o),
		runCmd(g, o),
		secretCmd(g, o),
		prCmd(g, o),
		lsCmd(g, o),
		attachCmd(g, o),
		execCmd(g, o),
		sleepCmd(g, o),
		wakeCmd(g, o),
		rmCmd(g, o),
		pruneCmd(g, o),
		setCmd(g, o),
		egressCmd(g, o),
		doctorCmd(g, o),
		smokeCmd(g, o),
		credentialCmd(g, o),
		logsCmd(g, o),
		usageCmd(g, o),
		ledgerCmd(g, o),
		sessionCmd(g, o),
		versionCmd(o),
		guestCmd(o),
		devCmd(o),
		imageCmd(g, o),
		claudeCmd(g, o),
		waitCmd(g, o),
		inspectCmd(g, o),
		webCmd(g, o),
		shareCmd(g, o),
		unshareCmd(g, o),
		auditCmd(g, o),
		diffCmd(g, o),
		fetchCmd(g, o),
		mergeCmd(g, o),
		sendCmd(g, o),
		tokenCmd(g, o),
		eventsCmd(g, o),
		mcpCmd(g, o),
		portCmd(g, o),
		projectCmd(g, o),
	)
	addCompletion(root, g, o)
	refuseUnknownSubcommands(root)
	c, err := root.ExecuteContextC(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra's own, untyped: a command not called right, as a bad flag.
		err = usageError{err}
	}
	if err != nil && c != nil && argCountError(err) {
		// cobra's "accepts 1 arg(s), received 0" says what is wrong, not
		// what to type instead.
		err = fmt.Errorf("%w; usage: %s (see %s --help)", err, strings.TrimSuffix(c.UseLine(), " [flags]"), c.CommandPath())
	}
	return err
}

// argCountError reports whether err is one of cobra's positional-argument
// count errors (cobra.ExactArgs and its kin), which name no usage.
func argCountError(err error) bool {
	m := err.Error()
	for _, p := range []string{"accepts ", "requires at least ", "requires at most "} {
		if strings.HasPrefix(m, p) && strings.Contains(m, " arg") {
			return true
		}
	}
	return false
}

// refuseUnknownSubcommands makes every group command under root (one with
// subcommands and no action of its own, as `paddock credential`) refuse a
// subcommand it does not have, as the root does, instead of printing its
// help and exiting 0; called with none, it prints its help.
func refuseUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
		if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
			continue
		}
		c.Args = cobra.ArbitraryArgs // RunE says what is wrong, with suggestions
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if c.SuggestionsMinimumDistance <= 0 {
				c.SuggestionsMinimumDistance = 2 // cobra's own, which only its root applies
			}
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
			}
			return usageError{errors.New(msg)}
		}
	}
}

// configPath is the config file to load: the --config flag's, which must
// exist, or the state directory's, which may not.
func configPath(stateDir, flag string) (path string, mustExist bool) {
	if flag != "" {
		return flag, true
	}
	return filepath.Join(stateDir, statedir.ConfigFile), false
}

// resolveStateDir is the state directory a command works on: --state-dir,
// then PADDOCK_STATE_DIR, then (for clients) statedir.ForClient, which
// finds the host's system Runner for a member of its group.
func (g *globals) resolveStateDir(o IO) (string, error) {
	if g.stateDir == "" {
		if v := o.getenv(statedir.EnvVar); v != "" {
			g.stateDir = v
		}
	}
	if g.stateDir == "" && !g.serving {
		return statedir.ForClient()
	}
	return statedir.Resolve(g.stateDir)
}

// newLogger builds the process logger from the effective settings.
func newLogger(w io.Writer, format string, level config.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(level)}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func versionCmd(o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print paddock's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(o.Stdout, "paddock", version.String())
			return nil
		},
	}
}
