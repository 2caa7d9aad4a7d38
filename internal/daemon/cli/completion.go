package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// sessionArgs are the commands whose arguments are session names: their
// completion asks the Runner (cobra's `paddock completion bash|zsh|fish`
// scripts call `paddock __complete …`).
var sessionArgs = map[string]bool{"attach": true, "exec": true, "sleep": true, "wake": true, "rm": true,
	"set": true, "logs": true, "ledger": true, "usage": true, "wait": true, "inspect": true}

// completeSessions completes session names (of live sessions) from the
// Runner; with no Runner there is nothing to offer, and no error: a
// completion must never print one into the person's command line.
func completeSessions(g *globals, o IO) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		// exec takes one name, then its command after --.
		if len(args) > 0 && (cmd.Name() == "exec" || cmd.Name() == "logs" || cmd.Name() == "ledger" || cmd.Name() == "usage" || cmd.Name() == "set" || cmd.Name() == "wait" ||
			cmd.Name() == "attach" || cmd.Name() == "inspect") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.client(o)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		ss, err := c.Sessions(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, s := range ss {
			if s.Live() && strings.HasPrefix(s.Name, toComplete) {
				names = append(names, s.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// addCompletion turns on cobra's completion command and completes session
// names for the commands that take them.
func addCompletion(root *cobra.Command, g *globals, o IO) {
	root.CompletionOptions.DisableDefaultCmd = false
	for _, c := range root.Commands() {
		if sessionArgs[c.Name()] {
			c.ValidArgsFunction = completeSessions(g, o)
		}
	}
}
