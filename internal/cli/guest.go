package cli

import (
	"github.com/paddockhq/paddock/internal/guest"
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
			if code := guest.Main(cmd.Context(), append([]string{"guest"}, args...), o.Stdin, o.Stdout, o.Stderr); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
