package cli

import (
	"strings"

	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/spf13/cobra"
)

// guestCmd is `paddock guest …`: the guest's own command line
// (guest.Main), the one cmd/paddock-guest also runs, so a box behaves the
// same with either binary (an image built before paddock-guest existed
// carries the full paddock).
func guestCmd(o IO) *cobra.Command {
	return &cobra.Command{
		Use:                "guest",
		Short:              "PID 1 inside a box: reaps, runs processes, serves the channel (not for humans)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			args = withoutGlobalFlags(cmd.Root(), args)
			if code := guest.Main(cmd.Context(), append([]string{"guest"}, args...), o.Stdin, o.Stdout, o.Stderr); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}

// withoutGlobalFlags drops paddock's own persistent flags (--state-dir,
// --log-format, …) from args, which cobra leaves there for a command that
// parses its own flags; they mean nothing to the guest.
func withoutGlobalFlags(root *cobra.Command, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := root.PersistentFlags().Lookup(name)
		if !strings.HasPrefix(a, "--") || f == nil {
			out = append(out, a)
			continue
		}
		if !hasValue && f.Value.Type() != "bool" {
			i++ // its value
		}
	}
	return out
}
