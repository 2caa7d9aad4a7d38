package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// SelfTestPod is SelfTest for a box whose network is its cluster's (a
// Kubernetes pod): it has an interface, maybe routes, and a NetworkPolicy
// outside it must keep it from reaching anything. It checks that no
// resolver answers, and that a connect to each address fails without an
// answer: an unreachable network or host, or a timeout (a policy drops
// packets silently). A refused connect fails the check: something answered.
// The addresses are unreachable, the API server's service address from the
// environment (KUBERNETES_SERVICE_HOST, set in every pod), and TEST-NET-1.
// When proxy is set, the egress proxy must answer as in SelfTest.
func SelfTestPod(proxy string, unreachable []string) []Check {
	var out []Check
	add := func(name string, ok bool, detail string) { out = append(out, Check{name, ok, detail}) }
	ifs, err := interfaces()
	add("interfaces", err == nil, fmt.Sprintf("interfaces %v %v (the pod's network; policy confines it)", ifs, errString(err)))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	addrs, err := net.DefaultResolver.LookupHost(ctx, "paddock-selftest.example.com")
	cancel()
	add("no-resolver", err != nil, fmt.Sprintf("lookup gave %v %v", addrs, errString(err)))

	targets := append([]string{"192.0.2.1:80"}, unreachable...)
	if h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		targets = append(targets, net.JoinHostPort(h, p))
	}
	results := make([]Check, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, detail := unreached(t)
			results[i] = Check{"unreachable " + t, ok, detail}
		}()
	}
	wg.Wait()
	out = append(out, results...)
	if proxy != "" {
		ok, detail := proxyRefuses(proxy)
		add("egress-proxy-answers", ok, detail)
	}
	return out
}

// unreached: a connect to addr got no answer.
func unreached(addr string) (bool, string) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if c != nil {
		c.Close()
	}
	var ne net.Error
	switch {
	case err == nil:
		return false, "connected to " + addr
	case errors.Is(err, syscall.ECONNREFUSED):
		return false, addr + " answered (refused): the pod reaches it"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return true, "connect " + addr + ": " + err.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return true, "connect " + addr + ": no answer in 2s"
	}
	return false, "connect " + addr + ": " + err.Error()
}
