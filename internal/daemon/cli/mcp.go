package cli

import (
	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/mcpserver"
)

func mcpCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve your sessions as MCP tools to another agent, over stdin and stdout",
		Long: `Run a Model Context Protocol server on stdin and stdout that gives an agent paddock's
sessions as tools: list_sessions, create_session (with a prompt), send_message, wait,
read_turn, diff, sleep, wake and remove. Every call is made as you, through the Runner's
socket, with your roles; the agent never holds a credential.

Add it to an MCP client's configuration as the command "paddock mcp", for example:
  claude mcp add paddock -- paddock mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			return mcpserver.Run(cmd.Context(), c)
		},
	}
}
