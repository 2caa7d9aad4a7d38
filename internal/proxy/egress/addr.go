package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// blocked lists the address ranges the proxy never dials, with the class
// each belongs to.
var blocked = []struct {
	prefix netip.Prefix
	class  string
}{
	// Most specific first: metadata addresses sit inside wider classes.
	{netip.MustParsePrefix("169.254.169.254/32"), "metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "ipv4-mapped"},
	{netip.MustParsePrefix("::/96"), "ipv4-compatible"},
	{netip.MustParsePrefix("64:ff9b::/96"), "nat64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "nat64"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001::/32"), "teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Classify says whether an address may be dialed; when not, the class
// names why (loopback, private, link-local, cgnat, metadata, multicast,
// unspecified, IPv6 forms that embed IPv4, reserved ranges, and "host":
// an address of the Runner's host itself, public ones included, where its
// own services listen).
func Classify(a netip.Addr) (ok bool, class string) {
	if !a.IsValid() {
		return false, "invalid"
	}
	if a.Zone() != "" {
		return false, "scoped"
	}
	for _, b := range blocked {
		if b.prefix.Contains(a) {
			return false, b.class
		}
	}
	if a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false, "broadcast"
	}
	if hostAddr(a) {
		return false, "host"
	}
	return true, "public"
}

// hostAddrs lists the addresses of the host's interfaces (a variable for
// tests). hostTTL is how long a listing is used before it is made again:
// an address the host gains is refused within that time.
var (
	hostAddrs = func() []netip.Addr {
		ifas, err := net.InterfaceAddrs()
		if err != nil {
			return nil
		}
		var out []netip.Addr
		for _, ifa := range ifas {
			if n, ok := ifa.(*net.IPNet); ok {
				if a, ok := netip.AddrFromSlice(n.IP); ok {
					out = append(out, a.Unmap())
				}
			}
		}
		return out
	}
	hostTTL = 5 * time.Second
	host    struct {
		sync.Mutex
		at    time.Time
		addrs map[netip.Addr]bool
	}
)

// hostAddr reports whether a is an address of the host's own.
func hostAddr(a netip.Addr) bool {
	host.Lock()
	defer host.Unlock()
	if host.addrs == nil || time.Since(host.at) > hostTTL {
		host.addrs = map[netip.Addr]bool{}
		for _, h := range hostAddrs() {
			host.addrs[h] = true
		}
		host.at = time.Now()
	}
	return host.addrs[a.Unmap()]
}
