package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
)

func projectCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Read and accept a workspace's project file (.paddock.toml)",
		Long: `A workspace's project file (.paddock.toml, docs/PROJECT.md) names what its sessions need: the
image's packages or Dockerfile, a setup command, environment variables, ports to publish,
the egress, model and effort. A box can write its workspace, so the file is used only as you
accepted it: paddock run refuses a new or changed one and shows what changed; read it, then
accept it with paddock project allow. The Runner keeps what you accepted.`,
	}
	show := &cobra.Command{
		Use:   "show [DIR]",
		Short: "Show the project file of DIR (default: .) and what changed since you accepted it",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ws, err := projectClient(g, o, args)
			if err != nil {
				return err
			}
			v, err := c.Project(cmd.Context(), ws)
			if err != nil {
				return err
			}
			printProject(o, v)
			return nil
		},
	}
	allow := &cobra.Command{
		Use:   "allow [DIR]",
		Short: "Accept the project file of DIR (default: .) as it is now, after showing what changed",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ws, err := projectClient(g, o, args)
			if err != nil {
				return err
			}
			v, err := c.Project(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if !v.Exists {
				return fmt.Errorf("%s has no .paddock.toml to accept (docs/PROJECT.md says what one holds)", v.Workspace)
			}
			if v.Status == "allowed" {
				fmt.Fprintf(o.Stderr, "%s/.paddock.toml is accepted as it is; nothing to do\n", v.Workspace)
				return nil
			}
			printProject(o, v)
			// The sum of what was shown: a file changed since is refused.
			if _, err := c.AllowProject(cmd.Context(), api.ProjectRequest{Workspace: v.Workspace, Sum: v.Sum}); err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "accepted %s/.paddock.toml as shown; sessions on %s use it until it changes\n", v.Workspace, v.Workspace)
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke [DIR]",
		Short: "Take back the acceptance of DIR's project file: the next session asks again",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ws, err := projectClient(g, o, args)
			if err != nil {
				return err
			}
			if _, err := c.RevokeProject(cmd.Context(), api.ProjectRequest{Workspace: ws}); err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "the project file of %s is no longer accepted; paddock run there refuses it until paddock project allow\n", ws)
			return nil
		},
	}
	cmd.AddCommand(show, allow, revoke)
	return cmd
}

// projectClient is the Runner's client and the workspace args name
// (absolute; default the working directory).
func projectClient(g *globals, o IO, args []string) (*api.Client, string, error) {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	ws, err := absDir(dir)
	if err != nil {
		return nil, "", usageError{err}
	}
	c, err := g.client(o)
	if err != nil {
		return nil, "", err
	}
	return c, ws, nil
}

// printProject says what the Runner sees of a workspace's project file:
// the diff goes to stdout, the words to stderr.
func printProject(o IO, v api.ProjectView) {
	switch {
	case !v.Exists:
		fmt.Fprintf(o.Stderr, "%s has no .paddock.toml\n", v.Workspace)
	case v.Status == "allowed":
		fmt.Fprintf(o.Stderr, "%s/.paddock.toml: accepted as it is (sha256 %s)\n", v.Workspace, v.Sum)
	case v.Status == "new":
		fmt.Fprintf(o.Stderr, "%s/.paddock.toml is new to paddock; the whole file (and the Dockerfile it names, if any), then `paddock project allow %s` to use it:\n", v.Workspace, v.Workspace)
		fmt.Fprint(o.Stdout, v.Diff)
	default:
		fmt.Fprintf(o.Stderr, "%s/.paddock.toml changed since you accepted it (its Dockerfile included); `paddock project allow %s` uses it as it is now:\n", v.Workspace, v.Workspace)
		fmt.Fprint(o.Stdout, v.Diff)
	}
}
