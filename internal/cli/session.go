package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/atomicfile"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/portable"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// sessionCmd groups what moves a session between Runners and backends.
func sessionCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Move a session to another Runner or backend: export it to a file, import it there",
		Long: `A session file carries a session's conversation (transcripts, subagents' too), Claude
Code's state in its home volume, its settings (model, effort, egress, limits), its activity
history and its decision log; never a credential or token. See docs/PORTABLE.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(sessionExportCmd(g, o), sessionImportCmd(g, o))
	return cmd
}

func sessionExportCmd(g *globals, o IO) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export NAME [-o FILE]",
		Short: "Write a session to a file (stdout, or -o FILE): its conversation, Claude state, settings and history",
		Long: `Write the session to a session file: to stdout (redirect it: paddock session export web > web.paddock)
or to -o FILE (mode 0600: it holds the whole conversation). A running session is read through
its box as claude runs; one asleep has its box started for the read, without claude, and
stopped again. Needs the operator role on the session (or its owner). What was left out
(credentials, what does not travel) is said on stderr. Import it with paddock session import.`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeSessions(g, o)(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				if f, ok := o.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
					return usageError{fmt.Errorf("a session file is binary; redirect stdout (paddock session export %s > %s.paddock) or give -o FILE", args[0], args[0])}
				}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := c.ExportSession(cmd.Context(), args[0], &buf); err != nil {
				return err
			}
			// What came is checked as an import would check it, and said.
			a, _, err := portable.Read(bytes.NewReader(buf.Bytes()), portable.Limits{})
			if err != nil {
				return fmt.Errorf("the Runner's session file does not read back: %w", err)
			}
			if output != "" {
				if err := atomicfile.Write(output, buf.Bytes(), 0o600); err != nil {
					return fmt.Errorf("write %s: %w", output, err)
				}
			} else if _, err := o.Stdout.Write(buf.Bytes()); err != nil {
				return err
			}
			for _, n := range a.Manifest.LeftOut {
				fmt.Fprintf(o.Stderr, "left out: %s\n", n)
			}
			where := "stdout"
			if output != "" {
				where = output
			}
			fmt.Fprintf(o.Stderr, "session %s exported to %s: conversation %s, %d files of Claude Code's state, %d decisions, %d KiB; import it with: paddock session import FILE\n",
				args[0], where, orNone(a.Manifest.Conversation), len(a.Files), len(a.Decisions), (buf.Len()+1023)>>10)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the session file here (mode 0600) instead of stdout")
	return cmd
}

func sessionImportCmd(g *globals, o IO) *cobra.Command {
	var req api.ImportRequest
	cmd := &cobra.Command{
		Use:   "import FILE [--name N] [--backend B]",
		Short: "Make a session of a session file (- for stdin) and resume its conversation",
		Long: `Make a new session, yours, of a file paddock session export wrote: its settings, Claude
Code's state and decision log come in, and claude starts with --resume of its conversation
(unless --no-start). The file is checked whole first: a damaged or altered one is refused,
and nothing is made. The file carries no workspace: give --workspace for one. Then: paddock
attach NAME.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Workspace != "" {
				abs, err := absDir(req.Workspace)
				if err != nil {
					return usageError{fmt.Errorf("--workspace: %w", err)}
				}
				req.Workspace = abs
			}
			var r io.Reader = o.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError{fmt.Errorf("open the session file: %w", err)}
				}
				defer f.Close()
				r = f
			}
			max := portable.DefaultLimits.MaxCompressed
			file, err := io.ReadAll(io.LimitReader(r, max+1))
			if err != nil {
				return fmt.Errorf("read the session file: %w", err)
			}
			if int64(len(file)) > max {
				return fmt.Errorf("%s is larger than the %d MiB a session file may have; nothing was imported: %w", args[0], max>>20, errdefs.ErrInvalid)
			}
			// Checked here first, for its errors before the Runner is asked;
			// the Runner checks it again.
			if _, _, err := portable.Read(bytes.NewReader(file), portable.Limits{}); err != nil {
				return err
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.ImportSession(cmd.Context(), req, bytes.NewReader(file))
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				fmt.Fprintf(o.Stderr, "import: %s\n", n)
			}
			s := res.Session
			fmt.Fprintln(o.Stdout, s.ID)
			state := "runs, resuming conversation " + orNone(res.Conversation) + "; attach with: paddock attach " + s.Name
			if req.NoStart {
				state = "is made, not started; start it with: paddock wake " + s.Name
			}
			fmt.Fprintf(o.Stderr, "session %s (%s) imported on %s: %d files of Claude Code's state, %d decisions; it %s\n",
				s.Name, s.ID[:min(8, len(s.ID))], s.Backend, res.Files, res.Decisions, state)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "name the session (default: the name in the file)")
	f.StringVar(&req.Backend, "backend", "", "local, docker or kubernetes (default from config: sessions.backend)")
	f.StringVar(&req.Workspace, "workspace", "", "host directory to bind at /workspace (the file carries none)")
	f.BoolVar(&req.NoStart, "no-start", false, "make the session and its volume without starting claude")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
