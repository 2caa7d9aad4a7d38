package cli

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/spf13/cobra"
)

// devCmd holds tools for developing and testing paddock itself.
func devCmd(o IO) *cobra.Command {
	cmd := &cobra.Command{Use: "dev", Short: "Tools for paddock's own tests and benchmarks", Hidden: true}
	var listen string
	var creds []string
	var delay time.Duration
	fake := &cobra.Command{
		Use:   "fake-upstream",
		Short: "Serve the fake Messages API (streaming, a scripted Bash tool turn, 401 on a wrong credential)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "fake upstream on http://%s\n", ln.Addr())
			s := fakeapi.New(creds...)
			s.EventDelay = delay
			srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			go func() { <-cmd.Context().Done(); srv.Close() }()
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		},
	}
	fake.Flags().StringVar(&listen, "listen", "127.0.0.1:18080", "loopback address")
	fake.Flags().StringSliceVar(&creds, "credential", nil, "accepted credential (repeat; none accepts any)")
	fake.Flags().DurationVar(&delay, "event-delay", 0, "pause between SSE events")
	cmd.AddCommand(fake)
	return cmd
}
