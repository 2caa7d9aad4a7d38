package kubernetes

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/guest"
)

// selfTest runs the guest's pod self-test (`paddock guest selftest
// --pod-network`) in the session's new pod: from inside, the pod must
// reach nothing, neither the API server (its service address, and the
// address the Runner reaches it at) nor anything else. A pod that can is
// refused, whatever UnsafeUnenforcedNetworkPolicy says: that setting
// accepts a cluster that does not enforce policy, not a box that leaks.
func (b *Backend) selfTest(ctx context.Context, session string) error {
	argv := []string{GuestPath, "guest", "selftest", "--pod-network"}
	for _, a := range b.apiServerAddrs() {
		argv = append(argv, "--unreachable", a)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, code, err := b.run(ctx, boxName(session), argv)
	if err != nil {
		return fmt.Errorf("the network self-test in the pod of session %s: %v: %w", session, err, errdefs.ErrUnavailable)
	}
	if code == 0 {
		return nil
	}
	return fmt.Errorf("the pod of session %s reaches the network, so it is not started: %s: %w", session, guest.Failed(out), errdefs.ErrForbidden)
}

// apiServerAddrs is where the Runner reaches the API server, when that is
// an address a pod could also reach: an IP that is not loopback (a pod's
// loopback is its own).
func (b *Backend) apiServerAddrs() []string {
	u, err := url.Parse(b.rest.Host)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return []string{net.JoinHostPort(ip.String(), port)}
}
