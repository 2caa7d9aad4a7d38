package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Check is one self-test result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// SelfTest checks, from inside the box, that its egress posture holds: no
// interface but lo, no route, no resolver that answers, a connect to an
// outside address failing locally (tried only when there is no route, so
// no packet can leave even if isolation were broken), and when proxy is
// set, that the egress proxy answers and refuses what it should.
//
// The checks that wait on the network (the lookup, the connect, the proxy)
// run side by side; the result lists every check in the same order.
func SelfTest(proxy string) []Check {
	var out []Check
	add := func(name string, ok bool, detail string) { out = append(out, Check{name, ok, detail}) }

	ifs, err := interfaces()
	add("only-loopback", err == nil && len(ifs) == 1 && ifs[0] == "lo", fmt.Sprintf("interfaces %v %v", ifs, errString(err)))

	routes := countRoutes()
	add("no-route", routes == 0, fmt.Sprintf("%d routes besides loopback", routes))

	var resolver, connect, proxied Check
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, "paddock-selftest.example.com")
		cancel()
		resolver = Check{"no-resolver", err != nil, fmt.Sprintf("lookup gave %v %v", addrs, errString(err))}
	})
	if routes == 0 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", "192.0.2.1:80", time.Second) // TEST-NET-1
			if c != nil {
				c.Close()
			}
			local := errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
			connect = Check{"connect-fails-locally", err != nil && local, "connect 192.0.2.1:80: " + errString(err)}
		})
	} else {
		connect = Check{"connect-fails-locally", false, "not tried: the box has a route"}
	}
	if proxy != "" {
		wg.Go(func() {
			ok, detail := proxyRefuses(proxy)
			proxied = Check{"egress-proxy-answers", ok, detail}
		})
	}
	wg.Wait()
	out = append(out, resolver, connect)
	if proxy != "" {
		out = append(out, proxied)
	}
	return out
}

// ParseChecks reads the self-test's output, one JSON Check a line; lines
// that are not are skipped.
func ParseChecks(out string) []Check {
	var checks []Check
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var c Check
		if json.Unmarshal([]byte(l), &c) == nil && c.Name != "" {
			checks = append(checks, c)
		}
	}
	return checks
}

// Passed reports whether the self-test's output holds checks and every
// one passed; an empty or garbled output is no pass.
func Passed(out string) bool {
	checks := ParseChecks(out)
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return len(checks) > 0
}

// Failed names the failed checks of the self-test's output ("name:
// detail; …"), or gives the output itself when it holds no check.
func Failed(out string) string {
	var failed []string
	for _, c := range ParseChecks(out) {
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(out)
	}
	return strings.Join(failed, "; ")
}

func proxyRefuses(proxy string) (bool, string) {
	c, err := net.DialTimeout("tcp", proxy, 2*time.Second)
	if err != nil {
		return false, "no egress proxy at " + proxy + ": " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT paddock-selftest.invalid:443 HTTP/1.1\r\nHost: paddock-selftest.invalid:443\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return false, "egress proxy did not answer: " + err.Error()
	}
	if !strings.Contains(line, " 403 ") {
		return false, "egress proxy let a name outside the policy through: " + strings.TrimSpace(line)
	}
	return true, "egress proxy answers and refuses names outside the policy"
}

func interfaces() ([]string, error) {
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return nil, err
	}
	var out []string
	for i, l := range strings.Split(string(b), "\n") {
		if i < 2 || !strings.Contains(l, ":") {
			continue
		}
		out = append(out, strings.TrimSpace(strings.SplitN(l, ":", 2)[0]))
	}
	return out, nil
}

func countRoutes() int {
	n := 0
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		n += max(0, len(strings.Split(strings.TrimSpace(string(b)), "\n"))-1)
	}
	if b, err := os.ReadFile("/proc/net/ipv6_route"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" && !strings.HasSuffix(strings.TrimSpace(l), " lo") {
				n++
			}
		}
	}
	return n
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
