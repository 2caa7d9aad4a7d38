package cli

import (
	"encoding/json"
	"os"

	"github.com/paddockhq/paddock/internal/boxfiles"
	"github.com/paddockhq/paddock/internal/guest"
	"github.com/paddockhq/paddock/internal/seccomp"
	"github.com/spf13/cobra"
)

func guestCmd(o IO) *cobra.Command {
	var socket string
	var setIDGuard bool
	cmd := &cobra.Command{
		Use:    "guest",
		Short:  "PID 1 inside a box: reaps, runs processes, serves the channel (not for humans)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything runs in the box: every process it starts
			// inherits the filter, and none can take it off.
			if setIDGuard {
				if err := seccomp.Install(); err != nil {
					return err
				}
			}
			return guest.Run(cmd.Context(), guest.Options{Socket: socket, Reap: os.Getpid() == 1})
		},
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", guest.DefaultSocket, "the guest's socket inside the box")
	cmd.Flags().BoolVar(&setIDGuard, "setid-guard", false, "load the seccomp filter that refuses setuid and setgid files before serving (Docker boxes; bwrap loads it for local ones)")
	cmd.AddCommand(&cobra.Command{
		Use:   "bridge",
		Short: "Copy stdin/stdout to the guest's socket (the channel under docker exec -i)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return guest.Bridge(socket, o.Stdin, o.Stdout)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "hook EVENT",
		Short: "Report a Claude Code hook (stdin: its JSON) or tmux's pane-died to the guest; never fails, prints nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			guest.Hook(socket, args[0], o.Stdin)
			return nil
		},
	})
	var proxy string
	var podNetwork bool
	var unreachable []string
	selftest := &cobra.Command{
		Use:   "selftest",
		Short: "Check from inside the box that its egress posture holds; JSON out, exit 1 on a leak",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			checks := guest.SelfTest(proxy)
			if podNetwork {
				checks = guest.SelfTestPod(proxy, unreachable)
			}
			enc := json.NewEncoder(o.Stdout)
			for _, c := range checks {
				if err := enc.Encode(c); err != nil {
					return err
				}
			}
			for _, c := range checks {
				if !c.OK {
					return exitError{1}
				}
			}
			return nil
		},
	}
	selftest.Flags().StringVar(&proxy, "proxy", "", "the egress proxy address in the box, if the posture has one")
	selftest.Flags().BoolVar(&podNetwork, "pod-network", false, "the box has its cluster's network (a Kubernetes pod): check that it reaches nothing instead of that it has no interface")
	selftest.Flags().StringArrayVar(&unreachable, "unreachable", nil, "with --pod-network, an address (host:port) the box must not reach; repeatable")
	cmd.AddCommand(selftest)
	cmd.AddCommand(&cobra.Command{
		Use:   "put PATH...",
		Short: "Write NUL-separated parts of stdin to the files, atomically",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return guest.Put(o.Stdin, args)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "unpack DIR",
		Short: "Write the regular files of a tar stream on stdin under DIR (boxfiles: no links, no .., modes 0600/0644/0755)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return boxfiles.Unpack(o.Stdin, args[0])
		},
	})
	return cmd
}
