package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// A session's published ports (paddock port, a project file's ports):
// each is a listener on the host's loopback whose connections the Runner
// carries over the box's channel to a port on the box's own loopback
// (channel.Dial). The box keeps no network interface; nothing but the
// Runner's listener is opened on the host. The listeners live while the
// box is linked: the record keeps the ports, setLive opens them with a new
// link and closes them with it, so they go when the session sleeps and
// come back, on the same host ports, when it wakes.

// MaxPorts bounds the ports one session publishes.
const MaxPorts = 16

// portDialTimeout bounds the wait for the box's side of one connection.
const portDialTimeout = 10 * time.Second

// portsState holds the open listeners, by session and box port.
type portsState struct {
	mu sync.Mutex
	m  map[string]map[int]*publisher
}

// publisher is one open listener.
type publisher struct {
	ln   net.Listener
	host int
	wg   sync.WaitGroup // its connections
}

// Publish publishes a box port of the session on the host's loopback. On
// a running session the host port opens now, and a host port that cannot
// be opened is refused, with nothing recorded; on a session that does not
// run, the port is recorded and opens when it wakes.
func (r *Runner) Publish(ctx context.Context, ref string, req api.PortRequest) (session.Session, error) {
	if err := req.Check(); err != nil {
		return session.Session{}, err
	}
	s, unlock, err := r.lockSession(ctx, ref, session.OpPort)
	if err != nil {
		return s, err
	}
	defer unlock()
	for _, p := range s.Ports {
		if p.Box == req.Box {
			if req.Host == 0 || req.Host == p.Host {
				return r.withPorts(s), nil
			}
			return s, fmt.Errorf("box port %d of %q is already published on 127.0.0.1:%d; take it back first: paddock port rm %s %d: %w", p.Box, s.Name, p.Host, s.Name, p.Box, errdefs.ErrConflict)
		}
		if req.Host != 0 && p.Host == req.Host {
			return s, fmt.Errorf("host port %d already carries box port %d of %q: %w", req.Host, p.Box, s.Name, errdefs.ErrConflict)
		}
	}
	if len(s.Ports) >= MaxPorts {
		return s, fmt.Errorf("session %q publishes %d ports, the most allowed; take one back (paddock port rm): %w", s.Name, MaxPorts, errdefs.ErrConflict)
	}
	p := session.Port{Box: req.Box, Host: req.Host}
	if r.getLive(s.ID) != nil {
		pub, err := r.openPort(s.ID, p)
		if err != nil {
			return s, err
		}
		p.Host = pub.host
	}
	s.Ports = append(s.Ports, p)
	if err := r.save(&s); err != nil {
		r.closePort(s.ID, p.Box)
		return s, err
	}
	r.log.Info("port published", logkey.Session, s.ID, "box_port", p.Box, "host_port", p.Host)
	return r.withPorts(s), nil
}

// Unpublish takes a box port back: its listener closes (connections
// through it end) and the record forgets it.
func (r *Runner) Unpublish(ctx context.Context, ref string, box int) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpPort)
	if err != nil {
		return s, err
	}
	defer unlock()
	i := slices.IndexFunc(s.Ports, func(p session.Port) bool { return p.Box == box })
	if i < 0 {
		return s, fmt.Errorf("session %q publishes no box port %d (paddock port ls %s): %w", s.Name, box, s.Name, errdefs.ErrNotFound)
	}
	s.Ports = slices.Delete(s.Ports, i, i+1)
	if err := r.save(&s); err != nil {
		return s, err
	}
	r.closePort(s.ID, box)
	return r.withPorts(s), nil
}

// Ports lists the session's published ports, each saying whether its
// host port is open now.
func (r *Runner) Ports(ctx context.Context, ref string) ([]session.Port, error) {
	s, err := r.Session(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.withPorts(s).Ports, nil
}

// DialPort connects to a published box port of a running session through
// its channel (the web page's previews). Only a published port may be
// dialled.
func (r *Runner) DialPort(ctx context.Context, ref string, box int) (net.Conn, error) {
	s, err := r.Session(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(s.Ports, func(p session.Port) bool { return p.Box == box }) {
		return nil, fmt.Errorf("session %q publishes no box port %d: %w", s.Name, box, errdefs.ErrNotFound)
	}
	return r.dialBox(s.ID, s.Name, box)
}

// dialBox carries one connection to box port of a linked session.
func (r *Runner) dialBox(id, name string, box int) (net.Conn, error) {
	lv := r.getLive(id)
	if lv == nil || lv.link == nil {
		return nil, fmt.Errorf("session %q does not run; paddock wake %s: %w", name, name, errdefs.ErrConflict)
	}
	c, err := lv.link.Client.Dial(box, time.Now().Add(portDialTimeout))
	if err != nil {
		return nil, fmt.Errorf("box port %d of %q: %w", box, name, errdefs.ErrUnavailable)
	}
	return c, nil
}

// withPorts fills each port's Open and Error for an answer.
func (r *Runner) withPorts(s session.Session) session.Session {
	s.Ports = slices.Clone(s.Ports)
	running := r.getLive(s.ID) != nil
	r.ports.mu.Lock()
	defer r.ports.mu.Unlock()
	for i := range s.Ports {
		if pub := r.ports.m[s.ID][s.Ports[i].Box]; pub != nil {
			s.Ports[i].Open = true
		} else if running {
			s.Ports[i].Error = "its host port could not be opened when the box started (the Runner's log says why); paddock port rm, then publish it again"
		}
	}
	return s
}

// openPort opens the host listener of p and serves it.
func (r *Runner) openPort(id string, p session.Port) (*publisher, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Host)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("host port %d is in use on 127.0.0.1; pick another (BOX:HOST) or none for a free one: %w", p.Host, errdefs.ErrConflict)
		}
		return nil, fmt.Errorf("open host port %d: %w", p.Host, err)
	}
	pub := &publisher{ln: ln, host: ln.Addr().(*net.TCPAddr).Port}
	r.ports.mu.Lock()
	if r.ports.m == nil {
		r.ports.m = map[string]map[int]*publisher{}
	}
	if r.ports.m[id] == nil {
		r.ports.m[id] = map[int]*publisher{}
	}
	if old := r.ports.m[id][p.Box]; old != nil {
		old.ln.Close()
	}
	r.ports.m[id][p.Box] = pub
	r.ports.mu.Unlock()
	go r.servePort(id, p.Box, pub)
	return pub, nil
}

// servePort carries each connection to the box until the listener closes.
func (r *Runner) servePort(id string, box int, pub *publisher) {
	for {
		c, err := pub.ln.Accept()
		if err != nil {
			return
		}
		pub.wg.Add(1)
		go func() {
			defer pub.wg.Done()
			defer c.Close()
			bc, err := r.dialBox(id, id, box)
			if err != nil {
				return // the client sees the connection close
			}
			defer bc.Close()
			splice(c, bc)
		}()
	}
}

// splice copies both ways until both directions end, half-closing each
// side as its peer finishes writing.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// closePort closes one listener (its open connections are left to end).
func (r *Runner) closePort(id string, box int) {
	r.ports.mu.Lock()
	pub := r.ports.m[id][box]
	delete(r.ports.m[id], box)
	if len(r.ports.m[id]) == 0 {
		delete(r.ports.m, id)
	}
	r.ports.mu.Unlock()
	if pub != nil {
		pub.ln.Close()
	}
}

// openPorts opens the recorded ports of a session whose box was just
// linked. A host port that cannot be opened is logged and shown on the
// session's answers (withPorts); the session runs without it.
func (r *Runner) openPorts(id string) {
	s, err := r.reload(id)
	if err != nil {
		return
	}
	changed := false
	for i, p := range s.Ports {
		pub, err := r.openPort(id, p)
		if err != nil {
			r.log.Warn("a published port could not be opened", logkey.Session, id, "box_port", p.Box, "host_port", p.Host, "err", err)
			continue
		}
		if p.Host != pub.host {
			s.Ports[i].Host, changed = pub.host, true
		}
	}
	if changed {
		_ = r.save(&s)
	}
}

// closePorts closes every listener of a session (its box is no longer
// linked).
func (r *Runner) closePorts(id string) {
	r.ports.mu.Lock()
	pubs := r.ports.m[id]
	delete(r.ports.m, id)
	r.ports.mu.Unlock()
	for _, pub := range pubs {
		pub.ln.Close()
	}
}

// closeAllPorts closes every listener (the Runner ends).
func (r *Runner) closeAllPorts() {
	r.ports.mu.Lock()
	all := r.ports.m
	r.ports.m = nil
	r.ports.mu.Unlock()
	for _, pubs := range all {
		for _, pub := range pubs {
			pub.ln.Close()
		}
	}
}
