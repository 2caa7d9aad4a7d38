package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/chansession"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/logkey"
)

// Resolver looks names up; net.DefaultResolver is one. Tests inject theirs.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Proxy.
type Options struct {
	// Policy returns the session's policy; nil means no egress (offline).
	Policy func(session string) *Policy
	// Resolver resolves names; nil uses net.DefaultResolver.
	Resolver Resolver
	Log      *slog.Logger
	// Decisions receives one Entry (Kind "egress") per connection.
	Decisions decisionlog.Sink
	// MaxTunnels caps a session's open connections (default 64).
	MaxTunnels int
	// IdleTimeout ends a tunnel with no traffic either way (default 5 min).
	IdleTimeout time.Duration
	// UnsafeAllowLoopbackForTests lets loopback addresses be dialed, so
	// tests can stand up "the internet" on 127.0.0.1. It exists only in
	// Go: no flag or config key sets it.
	UnsafeAllowLoopbackForTests bool
	// Dial replaces the dialer (tests use it to prove no other address is
	// ever dialed); nil dials TCP.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Terminate, if set, names the CONNECT targets whose TLS the Runner
	// terminates itself (the Anthropic API host), in every posture,
	// offline included: for those, serve takes the box's connection after
	// the 200, its buffered bytes first, and nothing is dialed here.
	Terminate func(session, host string, port int) (serve func(session string, c net.Conn), ok bool)
}

// Proxy is the egress proxy: CONNECT tunnels and absolute-form HTTP, for
// connections that arrive over a box's channel (chansession). It resolves
// names itself, dials only addresses that Classify allows, exactly the one
// it checked, and for TLS refuses a tunnel whose SNI differs from the
// CONNECT host. A denial answers 403 with a body that names the rule, so
// the agent can tell its user what to allow.
type Proxy struct {
	o    Options
	log  *slog.Logger
	sink decisionlog.Sink
	ids  atomic.Uint64

	mu   sync.Mutex
	open map[string]int // tunnels per session
}

// New builds a proxy.
func New(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.MaxTunnels <= 0 {
		o.MaxTunnels = 64
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	p := &Proxy{o: o, log: o.Log, sink: o.Decisions, open: map[string]int{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.sink == nil {
		p.sink = decisionlog.Discard{}
	}
	return p
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	e := decisionlog.Entry{Time: start.UTC(), Kind: "egress", RequestID: "eg_" + strconv.FormatUint(p.ids.Add(1), 10), Method: r.Method}
	defer func() {
		e.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		p.record(e)
	}()
	deny := func(status int, rule, reason string) {
		e.Decision, e.Status, e.Rule, e.Reason = "denied", status, rule, reason
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Paddock-Egress", "denied")
		w.WriteHeader(status)
		fmt.Fprintf(w, "paddock egress: denied: %s\n", reason)
		if status == http.StatusForbidden && e.Host != "" && rule == "" {
			fmt.Fprintf(w, "This box may reach only the names its owner allowed. To allow this one, the owner can start the session with --egress allowlist --allow %s:%d.\n", e.Host, e.Port)
		}
	}
	session, ok := chansession.From(r.Context())
	if !ok {
		deny(http.StatusForbidden, "", "the egress proxy serves boxes only")
		return
	}
	e.Session = session
	if r.Method == http.MethodConnect && p.o.Terminate != nil {
		if host, port, err := SplitHostPort(r.RequestURI, 0); err == nil {
			if serve, ok := p.o.Terminate(session, host, port); ok {
				e.Host, e.Port, e.Path = host, port, clip(r.Method+" "+r.RequestURI)
				p.terminate(w, &e, session, serve)
				return
			}
		}
	}
	pol := p.o.Policy(session)
	if pol == nil {
		deny(http.StatusForbidden, "posture offline", "this session's egress posture is offline")
		return
	}
	var authority string
	defPort := 0
	switch {
	case r.Method == http.MethodConnect:
		authority = r.RequestURI
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		authority, defPort = r.URL.Host, 80
	default:
		deny(http.StatusBadRequest, "", "send CONNECT host:port, or an absolute http:// URL")
		return
	}
	e.Path = clip(r.Method + " " + r.RequestURI)
	host, port, err := SplitHostPort(authority, defPort)
	if err != nil {
		deny(http.StatusForbidden, "", err.Error())
		return
	}
	e.Host, e.Port = host, port
	d := pol.Decide(host, port)
	if !d.Allow {
		deny(http.StatusForbidden, d.Rule, d.Reason)
		return
	}
	e.Rule = d.Rule
	if !p.acquire(session) {
		deny(http.StatusTooManyRequests, "", fmt.Sprintf("this session has %d connections open, the most allowed", p.o.MaxTunnels))
		return
	}
	defer p.release(session)
	addr, why := p.resolve(r.Context(), host, port)
	if why != "" {
		deny(http.StatusForbidden, d.Rule, why)
		return
	}
	e.Addr = addr.String()
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, &e, addr)
		return
	}
	p.forward(w, r, &e, addr)
}

func (p *Proxy) acquire(session string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[session] >= p.o.MaxTunnels {
		return false
	}
	p.open[session]++
	return true
}

func (p *Proxy) release(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[session]--; p.open[session] <= 0 {
		delete(p.open, session)
	}
}

// resolve looks the name up and picks the first address that may be
// dialed. Every address it refuses is named in the reason when none is left.
func (p *Proxy) resolve(ctx context.Context, host string, port int) (netip.AddrPort, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := p.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Sprintf("%s does not resolve", host)
	}
	var refused []string
	for _, a := range addrs {
		a = a.WithZone("")
		ok, class := Classify(a)
		if !ok && p.o.UnsafeAllowLoopbackForTests && class == "loopback" && a.Is4() {
			ok = true
		}
		if ok {
			return netip.AddrPortFrom(a, uint16(port)), ""
		}
		refused = append(refused, a.String()+" ("+class+")")
	}
	return netip.AddrPort{}, fmt.Sprintf("%s resolves only to addresses a box may never reach: %s", host, strings.Join(refused, ", "))
}

func (p *Proxy) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if p.o.Dial != nil {
		return p.o.Dial(ctx, addr)
	}
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, "tcp", addr.String())
}

// tunnel serves a CONNECT: 200, then the ClientHello check, then bytes.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, e *decisionlog.Entry, addr netip.AddrPort) {
	up, err := p.dial(r.Context(), addr)
	if err != nil {
		e.Decision, e.Status, e.Reason = "error", http.StatusBadGateway, "dial "+addr.String()+": "+err.Error()
		http.Error(w, "paddock egress: "+e.Host+" did not answer", http.StatusBadGateway)
		return
	}
	defer up.Close()
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		e.Decision, e.Reason = "error", "hijack: "+err.Error()
		return
	}
	defer c.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	e.Status = http.StatusOK
	// Read what the client sends first. TLS: its SNI must be the CONNECT
	// host. Port 443 carries TLS only.
	first, err := readHello(c, brw.Reader)
	sni, herr := ParseSNI(first)
	switch {
	case err != nil && len(first) == 0:
		e.Decision, e.Reason = "closed", "the client sent nothing"
		return
	case herr == nil:
		if sni != "" {
			if n, nerr := Normalize(sni); nerr != nil || n != e.Host {
				e.Decision, e.Reason = "denied", fmt.Sprintf("TLS server name %q differs from the CONNECT host %s", clip(sni), e.Host)
				return
			}
		} else {
			e.Decision, e.Reason = "denied", "TLS ClientHello without a server name"
			return
		}
	case e.Port == 443:
		e.Decision, e.Reason = "denied", "port 443 carries TLS only, and this is not a TLS ClientHello"
		return
	}
	e.Decision = "allowed"
	if _, err := up.Write(first); err != nil {
		return
	}
	in, out := p.splice(c, brw.Reader, up)
	e.BytesIn, e.BytesOut = in+int64(len(first)), out
}

// readHello reads until a complete ClientHello (or clearly not TLS), at
// most MaxHello bytes, within 10 seconds.
func readHello(c net.Conn, br *bufio.Reader) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var buf []byte
	tmp := make([]byte, 4096)
	for len(buf) < MaxHello {
		n, err := br.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if _, perr := ParseSNI(buf); !errors.Is(perr, ErrNeedMore) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// splice copies both ways until either side ends or nothing moves for
// IdleTimeout; it returns the bytes from the box and from the server.
func (p *Proxy) splice(box net.Conn, boxR io.Reader, up net.Conn) (int64, int64) {
	var in, out atomic.Int64
	last := atomic.Int64{}
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	cp := func(dst net.Conn, src io.Reader, n *atomic.Int64) {
		buf := make([]byte, 32<<10)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				last.Store(time.Now().UnixNano())
				n.Add(int64(k))
				if _, werr := dst.Write(buf[:k]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, boxR, &in)
	go cp(box, up, &out)
	tick := time.NewTicker(min(p.o.IdleTimeout/4, 10*time.Second))
	defer tick.Stop()
	ended := 0
	for ended < 2 {
		select {
		case <-done:
			ended++
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) > p.o.IdleTimeout {
				box.Close()
				up.Close()
			}
		}
	}
	return in.Load(), out.Load()
}

// forward serves an absolute-form http:// request to the checked address.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, e *decisionlog.Entry, addr netip.AddrPort) {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, addr) },
		ResponseHeaderTimeout: time.Minute,
		DisableKeepAlives:     true,
	}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		e.Decision, e.Status, e.Reason = "error", http.StatusBadGateway, err.Error()
		http.Error(w, "paddock egress: "+e.Host+" did not answer", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	e.Decision, e.Status, e.BytesOut, e.BytesIn = "allowed", resp.StatusCode, n, max(r.ContentLength, 0)
}

func (p *Proxy) record(e decisionlog.Entry) {
	p.sink.Record(e)
	level := slog.LevelInfo
	if e.Decision != "allowed" {
		level = slog.LevelWarn
	}
	p.log.LogAttrs(context.Background(), level, "egress decision",
		slog.String(logkey.Decision, e.Decision), slog.String(logkey.Session, e.Session),
		slog.String("host", e.Host), slog.Int("port", e.Port), slog.String("addr", e.Addr),
		slog.String("rule", e.Rule), slog.String(logkey.Reason, e.Reason), slog.Int(logkey.Status, e.Status),
		slog.Int64(logkey.BytesIn, e.BytesIn), slog.Int64(logkey.BytesOut, e.BytesOut))
}

// terminate answers a CONNECT to a terminated host with 200 and hands the
// connection (its buffered bytes first) to serve, which speaks TLS as that
// host; each request inside is the credential proxy's to judge and log.
func (p *Proxy) terminate(w http.ResponseWriter, e *decisionlog.Entry, session string, serve func(string, net.Conn)) {
	if !p.acquire(session) {
		e.Decision, e.Status, e.Reason = "denied", http.StatusTooManyRequests, fmt.Sprintf("this session has %d connections open, the most allowed", p.o.MaxTunnels)
		http.Error(w, "paddock egress: denied: "+e.Reason, http.StatusTooManyRequests)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.release(session)
		e.Decision, e.Reason = "error", "hijack: "+err.Error()
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		p.release(session)
		return
	}
	e.Decision, e.Status, e.Rule = "terminated", http.StatusOK, "the Anthropic API, through the Runner"
	serve(session, &releasingConn{Conn: c, r: brw.Reader, done: func() { p.release(session) }})
}

// releasingConn reads the hijacked connection's buffer first and gives
// its tunnel slot back once closed.
type releasingConn struct {
	net.Conn
	r    io.Reader
	once sync.Once
	done func()
}

func (c *releasingConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}
