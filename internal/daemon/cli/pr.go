package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
)

func prCmd(g *globals, o IO) *cobra.Command {
	var req api.PRRequest
	var bodyFile string
	cmd := &cobra.Command{
		Use:   "pr NAME [--title T] [--body B | --body-file F] [--base BRANCH] [--draft]",
		Short: "Push a session's branch and open a pull request, with your credential, from the host; the box is given nothing",
		Long: `Push the session's branch (a clone session's, fetched from its box first; a live
workspace's current branch) to the repository of its push grant, from this host, as the
repository's owner (no hook runs), with your stored service credential, and open a pull request.
The session needs a grant: paddock run --secret NAME:OWNER/REPO:push.

The title defaults to the branch's last commit's subject, the base to the repository's default
branch. The push and the pull request are lines of paddock logs --services NAME.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bodyFile != "" {
				if req.Body != "" {
					return usageError{fmt.Errorf("--body or --body-file: give one")}
				}
				var b []byte
				var err error
				if bodyFile == "-" {
					b, err = io.ReadAll(io.LimitReader(o.Stdin, 256<<10))
				} else {
					b, err = os.ReadFile(bodyFile)
				}
				if err != nil {
					return err
				}
				req.Body = string(b)
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.OpenPullRequest(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "pushed %s (%s) to %s and opened pull request #%d:\n%s\n", res.Branch, shortID(res.Commit), res.Repo, res.Number, res.URL)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Title, "title", "", "the pull request's title (default: the branch's last commit's subject)")
	f.StringVar(&req.Body, "body", "", "its description")
	f.StringVar(&bodyFile, "body-file", "", "read the description from this file (- for stdin)")
	f.StringVar(&req.Base, "base", "", "the branch to merge into (default: the repository's default branch)")
	f.BoolVar(&req.Draft, "draft", false, "open it as a draft")
	f.StringVar(&req.Secret, "secret", "", "the grant's secret, when the session has more than one GitHub push grant")
	return cmd
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
