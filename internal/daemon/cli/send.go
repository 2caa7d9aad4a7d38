package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/message"
)

func sendCmd(g *globals, o IO) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "send NAME [MESSAGE...] [--file FILE|-]",
		Short: "Send a message to a running session's claude, as if typed at its prompt",
		Long: fmt.Sprintf(`Type a message into the claude of a running session and submit it, without attaching its
terminal: the words after NAME, or a file's text (--file FILE, - for stdin, which is also
read when no words are given and stdin is not a terminal). It goes in as your own words, in
short pastes, so its lines stay one message; it may hold tabs (claude gets four spaces, as
from any paste) and newlines but no other control character, and at most %d KiB. A message
that starts with / is a Claude Code command, as at its prompt.

paddock send answers once claude took the message. When claude is in a turn, the message
waits in Claude Code's own queue, as one typed then would, and paddock send says so.
Needs to be a driver of the session (paddock share NAME PERSON --role driver).`, message.MaxBytes>>10),
		Example: `  paddock send fix-login "the test still fails: run go test ./... and fix what it says"
  git diff | paddock send fix-login --file -`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := sendText(o, args[1:], file)
			if err != nil {
				return err
			}
			if _, err := message.Parse(text); err != nil { // as the Runner would, before asking it
				return err
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.SendMessage(cmd.Context(), args[0], api.MessageRequest{Text: text})
			if err != nil {
				return err
			}
			if res.Queued {
				fmt.Fprintf(o.Stdout, "sent to %s: claude is in a turn, so the message waits in its queue (%d bytes)\n", res.Session.Name, res.Bytes)
			} else {
				fmt.Fprintf(o.Stdout, "sent to %s: claude took the message (%d bytes)\n", res.Session.Name, res.Bytes)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "send this file's text (- for stdin)")
	cmd.SuggestFor = []string{"say", "tell", "message", "prompt"}
	return cmd
}

// sendText is the message: words, a file, or stdin.
func sendText(o IO, words []string, file string) (string, error) {
	var r io.Reader
	switch {
	case len(words) > 0 && file != "":
		return "", usageError{errors.New("give the message as words or with --file, not both")}
	case len(words) > 0:
		return strings.Join(words, " "), nil
	case file == "-" || file == "":
		if f, ok := o.Stdin.(*os.File); file == "" && (o.Stdin == nil || ok && term.IsTerminal(int(f.Fd()))) {
			return "", usageError{errors.New("no message: give it after the session's name, or with --file FILE (- for stdin)")}
		}
		r = o.Stdin
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", usageError{fmt.Errorf("--file: %w", err)}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, message.MaxBytes+1))
	if err != nil {
		return "", fmt.Errorf("read the message: %w", err)
	}
	return string(b), nil
}
