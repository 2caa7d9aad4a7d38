package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/portable"
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
	var trust bool
	cmd := &cobra.Command{
		Use:   "import FILE [--name N] [--backend B] [--keep-egress] [--keep-credential-mode] [--keep-limits]",
		Short: "Make a session of a session file (- for stdin) and resume its conversation",
		Long: `Make a new session, yours, of a file paddock session export wrote: Claude Code's state and
its decision log come in, and claude starts with --resume of its conversation (unless
--no-start). The file is checked first, as it streams in: a damaged or altered one is refused,
and nothing is made. The file carries no workspace: give --workspace for one. Then: paddock
attach NAME.

A file is what someone handed you, and it may ask for anything: the import never takes a
setting that would weaken the session unless you say so. By default the session is proxy
mode, offline, with no allow rules, ask mode, policies or approvals of the file, and limits
no looser than this Runner's defaults; model, effort, restart policy and deny rules come from
the file. Every setting taken from the file is listed on stderr, and every one not taken with
the flag that takes it:

  --keep-egress           the file's egress posture (anthropic, allowlist), allow rules, ask
                          mode, policies and approvals; approvals are recorded as "imported
                          from FILE (approver said X)", never as the approver the file names
  --keep-credential-mode  the file's credential mode direct: your own credential goes into the
                          box, past the credential proxy and every limit and budget
  --keep-limits           the file's limits and budgets where looser than this Runner's
  --trust-settings        all three`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if trust {
				req.KeepEgress, req.KeepCredentialMode, req.KeepLimits = true, true, true
			}
			if req.Workspace != "" {
				abs, err := absDir(req.Workspace)
				if err != nil {
					return usageError{fmt.Errorf("--workspace: %w", err)}
				}
				req.Workspace = abs
			}
			body, err := openSessionFile(args[0], o.Stdin)
			if err != nil {
				return err
			}
			defer body.Close()
			req.Source = "stdin"
			if args[0] != "-" {
				req.Source = filepath.Base(args[0])
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.ImportSession(cmd.Context(), req, body)
			for _, a := range res.Adopted {
				fmt.Fprintf(o.Stderr, "import: adopted from the file: %s\n", a)
			}
			for _, d := range res.Declined {
				fmt.Fprintf(o.Stderr, "import: not adopted: %s\n", d)
			}
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
	f.BoolVar(&req.KeepEgress, "keep-egress", false, "take the file's egress posture, allow rules, ask mode, policies and approvals (recorded as imported)")
	f.BoolVar(&req.KeepCredentialMode, "keep-credential-mode", false, "take the file's credential mode direct (your credential in the box, past every budget)")
	f.BoolVar(&req.KeepLimits, "keep-limits", false, "take the file's limits and budgets where looser than this Runner's defaults")
	f.BoolVar(&trust, "trust-settings", false, "take every setting of the file: --keep-egress --keep-credential-mode --keep-limits")
	return cmd
}

// openSessionFile opens the session file to import (- for stdin) and
// checks it as it streams (portable.Check), for its errors before the
// Runner is asked; the Runner checks it again. A file is then read again
// from its start, streamed to the Runner; stdin, which cannot be, is
// held compressed (at most portable.DefaultLimits.MaxCompressed).
func openSessionFile(name string, stdin io.Reader) (io.ReadCloser, error) {
	max := portable.DefaultLimits.MaxCompressed
	if name == "-" {
		file, err := io.ReadAll(io.LimitReader(stdin, max+1))
		if err != nil {
			return nil, fmt.Errorf("read the session file: %w", err)
		}
		if int64(len(file)) > max {
			return nil, fmt.Errorf("stdin has more than the %d MiB a session file may have; nothing was imported: %w", max>>20, errdefs.ErrInvalid)
		}
		if _, err := portable.Check(bytes.NewReader(file), portable.Limits{}); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(file)), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, usageError{fmt.Errorf("open the session file: %w", err)}
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > max {
		f.Close()
		return nil, fmt.Errorf("%s is larger than the %d MiB a session file may have; nothing was imported: %w", name, max>>20, errdefs.ErrInvalid)
	}
	if _, err := portable.Check(f, portable.Limits{}); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil { // a pipe or FIFO: read it once more is not possible
		f.Close()
		return nil, usageError{fmt.Errorf("read the session file again after checking it (%v): give a regular file, or - with the file on stdin", err)}
	}
	return f, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
