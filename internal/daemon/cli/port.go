package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func portCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port NAME BOXPORT[:HOSTPORT]",
		Short: "Publish a port of a session's box on this host's loopback (a dev server's preview)",
		Long: `Publish a TCP port of a session's box on 127.0.0.1 of this host: a dev server that claude
starts in the box (npm run dev on 5173, go run on 8080) answers there. The box keeps no
network interface but its own loopback; each connection is carried by the Runner over the
box's channel. Without HOSTPORT a free one is taken and printed; the session keeps it, so
the port comes back at the same place when the session wakes. The port closes when the
session sleeps, and opens again when it wakes.

Every account on this host can connect to a published port, as to any port on 127.0.0.1;
the web page's preview link (paddock web) goes through its login instead. Needs to be an
operator of the session.`,
		Example: `  paddock port fix-login 5173          # a free host port, printed
  paddock port fix-login 5173:8000     # http://127.0.0.1:8000
  paddock port ls fix-login
  paddock port rm fix-login 5173`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parsePortSpec(args[1])
			if err != nil {
				return usageError{err}
			}
			if err := req.Check(); err != nil {
				return usageError{err}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Publish(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			for _, p := range s.Ports {
				if p.Box != req.Box {
					continue
				}
				if p.Open {
					fmt.Fprintf(o.Stdout, "http://127.0.0.1:%d\n", p.Host)
					fmt.Fprintf(o.Stderr, "box port %d of %s answers on 127.0.0.1:%d while the session runs\n", p.Box, s.Name, p.Host)
				} else {
					fmt.Fprintf(o.Stderr, "box port %d of %s will open on 127.0.0.1 when it wakes (paddock wake %s)\n", p.Box, s.Name, s.Name)
				}
			}
			return nil
		},
	}
	ls := &cobra.Command{
		Use:               "ls NAME",
		Short:             "List a session's published ports",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ps, err := c.Ports(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printPorts(o, ps)
			return nil
		},
	}
	rm := &cobra.Command{
		Use:               "rm NAME BOXPORT",
		Short:             "Take a published port back: its host port closes",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			box, err := strconv.Atoi(args[1])
			if err != nil {
				return usageError{fmt.Errorf("box port %q is not a number", args[1])}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			s, err := c.Unpublish(cmd.Context(), args[0], box)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "box port %d of %s is no longer published\n", box, s.Name)
			return nil
		},
	}
	cmd.AddCommand(ls, rm)
	cmd.SuggestFor = []string{"expose", "publish", "forward", "preview"}
	return cmd
}

// parsePortSpec reads BOXPORT[:HOSTPORT].
func parsePortSpec(spec string) (api.PortRequest, error) {
	boxS, hostS, hasHost := strings.Cut(spec, ":")
	box, err := strconv.Atoi(boxS)
	if err != nil {
		return api.PortRequest{}, fmt.Errorf("%q is not BOXPORT[:HOSTPORT], e.g. 5173 or 5173:8000", spec)
	}
	req := api.PortRequest{Box: box}
	if hasHost {
		if req.Host, err = strconv.Atoi(hostS); err != nil {
			return api.PortRequest{}, fmt.Errorf("%q is not BOXPORT[:HOSTPORT], e.g. 5173 or 5173:8000", spec)
		}
		if req.Host == 0 {
			return api.PortRequest{}, fmt.Errorf("host port 0: leave HOSTPORT out for a free one")
		}
	}
	return req, nil
}

// printPorts writes a table of ports.
func printPorts(o IO, ps []session.Port) {
	if len(ps) == 0 {
		fmt.Fprintln(o.Stderr, "no published ports (paddock port NAME BOXPORT publishes one)")
		return
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOX\tHOST\tSTATE")
	for _, p := range ps {
		state := "closed: the session does not run"
		switch {
		case p.Open:
			state = fmt.Sprintf("open: http://127.0.0.1:%d", p.Host)
		case p.Error != "":
			state = "not open: " + p.Error
		}
		host := strconv.Itoa(p.Host)
		if p.Host == 0 {
			host = "(any)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", p.Box, host, state)
	}
	tw.Flush()
}
