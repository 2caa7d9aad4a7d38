package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/chansession"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

type mapResolver map[string][]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range m[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return out, nil
}

type sink struct {
	mu sync.Mutex
	e  []decisionlog.Entry
}

func (s *sink) Record(e decisionlog.Entry) { s.mu.Lock(); s.e = append(s.e, e); s.mu.Unlock() }

func (s *sink) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.e) }

// after waits for the entry after the first n and returns it.
func (s *sink) after(n int) decisionlog.Entry {
	for i := 0; i < 1000; i++ {
		s.mu.Lock()
		if len(s.e) > n {
			e := s.e[n]
			s.mu.Unlock()
			return e
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return decisionlog.Entry{}
}

type fixture struct {
	proxyAddr string
	tlsPort   int
	httpPort  int
	sink      *sink
	proxy     *Proxy
	pol       atomic.Pointer[Policy] // session s1's
}

func setup(t *testing.T, maxTunnels int, opts ...func(*Options)) *fixture {
	t.Helper()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello over tls") }))
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("Proxy-Authorization forwarded")
		}
		io.WriteString(w, "hello over http "+r.URL.Path)
	}))
	t.Cleanup(httpSrv.Close)
	port := func(u string) int {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"))
		var n int
		fmt.Sscan(p, &n)
		return n
	}
	f := &fixture{tlsPort: port(tlsSrv.URL), httpPort: port(httpSrv.URL), sink: &sink{}}
	allow := []string{fmt.Sprintf("tls.test:%d", f.tlsPort), fmt.Sprintf("plain.test:%d", f.httpPort), fmt.Sprintf("allowed.com:%d", f.tlsPort),
		"private.test", "meta.test", "v6loop.test", "mapped.test", "mappedprivate.test", "cgnat.test", "nat64.test", "linklocal.test", "zero.test", "multicast.test",
		"denied.test", "nxdomain.test", fmt.Sprintf("*.wild.test:%d", f.tlsPort)}
	pol, err := NewPolicy("allowlist", allow, []string{"denied.test"})
	if err != nil {
		t.Fatal(err)
	}
	res := mapResolver{
		"tls.test": {"127.0.0.1"}, "plain.test": {"127.0.0.1"}, "allowed.com": {"127.0.0.1"}, "a.wild.test": {"127.0.0.1"},
		"private.test": {"10.0.0.1", "192.168.1.1"}, "meta.test": {"169.254.169.254"}, "v6loop.test": {"::1"},
		"mapped.test": {"::ffff:127.0.0.1"}, "mappedprivate.test": {"::ffff:10.1.2.3"}, "cgnat.test": {"100.64.0.1"}, "nat64.test": {"64:ff9b::7f00:1"},
		"linklocal.test": {"fe80::1"}, "zero.test": {"0.0.0.0"}, "multicast.test": {"224.0.0.1"}, "denied.test": {"127.0.0.1"},
	}
	f.pol.Store(pol)
	o := Options{
		Policy: func(s string) *Policy {
			if s == "s1" {
				return f.pol.Load()
			}
			return nil
		},
		Resolver:                    res,
		Decisions:                   f.sink,
		MaxTunnels:                  maxTunnels,
		UnsafeAllowLoopbackForTests: true,
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			if a.Addr() != netip.MustParseAddr("127.0.0.1") {
				t.Errorf("the proxy dialed %s", a) // never reached: nothing leaves the machine
				return nil, fmt.Errorf("refused by the test")
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		},
	}
	for _, f := range opts {
		f(&o)
	}
	f.proxy = New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.proxy, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		// The test's "channel": connections from port-parity decide the session.
		return chansession.With(ctx, "s1")
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.proxyAddr = ln.Addr().String()
	return f
}

// connect sends a CONNECT and returns the conn, the status line and body.
func (f *fixture) connect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", f.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

func body(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

func TestForbiddenAddressClasses(t *testing.T) {
	f := setup(t, 0)
	for host, class := range map[string]string{
		"private.test": "private", "meta.test": "metadata", "v6loop.test": "loopback", "mapped.test": "loopback", "mappedprivate.test": "private",
		"cgnat.test": "cgnat", "nat64.test": "nat64", "linklocal.test": "link-local", "zero.test": "unspecified", "multicast.test": "multicast",
	} {
		n := f.sink.count()
		c, _, resp := f.connect(t, host+":443")
		b := body(resp)
		c.Close()
		if resp.StatusCode != 403 || !strings.Contains(b, class) || !strings.Contains(b, "never reach") {
			t.Errorf("%s: %d %q", host, resp.StatusCode, b)
		}
		if e := f.sink.after(n); e.Decision != "denied" || e.Host != host || e.Kind != "egress" {
			t.Errorf("%s: entry %+v", host, e)
		}
	}
}

func TestPolicyRefusals(t *testing.T) {
	f := setup(t, 0)
	for target, want := range map[string]string{
		fmt.Sprintf("tls.test:%d", f.tlsPort+1):            "not on the allowlist", // wrong port
		"tls.test:443":                                     "not on the allowlist",
		fmt.Sprintf("allowed.com.evil.test:%d", f.tlsPort): "not on the allowlist",
		fmt.Sprintf("evilallowed.com:%d", f.tlsPort):       "not on the allowlist",
		fmt.Sprintf("wild.test:%d", f.tlsPort):             "not on the allowlist",
		"denied.test:443":                                  "is denied by rule denied.test:443",
		"127.0.0.1:443":                                    "address, not a name",
		"[::1]:443":                                        "IPv6 literal",
		"nxdomain.test:443":                                "does not resolve",
		"user@tls.test:443":                                "", // the HTTP server refuses it first (400)
	} {
		c, _, resp := f.connect(t, target)
		b := body(resp)
		c.Close()
		if want == "" {
			if resp.StatusCode != 400 {
				t.Errorf("%s: %d", target, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != 403 || !strings.Contains(b, want) || !strings.Contains(b, "paddock egress: denied") {
			t.Errorf("%s: %d %q, want %q", target, resp.StatusCode, b, want)
		}
	}
	// Case and a trailing dot are the same name.
	c, br, resp := f.connect(t, fmt.Sprintf("ALLOWED.com.:%d", f.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatalf("normalized name refused: %d", resp.StatusCode)
	}
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "allowed.com", InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	tc.Close()
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func TestTLSTunnelAndSNI(t *testing.T) {
	f := setup(t, 0)
	target := fmt.Sprintf("tls.test:%d", f.tlsPort)
	n := f.sink.count()
	c, br, resp := f.connect(t, target)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body(resp))
	}
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "tls.test", InsecureSkipVerify: true})
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: tls.test\r\nConnection: close\r\n\r\n")
	got, _ := io.ReadAll(tc)
	tc.Close()
	if !strings.Contains(string(got), "hello over tls") {
		t.Fatalf("through the tunnel: %q", got)
	}
	if e := f.sink.after(n); e.Decision != "allowed" || e.Addr != fmt.Sprintf("127.0.0.1:%d", f.tlsPort) || e.BytesIn == 0 || e.BytesOut == 0 {
		t.Fatalf("entry %+v", e)
	}
	// Domain fronting at the TLS layer: CONNECT one name, SNI another.
	n = f.sink.count()
	c, br, resp = f.connect(t, target)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tc = tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a tunnel with another SNI completed its handshake")
	}
	if e := f.sink.after(n); e.Decision != "denied" || !strings.Contains(e.Reason, `"evil.test" differs`) {
		t.Fatalf("entry %+v", e)
	}
	// No SNI at all is refused too.
	c, br, _ = f.connect(t, target)
	tc = tls.Client(&bufConn{c, br}, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a tunnel without SNI completed")
	}
}

func TestPlainHTTPOnPort443Refused(t *testing.T) {
	f := setup(t, 0)
	pol, _ := NewPolicy("allowlist", []string{"plain443.test"}, nil)
	f.proxy.o.Policy = func(string) *Policy { return pol }
	f.proxy.o.Resolver = mapResolver{"plain443.test": {"127.0.0.1"}}
	f.proxy.o.Dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", f.httpPort))
	}
	n := f.sink.count()
	c, br, resp := f.connect(t, "plain443.test:443")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("plain HTTP went through a 443 tunnel")
	}
	if e := f.sink.after(n); !strings.Contains(e.Reason, "TLS only") {
		t.Fatalf("%+v", e)
	}
}

func TestAbsoluteFormHTTP(t *testing.T) {
	f := setup(t, 0)
	c, err := net.Dial("tcp", f.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://plain.test:%d/path HTTP/1.1\r\nHost: plain.test\r\nProxy-Authorization: Basic x\r\n\r\n", f.httpPort)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 || body(resp) != "hello over http /path" {
		t.Fatalf("%v %v", resp, err)
	}
	c2, _ := net.Dial("tcp", f.proxyAddr)
	defer c2.Close()
	fmt.Fprintf(c2, "GET http://elsewhere.test/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
	resp, _ = http.ReadResponse(bufio.NewReader(c2), nil)
	if resp.StatusCode != 403 {
		t.Fatalf("%d", resp.StatusCode)
	}
}

func TestTunnelCap(t *testing.T) {
	f := setup(t, 2)
	target := fmt.Sprintf("tls.test:%d", f.tlsPort)
	var open []net.Conn
	for i := 0; i < 2; i++ {
		c, _, resp := f.connect(t, target)
		if resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %d", i, resp.StatusCode)
		}
		open = append(open, c)
	}
	c, _, resp := f.connect(t, target)
	c.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("third tunnel: %d", resp.StatusCode)
	}
	for _, c := range open {
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, _, resp := f.connect(t, target)
		c.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed tunnels were not released")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestNoSessionNoEgress(t *testing.T) {
	p := New(Options{Policy: func(string) *Policy { return nil }})
	for _, ctx := range []context.Context{context.Background(), chansession.With(context.Background(), "offline-one")} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("CONNECT", "http://x.test:443", nil).WithContext(ctx)
		p.ServeHTTP(rec, req)
		if rec.Code != 403 {
			t.Fatalf("%d", rec.Code)
		}
	}
}

func TestIdleTunnelEnds(t *testing.T) {
	f := setup(t, 0)
	f.proxy.o.IdleTimeout = 300 * time.Millisecond
	c, br, resp := f.connect(t, fmt.Sprintf("tls.test:%d", f.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "tls.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t0 := time.Now()
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from a silent tunnel")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("an idle tunnel lived %v", d)
	}
}

// TestAskMode: in ask mode a CONNECT no rule decides waits; approved, the
// same connection goes through; denied or unanswered, a 403 says so; a
// name that resolves only to forbidden addresses is refused unasked; past
// the cap, the oldest waiting is refused first.
func TestAskMode(t *testing.T) {
	asked := make(chan Pending, 8)
	f := setup(t, 0, func(o *Options) {
		o.AskTimeout = 2 * time.Second
		o.MaxPending = 2
		o.OnPending = func(p Pending) { asked <- p }
	})
	pol, err := Spec{Posture: "allowlist", Deny: []string{"denied.test"}, Ask: true}.Policy()
	if err != nil {
		t.Fatal(err)
	}
	f.pol.Store(pol)
	type result struct {
		c    net.Conn
		br   *bufio.Reader
		resp *http.Response
	}
	connect := func(target string) chan result {
		ch := make(chan result, 1)
		go func() { c, br, resp := f.connect(t, target); ch <- result{c, br, resp} }()
		return ch
	}
	target := fmt.Sprintf("TLS.test:%d", f.tlsPort)
	got := connect(target)
	p := <-asked
	if p.Session != "s1" || p.Host != "tls.test" || p.Port != f.tlsPort || !p.Deadline.After(p.Since) {
		t.Fatalf("pending %+v", p)
	}
	if ps := f.proxy.Pending("s1"); len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("Pending: %+v", ps)
	}
	if n := f.proxy.Answer("s1", Rule{Host: "other.test", Port: f.tlsPort}, Verdict{Allow: true}); n != 0 {
		t.Fatalf("a rule for another name answered %d", n)
	}
	n := f.sink.count()
	if k := f.proxy.Answer("s1", Rule{Host: "tls.test", Port: f.tlsPort}, Verdict{Allow: true, By: "alice"}); k != 1 {
		t.Fatalf("answered %d", k)
	}
	r := <-got
	if r.resp.StatusCode != 200 {
		t.Fatalf("approved: %d %s", r.resp.StatusCode, body(r.resp))
	}
	tc := tls.Client(&bufConn{r.c, r.br}, &tls.Config{ServerName: "tls.test", InsecureSkipVerify: true})
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n")
	buf := make([]byte, 512)
	k, _ := tc.Read(buf)
	if !strings.Contains(string(buf[:k]), "hello over tls") {
		t.Fatalf("through the approved tunnel: %q", buf[:k])
	}
	// The session goes offline: the open tunnel is cut, and says why.
	f.pol.Store(nil)
	if cut := f.proxy.Recheck("s1"); cut != 1 {
		t.Fatalf("Recheck cut %d tunnels", cut)
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(tc); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the cut tunnel: %v", err)
	}
	if e := f.sink.after(n); e.Decision != "cut" || e.Rule != "approved by alice" || !strings.Contains(e.Reason, "offline") {
		t.Fatalf("entry %+v", e)
	}
	f.pol.Store(pol)

	// Denied by a person: 403 with the reason.
	got = connect(fmt.Sprintf("allowed.com:%d", f.tlsPort))
	<-asked
	f.proxy.Answer("s1", Rule{Host: "allowed.com", Port: f.tlsPort}, Verdict{Reason: "denied by bob"})
	if r := <-got; r.resp.StatusCode != 403 || !strings.Contains(body(r.resp), "denied by bob") {
		t.Fatalf("denied: %d", r.resp.StatusCode)
	}
	// Unanswered: refused after AskTimeout.
	got = connect(fmt.Sprintf("a.wild.test:%d", f.tlsPort))
	<-asked
	if r := <-got; r.resp.StatusCode != 403 || !strings.Contains(body(r.resp), "no one approved") {
		t.Fatalf("unanswered: %d", r.resp.StatusCode)
	}
	// Forbidden addresses and deny rules are never asked about.
	for _, target := range []string{"private.test:443", "meta.test:443", "denied.test:443"} {
		if _, _, resp := f.connect(t, target); resp.StatusCode != 403 {
			t.Fatalf("%s: %d", target, resp.StatusCode)
		}
	}
	select {
	case p := <-asked:
		t.Fatalf("asked about %+v", p)
	default:
	}
	// A flood: past two waiting, the oldest is refused first.
	first := connect(fmt.Sprintf("tls.test:%d", f.tlsPort))
	<-asked
	second := connect(fmt.Sprintf("plain.test:%d", f.httpPort))
	<-asked
	third := connect(fmt.Sprintf("allowed.com:%d", f.tlsPort))
	<-asked
	if r := <-first; r.resp.StatusCode != 403 || !strings.Contains(body(r.resp), "oldest is refused first") {
		t.Fatalf("the oldest of a flood: %d", r.resp.StatusCode)
	}
	if ps := f.proxy.Pending(""); len(ps) != 2 || ps[0].Host != "plain.test" || ps[1].Host != "allowed.com" {
		t.Fatalf("the queue after a flood: %+v", ps)
	}
	// A change of posture answers what it now decides.
	allow, _ := Spec{Posture: "allowlist", Allow: []string{fmt.Sprintf("plain.test:%d", f.httpPort)}, Ask: true}.Policy()
	f.pol.Store(allow)
	f.proxy.Recheck("s1")
	if ps := f.proxy.Pending(""); len(ps) != 1 || ps[0].Host != "allowed.com" {
		t.Fatalf("the queue after a change: %+v", ps)
	}
	if r := <-second; r.resp.StatusCode != 200 {
		t.Fatalf("a waiting connection the new policy allows: %d", r.resp.StatusCode)
	} else {
		r.c.Close()
	}
	f.proxy.Answer("s1", Rule{Host: "allowed.com", Port: f.tlsPort}, Verdict{Reason: "denied by bob"})
	if r := <-third; r.resp.StatusCode != 403 {
		t.Fatalf("the last one: %d", r.resp.StatusCode)
	}
}
