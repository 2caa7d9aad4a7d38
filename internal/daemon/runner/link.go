package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/proxy/credproxy"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// In-box addresses of the Runner's services. A box's loopback is its own,
// so every box uses the same ones.
const (
	// BoxAPIAddr is where Claude Code in a box finds the credential proxy
	// (ANTHROPIC_BASE_URL=http://127.0.0.1:4141).
	BoxAPIAddr = "127.0.0.1:4141"
	// ServiceAnthropic names the credential proxy on the channel.
	ServiceAnthropic = "anthropic"
	// BoxEgressAddr is the egress proxy in a box whose posture has one
	// (HTTPS_PROXY=http://127.0.0.1:3128).
	BoxEgressAddr = "127.0.0.1:3128"
	// ServiceEgress names the egress proxy on the channel.
	ServiceEgress = "egress"
)

// Link is the Runner's live channel to one box.
type Link struct {
	Session string
	BoxID   string
	Client  *channel.Client

	sup *supervisor // set once, when the link is installed (setLive)

	open          atomic.Int32 // forwarded connections open (serveForwards)
	warned        atomic.Bool  // the limit on them was logged
	warnedService atomic.Bool  // an unknown service was logged
}

// Close ends the channel (not the box).
func (l *Link) Close() error { return l.Client.Close() }

// Link opens a channel to a running box of session, starts the box's
// loopback listener for the credential proxy and serves what arrives on it.
// Everything that comes over this channel is the session's: the proxy
// refuses another session's token on it.
func (r *Runner) Link(ctx context.Context, be sandbox.Backend, boxID, session string) (*Link, error) {
	conn, err := be.Connect(ctx, boxID)
	if err != nil {
		return nil, err
	}
	cl, err := channel.NewClient(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if _, _, err := cl.Ping(deadline); err != nil {
		cl.Close()
		return nil, fmt.Errorf("box %s: guest does not answer: %w", boxID, err)
	}
	if err := cl.Listen(BoxAPIAddr, ServiceAnthropic, deadline); err != nil {
		cl.Close()
		return nil, fmt.Errorf("box %s: open the API address in the box: %w", boxID, err)
	}
	l := &Link{Session: session, BoxID: boxID, Client: cl}
	go r.serveForwards(l)
	return l, nil
}

// linkSession links a session's box and opens the egress proxy's address
// in the box too: every posture has it (offline refuses everything but the
// direct path there), so egress can change while claude runs.
func (r *Runner) linkSession(ctx context.Context, be sandbox.Backend, s *session.Session) (*Link, error) {
	l, err := r.Link(ctx, be, s.BoxID, s.ID)
	if err != nil {
		return nil, err
	}
	if err := l.Client.Listen(BoxEgressAddr, ServiceEgress, time.Now().Add(30*time.Second)); err != nil {
		l.Close()
		return nil, fmt.Errorf("open the egress address in the box: %w", err)
	}
	return l, nil
}

// maxForwards caps the connections one box has open at once to the
// Runner's services (the credential proxy and the egress proxy together).
// Each costs a channel stream, buffers and goroutines in the Runner; Claude
// Code uses a handful.
var maxForwards int32 = 512

// serveForwards answers the streams the guest opens for forwarded connections.
func (r *Runner) serveForwards(l *Link) {
	for {
		st, h, br, err := l.Client.Accept()
		if err != nil {
			return
		}
		target := r.boxConns
		if h.Service == ServiceEgress {
			target = r.egressConns
		}
		if h.Type != channel.TypeForward || h.Service != ServiceAnthropic && h.Service != ServiceEgress {
			_ = channel.WriteJSONLine(st, channel.Reply{Error: "no such service"})
			st.Close()
			if l.warnedService.CompareAndSwap(false, true) { // once per link: the box may ask in a loop
				r.log.Warn("box asked for an unknown service; later ones are refused without a log line", logkey.Session, l.Session, "service", logkey.Clip(h.Service, 64))
			}
			continue
		}
		if l.open.Add(1) > maxForwards {
			l.open.Add(-1)
			_ = channel.WriteJSONLine(st, channel.Reply{Error: fmt.Sprintf("this box has %d connections open to paddock, the most allowed", maxForwards)})
			st.Close()
			if l.warned.CompareAndSwap(false, true) {
				r.log.Warn("a box reached its limit of open connections to paddock; more are refused", logkey.Session, l.Session, "limit", maxForwards)
			}
			continue
		}
		if err := channel.WriteJSONLine(st, channel.Reply{OK: true}); err != nil {
			l.open.Add(-1)
			st.Close()
			continue
		}
		if !target.push(&sessionConn{Conn: st, r: br, session: l.Session, closed: func() { l.open.Add(-1) }}) {
			l.open.Add(-1)
			st.Close()
			return
		}
	}
}

// sessionConn is a forwarded connection that knows its session.
type sessionConn struct {
	net.Conn
	r       *bufio.Reader // may hold bytes read past the header
	session string
	direct  bool   // TLS the Runner terminated for DirectHost
	closed  func() // runs once, at the first Close
	once    sync.Once
}

func (c *sessionConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *sessionConn) Close() error {
	err := c.Conn.Close()
	if c.closed != nil {
		c.once.Do(c.closed)
	}
	return err
}

// connContext tags a forwarded connection's requests with its session.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*sessionConn); ok {
		if sc.direct {
			ctx = credproxy.WithDirect(ctx)
		}
		return credproxy.WithChannelSession(ctx, sc.session)
	}
	return ctx
}

// chanListener is a net.Listener fed by the channels of every box.
type chanListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return chanAddr{} }

type chanAddr struct{}

func (chanAddr) Network() string { return "channel" }
func (chanAddr) String() string  { return "boxes" }
