package egress

import (
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"API.Anthropic.COM":     "api.anthropic.com",
		"api.anthropic.com.":    "api.anthropic.com",
		"bücher.example":        "xn--bcher-kva.example",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"a-b.c":                 "a-b.c",
	} {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ".", "a..b", "127.0.0.1", "2130706433", "0x7f000001", "a_b.com", "a b", "ex ample.com",
		"[::1]", "::1", "evil.com\x00.good.com", strings.Repeat("a", 64) + ".com", "a.b.c.1"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want error", bad, got)
		}
	}
}

func TestPolicy(t *testing.T) {
	p, err := NewPolicy("allowlist", []string{"allowed.com", "*.pkg.example:8443", "registry.npmjs.org", "blocked.allowed.com"}, []string{"blocked.allowed.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"allowed.com", 443, true},
		{"ALLOWED.COM.", 443, true},
		{"allowed.com", 80, false},   // wrong port
		{"allowed.com", 8443, false}, // wrong port
		{"allowed.com.evil.test", 443, false},
		{"evilallowed.com", 443, false},
		{"sub.allowed.com", 443, false}, // exact rules do not cover subdomains
		{"a.pkg.example", 8443, true},
		{"a.b.pkg.example", 8443, true},
		{"pkg.example", 8443, false}, // a wildcard does not cover its base
		{"a.pkg.example", 443, false},
		{"xpkg.example", 8443, false},
		{"blocked.allowed.com", 443, false}, // deny wins
		{"registry.npmjs.org", 443, true},
		{"127.0.0.1", 443, false},
		{"", 443, false},
	} {
		d := p.Decide(tc.host, tc.port)
		if d.Allow != tc.ok || d.Reason == "" {
			t.Errorf("%s:%d: %+v, want allow=%v", tc.host, tc.port, d, tc.ok)
		}
	}
	a, _ := NewPolicy("anthropic", nil, nil)
	if !a.Decide("api.anthropic.com", 443).Allow || a.Decide("statsig.anthropic.com", 443).Allow || a.Decide("api.anthropic.com", 80).Allow {
		t.Error("anthropic posture")
	}
	for _, bad := range [][]string{{"*"}, {"*.com"}, {"*:443"}, {"a.*.com"}, {"x.com:0"}, {"x.com:99999"}, {"10.0.0.1"}} {
		if _, err := NewPolicy("allowlist", bad, nil); err == nil {
			t.Errorf("rule %v accepted", bad)
		}
	}
	if _, err := NewPolicy("allowlist", nil, nil); err == nil {
		t.Error("empty allowlist accepted")
	}
	if _, err := NewPolicy("open", []string{"x.com"}, nil); err == nil {
		t.Error("unknown posture accepted")
	}
}

func TestClassify(t *testing.T) {
	for in, want := range map[string]string{
		"8.8.8.8": "public", "1.1.1.1": "public", "2606:4700::1111": "public",
		"127.0.0.1": "loopback", "127.1.2.3": "loopback", "::1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private", "fd12::1": "private",
		"169.254.169.254": "metadata", "fd00:ec2::254": "metadata", "169.254.1.1": "link-local", "fe80::1": "link-local",
		"100.64.0.1": "cgnat", "100.100.100.200": "cgnat", "224.0.0.1": "multicast", "ff02::1": "multicast",
		"0.0.0.0": "unspecified", "::": "unspecified", "255.255.255.255": "reserved",
		"::ffff:127.0.0.1": "ipv4-mapped", "::ffff:8.8.8.8": "ipv4-mapped", "::127.0.0.1": "ipv4-compatible",
		"64:ff9b::a00:1": "nat64", "2002:7f00:1::": "6to4", "2001:0:7f00:1::": "teredo", "192.0.2.1": "documentation",
		"172.32.0.1": "public", "100.128.0.1": "public",
	} {
		ok, class := Classify(netip.MustParseAddr(in))
		if class != want || ok != (want == "public") {
			t.Errorf("Classify(%s) = %v %s, want %s", in, ok, class, want)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for in, want := range map[string]string{"api.anthropic.com:443": "api.anthropic.com:443", "Example.COM.:8080": "example.com:8080"} {
		h, p, err := SplitHostPort(in, 0)
		if err != nil || h+":"+strconv.Itoa(p) != want {
			t.Errorf("%q: %s %d %v", in, h, p, err)
		}
	}
	if h, p, err := SplitHostPort("example.com", 80); err != nil || h != "example.com" || p != 80 {
		t.Errorf("default port: %s %d %v", h, p, err)
	}
	for _, bad := range []string{"", "example.com", "example.com:", "example.com:0", "example.com:65536", "example.com:+443", "example.com:0443",
		"user@example.com:443", "[::1]:443", "::1:443", "127.0.0.1:443", "example.com:443/x", "exa mple.com:443", "example.com%00:443"} {
		if h, p, err := SplitHostPort(bad, 0); err == nil {
			t.Errorf("%q accepted as %s:%d", bad, h, p)
		}
	}
}

// hello captures the first bytes crypto/tls sends for serverName.
func hello(t testing.TB, serverName string) []byte {
	t.Helper()
	c1, c2 := net.Pipe()
	go func() {
		tc := tls.Client(c1, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		tc.SetDeadline(time.Now().Add(2 * time.Second))
		_ = tc.Handshake()
	}()
	buf := make([]byte, MaxHello)
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := c2.Read(buf)
	c2.Close()
	return buf[:n]
}

func TestParseSNI(t *testing.T) {
	h := hello(t, "api.anthropic.com")
	if sni, err := ParseSNI(h); err != nil || sni != "api.anthropic.com" {
		t.Fatalf("%q %v", sni, err)
	}
	if sni, err := ParseSNI(hello(t, "")); err != nil || sni != "" {
		t.Fatalf("no SNI: %q %v", sni, err)
	}
	for i := 0; i < len(h); i += 17 {
		if _, err := ParseSNI(h[:i]); err != ErrNeedMore {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	// The same hello split over two records parses the same.
	body := h[5:]
	split := append([]byte{0x16, 0x03, 0x01, 0, 40}, body[:40]...)
	rest := body[40:]
	split = append(split, 0x16, 0x03, 0x01, byte(len(rest)>>8), byte(len(rest)))
	split = append(split, rest...)
	if sni, err := ParseSNI(split); err != nil || sni != "api.anthropic.com" {
		t.Fatalf("fragmented: %q %v", sni, err)
	}
	if _, err := ParseSNI([]byte("GET / HTTP/1.1\r\n")); err != ErrNotTLS {
		t.Fatalf("http: %v", err)
	}
}

func FuzzParseSNI(f *testing.F) {
	f.Add(hello(f, "api.anthropic.com"))
	f.Add(hello(f, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		sni, err := ParseSNI(data)
		if err == nil && len(sni) > len(data) {
			t.Fatal("SNI longer than the input")
		}
	})
}

func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"api.anthropic.com:443", "a.b:1", "[::1]:443", "127.0.0.1:80", "x:0", "bücher.example:443", "a..b:1", "evil.com%2f@x:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, p, err := SplitHostPort(s, 0)
		if err != nil {
			return
		}
		if p < 1 || p > 65535 {
			t.Fatalf("port %d", p)
		}
		again, err := Normalize(h)
		if err != nil || again != h {
			t.Fatalf("%q: returned host %q is not normalized (%q, %v)", s, h, again, err)
		}
		if _, perr := netip.ParseAddr(h); perr == nil {
			t.Fatalf("%q: an address got through as %q", s, h)
		}
	})
}

// TestWildcardsAndApprovals: a wildcard must sit on a registrable name
// (never a public suffix); approvals allow until they expire; deny rules
// win over them; only a valid name no rule decides is askable.
func TestWildcardsAndApprovals(t *testing.T) {
	for _, bad := range []string{"*.com", "*.co.uk", "*.github.io", "*.uk"} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), "public suffix") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, good := range []string{"*.example.co.uk", "*.pkg.example", "*.npmjs.org", "*.user.github.io"} {
		if _, err := ParseRule(good); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	now := time.Now()
	r, _ := ParseRule("docs.example.com")
	w, _ := ParseRule("*.example.com")
	p, err := Spec{Posture: "allowlist", Deny: []string{"bad.example.com"}, Ask: true,
		Approved: []Approval{{Rule: r, Until: now.Add(time.Hour), By: "alice"}, {Rule: w, Until: now.Add(-time.Second), By: "bob"}}}.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if d := p.DecideAt("docs.example.com", 443, now); !d.Allow || d.Rule != "approved docs.example.com:443 by alice" {
		t.Errorf("approved: %+v", d)
	}
	if d := p.DecideAt("docs.example.com", 443, now.Add(2*time.Hour)); d.Allow || !d.Askable {
		t.Errorf("after the approval expired: %+v", d)
	}
	if d := p.DecideAt("x.example.com", 443, now); d.Allow || !d.Askable {
		t.Errorf("an expired wildcard approval: %+v", d)
	}
	if d := p.DecideAt("bad.example.com", 443, now); d.Allow || d.Askable {
		t.Errorf("a deny rule: %+v", d)
	}
	if d := p.DecideAt("10.0.0.1", 443, now); d.Allow || d.Askable {
		t.Errorf("an address: %+v", d)
	}
	a, _ := Spec{Posture: "anthropic", Ask: true}.Policy()
	if d := a.DecideAt("example.com", 443, now); d.Askable {
		t.Error("the anthropic posture asks")
	}
}

// TestClassifyHostsOwn (issue 31): an address of the Runner's host itself
// is refused whatever its range, a public one included (the host's sshd or
// database listening on it would be reached from the box); the machine's
// real interfaces are read, and a listing is made again after hostTTL.
func TestClassifyHostsOwn(t *testing.T) {
	pub := netip.MustParseAddr("8.8.4.4")
	old, oldTTL := hostAddrs, hostTTL
	t.Cleanup(func() {
		hostAddrs, hostTTL = old, oldTTL
		host.Lock()
		host.addrs = nil
		host.Unlock()
	})
	hostAddrs, hostTTL = func() []netip.Addr { return []netip.Addr{pub} }, 0
	if ok, class := Classify(pub); ok || class != "host" {
		t.Fatalf("the host's own public address: %v %s", ok, class)
	}
	if ok, class := Classify(netip.MustParseAddr("::ffff:8.8.4.4")); ok || class != "ipv4-mapped" {
		t.Fatalf("mapped: %v %s", ok, class)
	}
	hostAddrs = old
	real := old()
	if len(real) == 0 {
		t.Fatal("no interface address on this machine")
	}
	for _, a := range real {
		if ok, class := Classify(a); ok {
			t.Errorf("the host's %s is dialable (%s)", a, class)
		}
	}
	if ok, class := Classify(pub); !ok || class != "public" {
		t.Fatalf("after the listing is made again: %v %s", ok, class)
	}
}
