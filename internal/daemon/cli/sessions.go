package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/paddockhq/paddock/internal/sessions/project"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// exitError carries a command's exit code through Main.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (g *globals) client(o IO) (*api.Client, error) {
	dir, err := g.resolveStateDir(o)
	if err != nil {
		return nil, err
	}
	return api.NewClient(dirSocket(dir)), nil
}

func runCmd(g *globals, o IO) *cobra.Command {
	var req api.CreateRequest
	var detach bool
	var detachKeys string
	var credFile string
	var relaySecrets []string
	var setup runSetup // --prompt, --claude-config, …: runsetup.go
	cmd := &cobra.Command{
		Use:   "run [flags]",
		Short: "Create a session, start Claude Code in its box, and attach (detach: ctrl-p ctrl-q, or --detach-keys)",
		Long: `Create a session: a box (local bubblewrap or docker) with its own home volume, Claude Code
started in tmux with every permission bypassed, and a per-session token in place of your
credential. Without -d, attach to its terminal; detach with ctrl-p ctrl-q, the session keeps
running. Then: paddock ls, attach, exec, sleep, wake, rm.

Your Claude Code setup (CLAUDE.md, settings, agents, commands, skills, output styles, plugins,
user-scope MCP servers; never credentials or transcripts) and git identity come along, read as
you (under sudo: SUDO_USER); what is dropped is named on stderr. --prompt gives claude a task
to start with. --resume-host [ID] continues a conversation you had with Claude Code on this
host, in the workspace (the latest, or the one named): its transcript comes into the box.`,
		Args: setup.args, // none, but --resume-host's ID (runsetup.go)
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseDetachKeys(detachKeys); err != nil {
				return usageError{err} // before anything is made
			}
			if req.Workspace != "" {
				if abs, err := absDir(req.Workspace); err != nil {
					return usageError{fmt.Errorf("--workspace: %w", err)}
				} else {
					req.Workspace = abs
				}
			}
			if !cmd.Flags().Changed("egress") {
				// Offline unless the workspace's project file says more
				// (the Runner's default for none).
				req.Egress = ""
			}
			if credFile != "" {
				b, err := readCredentialFile(credFile, o)
				if err != nil {
					return err
				}
				req.Credential = api.Secret(b)
			}
			for _, rs := range relaySecrets {
				name, file, ok := strings.Cut(rs, "=")
				if !ok || name == "" || file == "" {
					return usageError{fmt.Errorf("--relay-secret %q: write NAME=FILE (FILE - for stdin)", rs)}
				}
				v, err := readCredentialFile(file, o)
				if err != nil {
					return err
				}
				if req.RelaySecrets == nil {
					req.RelaySecrets = map[string]api.SecretString{}
				}
				req.RelaySecrets[name] = api.Secret(v)
			}
			setup.promptGiven = cmd.Flags().Changed("prompt")
			if err := setup.fill(cmd.Context(), &req, o, readsStdin(credFile, relaySecrets)); err != nil {
				return err
			}
			// The Runner last: a mistake in the command line is said first.
			c, err := g.client(o)
			if err != nil {
				return err
			}
			noteProjectImage(o, req)
			s, err := c.CreateSession(cmd.Context(), req)
			if err != nil {
				return err
			}
			if detach {
				fmt.Fprintln(o.Stdout, s.ID)
				fmt.Fprintf(o.Stderr, "session %s (%s) runs; attach with: paddock attach %s\n", s.Name, s.ID[:8], s.Name)
				return nil
			}
			return attach(cmd, c, o, s.Name, detachKeys)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "session name (default: a random one like calm-otter)")
	f.StringVar(&req.Backend, "backend", "", "local, docker or kubernetes (default from config: sessions.backend)")
	f.StringVar(&req.Runtime, "runtime", "", "what the box runs on: gvisor (runsc), kata, or a runtime the backend's engine has (default from config: sessions.runtime; paddock doctor lists them)")
	f.StringVar(&req.Egress, "egress", "offline", "network posture: offline (no network at all), anthropic (the API only), allowlist (--allow, --egress-policy)")
	f.StringArrayVar(&req.Allow, "allow", nil, "with --egress allowlist: a name the box may reach, NAME[:PORT] or *.NAME[:PORT] (port 443 by default); repeat")
	f.StringVar(&req.EgressPolicy, "egress-policy", "", "with --egress allowlist: a named policy of the Runner's config (egress.policies.NAME)")
	f.StringArrayVar(&req.Deny, "deny", nil, "a name the box may never reach, NAME[:PORT] or *.NAME[:PORT], whatever else allows it; repeat")
	f.BoolVar(&req.Ask, "ask", false, "with --egress allowlist: hold a connection no rule decides until you approve it (paddock egress pending, approve, deny)")
	f.StringVar(&req.Workspace, "workspace", "", "host directory to bind at /workspace, read and written as its owner (default: on the session volume)")
	f.BoolVar(&req.UnsafeHostCode, "unsafe-host-code", false, "UNSAFE: let the box write what the host runs later in the workspace (.git/hooks, .git/config, .vscode, .envrc, …)")
	f.BoolVar(&req.NoProject, "no-project", false, "ignore the workspace's project file (.paddock.toml: image, setup, environment, ports, egress; docs/PROJECT.md)")
	f.BoolVar(&req.Clone, "clone", false, "with --workspace (a git repository): work in a clone of it in the box, on a branch of its own; the repository is never written by the box (paddock diff, paddock fetch)")
	f.BoolVar(&req.NoClone, "no-clone", false, "work on the live workspace even where the Runner's sessions.clone makes clone sessions the default")
	f.StringVar(&req.Branch, "branch", "", "with --clone: the clone's branch (default paddock/NAME)")
	f.StringVar(&req.From, "from", "", "with --clone: the branch, tag or commit of the repository it starts from (default HEAD)")
	f.StringArrayVar(&req.Secrets, "secret", nil, "give the session the use of a stored service credential: NAME:OWNER/REPO[:read|push] (github, gitlab) or NAME (header); the box gets a placeholder; repeat")
	f.StringArrayVar(&req.SecretSets, "secret-set", nil, "give the session every grant of a set named in the Runner's config (services.sets); repeat")
	f.StringArrayVar(&req.PushRefs, "push-ref", nil, "with a push grant: a branch (or NAME/*) the session may push besides its own paddock/NAME; repeat")
	f.StringVar(&req.Model, "model", "", "Claude model (claude --model)")
	f.StringVar(&req.Effort, "effort", "", "effort level: "+strings.Join(session.Efforts, ", "))
	f.StringVar(&req.CredentialMode, "credential-mode", "proxy", "proxy (a session token in the box) or direct (your setup token in the box; offline or anthropic egress, no workspace)")
	f.BoolVarP(&detach, "detach", "d", false, "print the session id and return")
	f.StringVar(&detachKeys, "detach-keys", DefaultDetachKeys, "the keys that detach from the terminal, as docker's: ctrl-X or a character, comma-separated")
	f.StringVar(&credFile, "credential-file", "", "this session's own Anthropic credential, from a file (- for stdin), instead of the Runner owner's")
	f.StringArrayVar(&relaySecrets, "relay-secret", nil, "this session's secret for a relay route of the Runner, NAME=FILE (- for stdin); repeat")
	f.StringVar(&req.CredentialKind, "credential-kind", "", "kind of --credential-file: oauth, api_key or auth_token (default: from its prefix)")
	f.IntVar(&req.RPM, "rpm", 0, "limit: API requests per minute (default from config sessions.rpm; 0: none)")
	f.IntVar(&req.MaxStreams, "max-streams", 0, "limit: concurrent API requests (default sessions.max_streams)")
	f.Int64Var(&req.TokenBudget, "budget", 0, "limit: tokens (input+output) the session may use (default sessions.token_budget)")
	f.Float64Var(&req.BudgetUSD, "budget-usd", 0, "limit: US dollars the session may spend, estimated at the config's [prices] (default sessions.budget_usd)")
	f.StringVar(&req.Restart, "restart", "on-failure", "when claude exits: no, on-failure (not after /exit) or always; restarts resume the conversation (at most 5 in 10 minutes, backoff 1s..60s)")
	setup.flags(f)
	return cmd
}

// readCredentialFile reads a credential from a file or stdin ("-"); never
// from the command line itself.
func readCredentialFile(path string, o IO) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		sv, err := readSecret(o)
		if err != nil {
			return "", err
		}
		return sv.Reveal(), nil
	}
	if b, err = os.ReadFile(path); err != nil {
		return "", fmt.Errorf("--credential-file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", usageError{fmt.Errorf("--credential-file %s is empty: %w", path, errdefs.ErrInvalid)}
	}
	return v, nil
}

func absDir(p string) (string, error) {
	abs, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") {
		p = abs + "/" + p
	}
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s does not exist; give an existing directory: %w", p, errdefs.ErrInvalid)
	case fi.Mode()&os.ModeSymlink != 0:
		return "", fmt.Errorf("%s is a symlink; give the directory it points to: %w", p, errdefs.ErrInvalid)
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a directory: %w", p, errdefs.ErrInvalid)
	}
	return p, nil
}

func lsCmd(g *globals, o IO) *cobra.Command {
	var asJSON, all, quiet, allUsers bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"ps", "list"},
		Short:   "List sessions",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			var ss []session.Session
			if allUsers {
				ss, err = c.AllSessions(cmd.Context())
			} else {
				ss, err = c.Sessions(cmd.Context())
			}
			if err != nil {
				return err
			}
			var shown []session.Session
			for _, s := range ss {
				if all || s.Live() {
					shown = append(shown, s)
				}
			}
			if quiet {
				for _, s := range shown {
					fmt.Fprintln(o.Stdout, s.ID)
				}
				return nil
			}
			if asJSON {
				if shown == nil {
					shown = []session.Session{}
				}
				enc := json.NewEncoder(o.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(shown)
			}
			if len(shown) == 0 && !allUsers {
				// An admin of a team server: say where the others' are.
				if others, err := c.AllSessions(cmd.Context()); err == nil {
					n := 0
					for _, s := range others {
						if s.Live() {
							n++
						}
					}
					if n > 0 {
						fmt.Fprintf(o.Stderr, "paddock: none of yours; %d of other people's: paddock ls --all-users\n", n)
					}
				}
			}
			tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tOWNER\tROLE\tSTATE\tACTIVITY\tRESTARTS\tBACKEND\tRUNTIME\tMODE\tEGRESS\tMODEL\tBRANCH\tCREATED\tREASON")
			now := time.Now()
			for _, s := range shown {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.ID[:8], dash(s.Owner.Name), dash(string(s.YourRole)),
					stateText(s), activityText(s, now), s.Restarts.Count, s.Backend, dash(s.Runtime), s.CredentialMode, s.Egress, dash(s.Model), branchText(s.Clone), ago(s.Created), reasonText(s))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include removed sessions")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print session ids only, one a line")
	cmd.Flags().BoolVar(&allUsers, "all-users", false, "every person's sessions, not only yours and those shared with you (admins)")
	return cmd
}

// branchText is a clone session's branch for ls: its name, how many
// commits it is beyond its base, '*' for changes not committed, and
// whether the host has it (fetched, merged); "-" for a session without a
// clone.
func branchText(c *session.Clone) string {
	if c == nil {
		return "-"
	}
	t := c.Branch
	if c.Ahead > 0 {
		t += fmt.Sprintf(" +%d", c.Ahead)
	}
	if c.Dirty {
		t += "*"
	}
	switch {
	case c.Head == "" || c.Ahead == 0:
	case c.Head == c.Merged:
		t += " merged"
	case c.Head == c.Fetched:
		t += " fetched"
	}
	return t
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

// simple builds sleep, wake and similar one-call commands; done says what
// became of each session.
func simple(g *globals, o IO, use, short string, call func(c *api.Client, cmd *cobra.Command, ref string) (session.Session, error), done func(session.Session) string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " NAME...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			var errs []error
			for _, ref := range args {
				s, err := call(c, cmd, ref)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(o.Stdout, done(s))
			}
			return errors.Join(errs...)
		},
	}
}

func sleepCmd(g *globals, o IO) *cobra.Command {
	var freeze bool
	cmd := simple(g, o, "sleep", "Stop a session's box; its token is revoked, the volume keeps the conversation (--freeze: keep its memory, wake in an instant)",
		func(c *api.Client, cmd *cobra.Command, ref string) (session.Session, error) {
			if freeze {
				return c.Freeze(cmd.Context(), ref)
			}
			return c.Sleep(cmd.Context(), ref)
		}, func(s session.Session) string {
			if s.Frozen {
				return fmt.Sprintf("%s is frozen: paddock wake %s (or attach) thaws it where it was", s.Name, s.Name)
			}
			return s.Name + " is asleep"
		})
	cmd.Flags().BoolVar(&freeze, "freeze", false, "freeze instead: the box and its processes' memory are kept, the processes stopped and the token suspended")
	cmd.SuggestFor = []string{"freeze", "pause", "suspend", "stop"} // what other tools call it
	return cmd
}

func wakeCmd(g *globals, o IO) *cobra.Command {
	cmd := simple(g, o, "wake", "Start a sleeping session again, or its claude that exited: claude --resume",
		func(c *api.Client, cmd *cobra.Command, ref string) (session.Session, error) {
			return c.Wake(cmd.Context(), ref)
		}, func(s session.Session) string { return s.Name + " is running" })
	cmd.Aliases = []string{"restart"}
	cmd.SuggestFor = []string{"thaw", "unpause", "resume", "start"}
	return cmd
}

func rmCmd(g *globals, o IO) *cobra.Command {
	var keep, force bool
	cmd := simple(g, o, "rm", "Remove a session: its box and (unless --keep-volume) its volume; -f if it runs",
		func(c *api.Client, cmd *cobra.Command, ref string) (session.Session, error) {
			if !force {
				// As docker rm: a running session is removed on purpose only.
				s, err := c.Session(cmd.Context(), ref)
				if err != nil {
					return s, err
				}
				if s.Observed == session.Running {
					return s, fmt.Errorf("session %s is running; paddock sleep %s first, or paddock rm -f %s: %w", s.Name, s.Name, s.Name, errdefs.ErrConflict)
				}
				// Its clone goes with it: work the host does not have is
				// dropped on purpose only.
				if c := s.Clone; c.Unsaved() {
					what := fmt.Sprintf("commits on %s (%d beyond its base) that were neither fetched nor merged since their last change", c.Branch, c.Ahead)
					switch {
					case c.Dirty && c.Head == c.Fetched || c.Dirty && c.Head == c.Merged || c.Dirty && c.Ahead == 0:
						what = "changes it has not committed"
					case c.Dirty:
						what += ", and changes it has not committed"
					}
					return s, fmt.Errorf("session %s has %s (as of %s): they go with it; paddock wake %s, then paddock fetch %s (or merge) keeps them; paddock rm -f %s drops them: %w",
						s.Name, what, ago(c.Checked), s.Name, s.Name, s.Name, errdefs.ErrConflict)
				}
			}
			return c.RemoveSession(cmd.Context(), ref, keep)
		}, func(s session.Session) string { return s.Name + " is removed" })
	cmd.Flags().BoolVar(&keep, "keep-volume", false, "keep the session volume (recorded; prune keeps it too unless --volumes)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove a running session too, or a clone session whose work was not fetched")
	cmd.SuggestFor = []string{"remove", "delete", "kill"}
	return cmd
}

func pruneCmd(g *globals, o IO) *cobra.Command {
	var volumes bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove every labelled box, volume and process that no session owns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.Prune(cmd.Context(), volumes)
			for _, ob := range res.Removed {
				fmt.Fprintf(o.Stdout, "removed %s %s (session %s)\n", ob.Kind, ob.ID, ob.Session)
			}
			if err == nil && len(res.Removed) == 0 {
				fmt.Fprintln(o.Stdout, "nothing to prune")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&volumes, "volumes", false, "also remove volumes that removed sessions kept")
	return cmd
}

func setCmd(g *globals, o IO) *cobra.Command {
	var model, effort string
	var budget int64
	var budgetUSD float64
	var eg egressFlags
	cmd := &cobra.Command{
		Use:   "set NAME [--model M] [--effort E] [--budget N] [--budget-usd D]",
		Short: "Change a session's model or effort (claude restarts with --resume), or its budgets in tokens and money (at once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.SetRequest
			if cmd.Flags().Changed("model") {
				req.Model = &model
			}
			if cmd.Flags().Changed("effort") {
				req.Effort = &effort
			}
			if cmd.Flags().Changed("budget") {
				req.TokenBudget = &budget
			}
			if cmd.Flags().Changed("budget-usd") {
				req.BudgetUSD = &budgetUSD
			}
			egressSet := setEgressFlags(cmd, &req, &eg)
			if req.Model == nil && req.Effort == nil && req.TokenBudget == nil && req.BudgetUSD == nil && !egressSet {
				return usageError{errors.New("nothing to set: give --model, --effort, --budget, --budget-usd or --egress (with --allow, --deny, --ask)")}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Set(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if req.Model != nil || req.Effort != nil || req.TokenBudget != nil || req.BudgetUSD != nil {
				fmt.Fprintf(o.Stdout, "%s: model %s, effort %s, token budget %s, budget %s\n", s.Name, dash(s.Model), dash(s.Effort),
					budgetText(s.Limits.TokenBudget), budgetUSDText(s.Limits.BudgetUSD))
			}
			if egressSet {
				fmt.Fprintf(o.Stdout, "%s: egress %s (at once; claude keeps running)\n", s.Name, s.EgressSummary())
			}
			return nil
		},
	}
	eg.add(cmd)
	cmd.Flags().StringVar(&model, "model", "", "model")
	cmd.Flags().StringVar(&effort, "effort", "", "effort: "+strings.Join(session.Efforts, ", "))
	cmd.Flags().Int64Var(&budget, "budget", 0, "token budget (input+output tokens; 0: none)")
	cmd.Flags().Float64Var(&budgetUSD, "budget-usd", 0, "budget in US dollars, estimated at the config's [prices] (0: none)")
	return cmd
}

func budgetText(n int64) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// stateText is the STATE column: frozen is a running session whose box is frozen.
func stateText(s session.Session) string {
	if s.Frozen && s.Observed == session.Running {
		return "frozen"
	}
	return string(s.Observed)
}

// noteProjectImage says, before a create that may take minutes, that the
// workspace's project file asks for an image the Runner may have to build
// first. It reads the file as the person can; what it cannot read it
// leaves to the Runner, which says what is wrong.
func noteProjectImage(o IO, req api.CreateRequest) {
	if req.NoProject || req.Workspace == "" {
		return
	}
	f, err := project.Load(req.Workspace)
	if err != nil || f == nil || (len(f.Image.Packages) == 0 && f.Image.Dockerfile == "") {
		return
	}
	if req.Backend == "local" {
		fmt.Fprintf(o.Stderr, "paddock run: a local box has this host's programs (its /usr, read-only): the [image] of %s is for docker sessions, and is not built\n", project.FileName)
		return
	}
	what := "the Dockerfile " + f.Image.Dockerfile
	if len(f.Image.Packages) > 0 {
		what = "the packages " + strings.Join(f.Image.Packages, ", ")
	}
	fmt.Fprintf(o.Stderr, "paddock run: %s asks for an image with %s; a docker session of a recipe not built yet waits while the Runner builds it (minutes, once; its log shows the steps)\n",
		project.FileName, what)
}
