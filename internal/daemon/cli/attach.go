package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func attachCmd(g *globals, o IO) *cobra.Command {
	var readOnly bool
	var keys string
	cmd := &cobra.Command{
		Use:   "attach NAME",
		Short: "Attach to a session's Claude Code terminal, shared with others (detach: ctrl-p ctrl-q, or --detach-keys)",
		Long: `Join a session's terminal through its mirror: you get the screen as it is, then the live
output. Drivers type; observers watch and their keys go nowhere. You join with the best role
you have on the session (its owner, operators and drivers drive; a session shared with you as
observer is watched), or as an observer with --read-only.
Several people may attach at once; the terminal takes the smallest driver's size.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := parseDetachKeys(keys); err != nil {
				return usageError{err}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			role := "" // the best the caller has
			if readOnly {
				role = "observer"
			}
			return attachAs(cmd, c, o, args[0], role, keys)
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "watch as an observer: keys are not sent")
	cmd.Flags().StringVar(&keys, "detach-keys", DefaultDetachKeys, "the keys that detach, as docker's: ctrl-X or a character, comma-separated")
	return cmd
}

func execCmd(g *globals, o IO) *cobra.Command {
	var interactive, tty bool
	cmd := &cobra.Command{
		Use:   "exec [-it] NAME -- CMD [ARG...]",
		Short: "Run a command in a session's box with Claude Code's environment; its exit code is paddock's",
		Long: `Run a command in a session's box, with Claude Code's environment, in /workspace. Its exit
code is paddock's, as with docker exec: 127 when the command is not found in the box, 126 when
it cannot be run there, and 125 when paddock itself fails (no Runner, no such session, a bad
option after the command line was read).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return execExit(o, func() error {
				if dash := cmd.ArgsLenAtDash(); dash != 1 {
					return usageError{errors.New("write the command after --: paddock exec NAME -- CMD")}
				}
				// As docker exec -t: a terminal for the command needs one here.
				if in, ok := o.Stdin.(*os.File); tty && (!ok || !term.IsTerminal(int(in.Fd()))) {
					return usageError{errors.New("-t: the input is not a terminal; leave out -t (with -i to pass stdin), or run from a terminal")}
				}
				c, err := g.client(o)
				if err != nil {
					return err
				}
				return execStream(cmd, c, o, args[0], api.ExecRequest{Argv: args[1:], TTY: tty}, interactive)
			}())
		},
	}
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pass stdin")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run on a terminal")
	return cmd
}

// execExit gives exec's exit code as docker exec does: the command's own;
// 127 when it is not found in the box and 126 when it cannot be run there;
// 125 for any failure of paddock's own (printed here, since an exitError
// is not).
func execExit(o IO, err error) error {
	var ee exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	fmt.Fprintln(o.Stderr, "paddock:", err)
	switch {
	case errors.Is(err, errdefs.ErrCommandNotFound):
		return exitError{127}
	case errors.Is(err, errdefs.ErrCommandCannotRun):
		return exitError{126}
	}
	return exitError{125}
}

func attach(cmd *cobra.Command, c *api.Client, o IO, ref, keys string) error {
	return attachAs(cmd, c, o, ref, "driver", keys)
}

// attachAs joins the session's terminal mirror; keys (docker's
// --detach-keys syntax) detach.
func attachAs(cmd *cobra.Command, c *api.Client, o IO, ref, role, keys string) error {
	detach, err := parseDetachKeys(keys)
	if err != nil {
		return usageError{err}
	}
	open := func(rows, cols uint16) (*api.ExecStream, error) {
		return c.Attach(cmd.Context(), ref, api.AttachRequest{Role: role, Rows: rows, Cols: cols})
	}
	err = runStream(cmd, o, ref, open, true, true, detach, role == "observer")
	var ee exitError
	if err != nil && !errors.As(err, &ee) {
		return err
	}
	// The terminal ended (not an error of attach): say why when the
	// session no longer runs as it did (frozen, asleep, removed). A sleep
	// or rm cuts the terminal before it is done: wait for it (Ending).
	s, serr := c.Session(cmd.Context(), ref)
	for deadline := time.Now().Add(endingWait); serr == nil && s.Ending != "" && time.Now().Before(deadline); {
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		s, serr = c.Session(cmd.Context(), ref)
	}
	if serr == nil {
		switch {
		case s.Frozen:
			fmt.Fprintf(o.Stderr, "\r\n%s was frozen; paddock attach %s (or paddock wake %s) thaws it\r\n", ref, ref, ref)
		case s.Observed == session.Removed:
			fmt.Fprintf(o.Stderr, "\r\n%s was removed\r\n", ref)
		case s.Observed != session.Running && s.Reason != "":
			fmt.Fprintf(o.Stderr, "\r\n%s is %s: %s\r\n", ref, s.Observed, s.Reason)
		case s.Observed != session.Running:
			fmt.Fprintf(o.Stderr, "\r\n%s is %s\r\n", ref, s.Observed)
		}
	} else if errdefs.Is(serr, errdefs.ErrNotFound) {
		fmt.Fprintf(o.Stderr, "\r\n%s was removed\r\n", ref)
	}
	return nil
}

// endingWait bounds how long attach waits, after its terminal was cut,
// for the sleep or rm that cut it to finish (a box gets 5 s to stop).
const endingWait = 30 * time.Second

// terminalReset leaves the alternate screen and turns off mouse
// reporting, bracketed paste and focus events; shows the cursor; resets colours.
const terminalReset = "\x1b[?1049l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1004l\x1b[?25h\x1b[0m"

// execStream runs an exec over the API and wires the terminal.
func execStream(cmd *cobra.Command, c *api.Client, o IO, ref string, req api.ExecRequest, interactive bool) error {
	open := func(rows, cols uint16) (*api.ExecStream, error) {
		req.Rows, req.Cols = rows, cols
		return c.Exec(cmd.Context(), ref, req)
	}
	return runStream(cmd, o, ref, open, req.TTY, interactive, nil, false)
}

// runStream opens a framed stream (exec or attach) and wires this
// terminal to it: raw mode and resizes on a TTY, stdin with the detach
// sequence, output to stdout/stderr. Keys are not sent when readOnly.
func runStream(cmd *cobra.Command, o IO, ref string, open func(rows, cols uint16) (*api.ExecStream, error), tty, interactive bool, detach []byte, readOnly bool) error {
	in, isFile := o.Stdin.(*os.File)
	termIn := isFile && term.IsTerminal(int(in.Fd()))
	var rows, cols uint16
	if tty && termIn {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil {
			cols, rows = uint16(w), uint16(h)
		}
	}
	es, err := open(rows, cols)
	if err != nil {
		return err
	}
	defer es.Close()
	if es.Role == "observer" && !readOnly {
		readOnly = true
		fmt.Fprintf(o.Stderr, "paddock: you are an observer of %s: you watch, and your keys are not sent\r\n", ref)
	}
	if tty && termIn {
		old, err := term.MakeRaw(int(in.Fd()))
		if err == nil {
			defer term.Restore(int(in.Fd()), old)
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(int(in.Fd())); err == nil {
					_ = es.Resize(uint16(h), uint16(w))
				}
			}
		}()
	}
	detached := make(chan struct{})
	if interactive {
		go func() {
			copyStdin(es, o.Stdin, detach, readOnly, detached)
		}()
	} else {
		_ = es.CloseStdin()
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := es.Copy(o.Stdout, o.Stderr)
		done <- result{code, err}
	}()
	select {
	case <-detached:
		es.Close()
		if tty {
			// The tmux client was cut off, not detached: undo what it set
			// on this terminal (alternate screen, mouse, paste, cursor).
			fmt.Fprint(o.Stdout, terminalReset)
		}
		fmt.Fprintf(o.Stderr, "\r\ndetached from %s; it keeps running (paddock attach %s)\r\n", ref, ref)
		return nil
	case r := <-done:
		if r.err != nil {
			return r.err
		}
		if r.code != 0 {
			return exitError{r.code}
		}
		return nil
	}
}

// copyStdin sends stdin to the stream, watching for the detach sequence
// detach (nil: none; then the end of stdin closes the command's).
func copyStdin(es *api.ExecStream, in io.Reader, detach []byte, readOnly bool, detached chan struct{}) {
	buf := make([]byte, 32<<10)
	var d *detacher
	if detach != nil {
		d = &detacher{seq: detach}
	}
	for {
		n, err := in.Read(buf)
		if n > 0 {
			out, done := buf[:n], false
			if d != nil {
				out, done = d.feed(buf[:n])
			}
			if len(out) > 0 && !readOnly {
				if _, err := es.Write(out); err != nil {
					return
				}
			}
			if done {
				close(detached)
				return
			}
		}
		if err != nil {
			if d == nil {
				_ = es.CloseStdin()
			}
			return
		}
	}
}
