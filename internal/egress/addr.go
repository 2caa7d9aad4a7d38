package egress

import "net/netip"

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
// unspecified, IPv6 forms that embed IPv4, reserved ranges).
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
	return true, "public"
}
