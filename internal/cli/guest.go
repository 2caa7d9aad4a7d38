package cli

import (
	"os"

	"github.com/paddockhq/paddock/internal/guest"
	"github.com/spf13/cobra"
)

func guestCmd(o IO) *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    "guest",
		Short:  "PID 1 inside a box: reaps, runs processes, serves the channel (not for humans)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return guest.Run(cmd.Context(), guest.Options{Socket: socket, Reap: os.Getpid() == 1})
		},
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", guest.DefaultSocket, "the guest's socket inside the box")
	cmd.AddCommand(&cobra.Command{
		Use:   "bridge",
		Short: "Copy stdin/stdout to the guest's socket (the channel under docker exec -i)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return guest.Bridge(socket, o.Stdin, o.Stdout)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "put PATH...",
		Short: "Write NUL-separated parts of stdin to the files, atomically",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return guest.Put(o.Stdin, args)
		},
	})
	return cmd
}
