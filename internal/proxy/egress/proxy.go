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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/sessions/chansession"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
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
	// Intercept, if set, names the CONNECT targets whose TLS the Runner
	// terminates once the session's policy allowed them (the hosts of a
	// session's service credentials): for those, serve takes the box's
	// connection as for Terminate, and nothing is dialed here.
	Intercept func(session, host string, port int) (serve func(session string, c net.Conn), ok bool)
	// AskTimeout is how long a connection waits for a person's answer in
	// ask mode before it is refused (default 60 s).
	AskTimeout time.Duration
	// MaxPending caps a session's connections waiting for an answer
	// (default 16); past it, the oldest is refused first.
	MaxPending int
	// OnPending, if set, is told of each connection that starts waiting
	// (in its own goroutine: it may be slow).
	OnPending func(Pending)
}

// Pending is a connection waiting for a person's answer.
type Pending struct {
	ID       string    `json:"id"`
	Session  string    `json:"session"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// Verdict answers a pending connection.
type Verdict struct {
	Allow bool
	// By names who answered ("" for the Runner itself).
	By string
	// Reason is why, for the log and the 403 body when refused.
	Reason string
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

	mu      sync.Mutex
	open    map[string]int                 // connections per session
	tunnels map[string]map[*tunnelRec]bool // open CONNECT tunnels per session
	pending map[string][]*held             // per session, oldest first
}

// tunnelRec is an open tunnel Recheck may cut.
type tunnelRec struct {
	host   string
	port   int
	cut    func()
	reason atomic.Pointer[string] // why it was cut, if it was
}

// held is a connection waiting for a verdict (buffered: one send, never
// blocking).
type held struct {
	Pending
	verdict chan Verdict
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
	if o.AskTimeout <= 0 {
		o.AskTimeout = time.Minute
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 16
	}
	p := &Proxy{o: o, log: o.Log, sink: o.Decisions, open: map[string]int{},
		tunnels: map[string]map[*tunnelRec]bool{}, pending: map[string][]*held{}}
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
		e.Decision, e.Status, e.Rule, e.Reason = decisionlog.Denied, status, rule, reason
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
				p.terminate(w, &e, session, serve, "the Anthropic API, through the Runner", false)
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
	if !d.Allow && d.Askable {
		// Names that resolve only to forbidden addresses are refused
		// before anyone is asked: no approval could let them through.
		if _, why := p.resolve(r.Context(), host, port); why != "" {
			deny(http.StatusForbidden, "", why)
			return
		}
		v := p.hold(r.Context(), session, host, port)
		if !v.Allow {
			deny(http.StatusForbidden, "asked", v.Reason)
			return
		}
		d = Decision{Allow: true, Rule: "approved by " + v.By}
		if v.By == "" {
			d.Rule = "approved: " + v.Reason
		}
	}
	if !d.Allow {
		deny(http.StatusForbidden, d.Rule, d.Reason)
		return
	}
	e.Rule = d.Rule
	if r.Method == http.MethodConnect && p.o.Intercept != nil {
		if serve, ok := p.o.Intercept(session, host, port); ok {
			if why, bad := p.Unreachable(r.Context(), host, port); bad {
				deny(http.StatusForbidden, d.Rule, why)
				return
			}
			p.terminate(w, &e, session, serve, d.Rule+"; service credentials, through the Runner", true)
			return
		}
	}
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

// Unreachable reports why a name could never be reached, whatever is
// allowed: it resolves, and only to addresses a box may never reach
// (loopback, private, metadata, …). A name that does not resolve (yet) is
// not reported: it may later.
func (p *Proxy) Unreachable(ctx context.Context, host string, port int) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := p.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "", false
	}
	if _, why := p.resolve(ctx, host, port); why != "" {
		return why, true
	}
	return "", false
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
		// An IPv4 address may come back in its IPv4-mapped IPv6 form (the
		// resolver does so for /etc/hosts entries): it is classified, and
		// dialed, as the IPv4 address it is.
		mapped := a.Is4In6()
		a = a.WithZone("").Unmap()
		ok, class := Classify(a)
		if !ok && p.o.UnsafeAllowLoopbackForTests && class == "loopback" && a.Is4() && !mapped {
			ok = true
		}
		if ok {
			return netip.AddrPortFrom(a, uint16(port)), ""
		}
		refused = append(refused, a.String()+" ("+class+")")
	}
	return netip.AddrPort{}, fmt.Sprintf("%s resolves only to addresses a box may never reach: %s", host, strings.Join(refused, ", "))
}

// DialChecked connects to host:port as a tunnel would: the name resolved
// here, only to an address a box may reach, exactly the one checked (the
// service credentials' proxy dials its upstreams with it).
func (p *Proxy) DialChecked(ctx context.Context, host string, port int) (net.Conn, error) {
	addr, why := p.resolve(ctx, host, port)
	if why != "" {
		return nil, errors.New(why)
	}
	return p.dial(ctx, addr)
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
		e.Decision, e.Status, e.Reason = decisionlog.Errored, http.StatusBadGateway, "dial "+addr.String()+": "+err.Error()
		http.Error(w, "paddock egress: "+e.Host+" did not answer", http.StatusBadGateway)
		return
	}
	defer up.Close()
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		e.Decision, e.Reason = decisionlog.Errored, "hijack: "+err.Error()
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
		e.Decision, e.Reason = decisionlog.Closed, "the client sent nothing"
		return
	case herr == nil:
		if sni != "" {
			if n, nerr := Normalize(sni); nerr != nil || n != e.Host {
				e.Decision, e.Reason = decisionlog.Denied, fmt.Sprintf("TLS server name %q differs from the CONNECT host %s", clip(sni), e.Host)
				return
			}
		} else {
			e.Decision, e.Reason = decisionlog.Denied, "TLS ClientHello without a server name"
			return
		}
	case e.Port == 443:
		e.Decision, e.Reason = decisionlog.Denied, "port 443 carries TLS only, and this is not a TLS ClientHello"
		return
	}
	e.Decision = decisionlog.Allowed
	if _, err := up.Write(first); err != nil {
		return
	}
	rec := p.track(e.Session, e.Host, e.Port, func() { c.Close(); up.Close() })
	defer p.untrack(e.Session, rec)
	in, out := p.splice(c, brw.Reader, up)
	e.BytesIn, e.BytesOut = in+int64(len(first)), out
	if why := rec.reason.Load(); why != nil {
		e.Decision, e.Reason = decisionlog.Cut, *why
	}
}

func (p *Proxy) track(session, host string, port int, cut func()) *tunnelRec {
	rec := &tunnelRec{host: host, port: port, cut: cut}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tunnels[session] == nil {
		p.tunnels[session] = map[*tunnelRec]bool{}
	}
	p.tunnels[session][rec] = true
	return rec
}

func (p *Proxy) untrack(session string, rec *tunnelRec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tunnels[session], rec)
	if len(p.tunnels[session]) == 0 {
		delete(p.tunnels, session)
	}
}

// Recheck applies the session's policy as it is now to its open tunnels
// and waiting connections: tunnels it would refuse are cut (their log
// entry says so), waiting connections it now decides are answered. It
// returns how many tunnels it cut. Terminated connections (the API host
// through the Runner) are not tunnels and are not touched.
func (p *Proxy) Recheck(session string) int {
	pol := p.o.Policy(session)
	now := time.Now()
	p.mu.Lock()
	var cut []*tunnelRec
	for rec := range p.tunnels[session] {
		why := "this session's egress is now offline"
		if pol != nil {
			d := pol.DecideAt(rec.host, rec.port, now)
			if d.Allow {
				continue
			}
			why = d.Reason
		}
		why = "cut: the session's egress changed: " + why
		rec.reason.Store(&why)
		cut = append(cut, rec)
	}
	var answer []*held
	var verdicts []Verdict
	keep := p.pending[session][:0]
	for _, h := range p.pending[session] {
		if pol == nil {
			answer, verdicts = append(answer, h), append(verdicts, Verdict{Reason: "this session's egress is now offline"})
			continue
		}
		if d := pol.DecideAt(h.Host, h.Port, now); !d.Askable {
			answer, verdicts = append(answer, h), append(verdicts, Verdict{Allow: d.Allow, Reason: d.Reason})
			continue
		}
		keep = append(keep, h)
	}
	p.setPending(session, keep)
	p.mu.Unlock()
	for i, h := range answer {
		h.verdict <- verdicts[i]
	}
	for _, rec := range cut {
		rec.cut()
	}
	return len(cut)
}

// setPending stores a session's queue; p.mu is held.
func (p *Proxy) setPending(session string, q []*held) {
	if len(q) == 0 {
		delete(p.pending, session)
		return
	}
	p.pending[session] = q
}

// hold waits for a person's verdict on a connection, at most AskTimeout.
// Past MaxPending waiting connections, the session's oldest is refused.
func (p *Proxy) hold(ctx context.Context, session, host string, port int) Verdict {
	if n, err := Normalize(host); err == nil {
		host = n // Askable says it is
	}
	now := time.Now()
	h := &held{Pending: Pending{ID: "ask_" + strconv.FormatUint(p.ids.Add(1), 10), Session: session, Host: host, Port: port,
		Since: now.UTC(), Deadline: now.Add(p.o.AskTimeout).UTC()}, verdict: make(chan Verdict, 1)}
	p.mu.Lock()
	q := p.pending[session]
	var evicted *held
	if len(q) >= p.o.MaxPending {
		evicted, q = q[0], q[1:]
	}
	p.pending[session] = append(q, h)
	p.mu.Unlock()
	if evicted != nil {
		evicted.verdict <- Verdict{Reason: fmt.Sprintf("refused unanswered: this session already had %d connections waiting for approval, and the oldest is refused first", p.o.MaxPending)}
		p.log.Warn("egress approval queue full; the oldest waiting connection is refused", slog.String(logkey.Session, session),
			slog.String("host", evicted.Host), slog.Int("port", evicted.Port), slog.Int("max_pending", p.o.MaxPending))
	}
	if p.o.OnPending != nil {
		go p.o.OnPending(h.Pending)
	}
	t := time.NewTimer(p.o.AskTimeout)
	defer t.Stop()
	select {
	case v := <-h.verdict:
		return v
	case <-t.C:
		if p.remove(h) {
			return Verdict{Reason: fmt.Sprintf("no one approved %s:%d within %s; the owner can approve it (paddock egress approve) and the box try again", host, port, p.o.AskTimeout)}
		}
	case <-ctx.Done():
		if p.remove(h) {
			return Verdict{Reason: "the box gave up waiting"}
		}
	}
	return <-h.verdict // answered as it timed out
}

// remove takes h out of its queue, reporting whether it was still there.
func (p *Proxy) remove(h *held) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.pending[h.Session]
	for i, x := range q {
		if x == h {
			p.setPending(h.Session, append(q[:i:i], q[i+1:]...))
			return true
		}
	}
	return false
}

// Pending lists the connections waiting for an answer, oldest first, of
// one session or ("") all.
func (p *Proxy) Pending(session string) []Pending {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Pending
	for s, q := range p.pending {
		if session != "" && s != session {
			continue
		}
		for _, h := range q {
			out = append(out, h.Pending)
		}
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Since.Compare(b.Since) })
	return out
}

// Answer gives the verdict to the session's waiting connections the rule
// covers, returning how many.
func (p *Proxy) Answer(session string, rule Rule, v Verdict) int {
	p.mu.Lock()
	var answer []*held
	keep := p.pending[session][:0]
	for _, h := range p.pending[session] {
		if rule.matches(h.Host, h.Port) {
			answer = append(answer, h)
		} else {
			keep = append(keep, h)
		}
	}
	p.setPending(session, keep)
	p.mu.Unlock()
	for _, h := range answer {
		h.verdict <- v
	}
	return len(answer)
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
		e.Decision, e.Status, e.Reason = decisionlog.Errored, http.StatusBadGateway, err.Error()
		http.Error(w, "paddock egress: "+e.Host+" did not answer", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	e.Decision, e.Status, e.BytesOut, e.BytesIn = decisionlog.Allowed, resp.StatusCode, n, max(r.ContentLength, 0)
}

func (p *Proxy) record(e decisionlog.Entry) {
	p.sink.Record(e)
	level := slog.LevelInfo
	if e.Decision != decisionlog.Allowed {
		level = slog.LevelWarn
	}
	p.log.LogAttrs(context.Background(), level, "egress decision",
		slog.String(logkey.Decision, string(e.Decision)), slog.String(logkey.Session, e.Session),
		slog.String("host", e.Host), slog.Int("port", e.Port), slog.String("addr", e.Addr),
		slog.String("rule", e.Rule), slog.String(logkey.Reason, e.Reason), slog.Int(logkey.Status, e.Status),
		slog.Int64(logkey.BytesIn, e.BytesIn), slog.Int64(logkey.BytesOut, e.BytesOut))
}

// terminate answers a CONNECT to a terminated host with 200 and hands the
// connection (its buffered bytes first) to serve, which speaks TLS as that
// host; each request inside is the credential proxy's to judge and log.
// A connection the policy allowed (tracked) is cut, as a tunnel is, when
// the policy changes to refuse it (Recheck).
func (p *Proxy) terminate(w http.ResponseWriter, e *decisionlog.Entry, session string, serve func(string, net.Conn), rule string, tracked bool) {
	if !p.acquire(session) {
		e.Decision, e.Status, e.Reason = decisionlog.Denied, http.StatusTooManyRequests, fmt.Sprintf("this session has %d connections open, the most allowed", p.o.MaxTunnels)
		http.Error(w, "paddock egress: denied: "+e.Reason, http.StatusTooManyRequests)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.release(session)
		e.Decision, e.Reason = decisionlog.Errored, "hijack: "+err.Error()
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		p.release(session)
		return
	}
	e.Decision, e.Status, e.Rule = decisionlog.Terminated, http.StatusOK, rule
	done := func() { p.release(session) }
	if tracked {
		rec := p.track(session, e.Host, e.Port, func() { c.Close() })
		done = func() { p.untrack(session, rec); p.release(session) }
	}
	serve(session, &releasingConn{Conn: c, r: brw.Reader, done: done})
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
