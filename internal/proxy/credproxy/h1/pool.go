package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"syscall"
	"time"
)

// upstreamConn is one connection and its buffers.
type upstreamConn struct {
	key     string
	conn    net.Conn // what requests are written to: raw, or TLS over it
	raw     net.Conn // the socket
	lr      *headLimitReader
	br      *bufio.Reader
	bw      *bufio.Writer
	idleAt  time.Time
	rawConn syscall.RawConn // for the liveness check; nil if unavailable
	peek    func(fd uintptr) bool
	quiet   bool // what peek found: nothing to read, no close
}

// get returns a live pooled connection for key, or dials one.
func (t *Transport) get(ctx context.Context, key string, u *url.URL) (*upstreamConn, error) {
	for {
		t.mu.Lock()
		list := t.reapLocked(key)
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		uc := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if !uc.alive() {
			uc.raw.Close()
			continue
		}
		return uc, nil
	}
	return t.dial(ctx, key, u)
}

// reapLocked closes the pooled connections of key idle for longer than
// IdleConnTimeout (the oldest are at the bottom) and returns the rest.
func (t *Transport) reapLocked(key string) []*upstreamConn {
	list := t.idle[key]
	if t.IdleConnTimeout <= 0 {
		return list
	}
	cut := time.Now().Add(-t.IdleConnTimeout)
	n := 0
	for n < len(list) && list[n].idleAt.Before(cut) {
		list[n].raw.Close()
		list[n] = nil
		n++
	}
	if n > 0 {
		list = append(list[:0], list[n:]...)
		t.idle[key] = list
	}
	return list
}

// dial connects to u's host (port 80 or 443 by default), with TLS for
// https, offering only HTTP/1.1.
func (t *Transport) dial(ctx context.Context, key string, u *url.URL) (*upstreamConn, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	timeout := t.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	c, err := d.DialContext(dctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	plain := c
	raw, _ := c.(syscall.Conn)
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		if cfg.MinVersion == 0 {
			cfg.MinVersion = tls.VersionTLS12
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	uc := &upstreamConn{key: key, conn: c, raw: plain}
	if raw != nil {
		if rc, err := raw.SyscallConn(); err == nil {
			// Made once per connection: the check runs before every reuse.
			uc.rawConn = rc
			uc.peek = func(fd uintptr) bool {
				var buf [1]byte
				_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				uc.quiet = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
				return true // done, whatever the answer
			}
		}
	}
	uc.lr = &headLimitReader{r: c, limit: -1}
	uc.br = bufio.NewReaderSize(uc.lr, 32<<10)
	uc.bw = bufio.NewWriterSize(c, 32<<10)
	return uc, nil
}

// put pools a connection whose exchange ended cleanly.
func (t *Transport) put(uc *upstreamConn) {
	uc.idleAt = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*upstreamConn{}
	}
	t.reapLocked(uc.key)
	if max := t.MaxIdleConnsPerHost; max <= 0 || len(t.idle[uc.key]) < max {
		t.idle[uc.key] = append(t.idle[uc.key], uc)
		uc = nil
	}
	t.mu.Unlock()
	if uc != nil {
		uc.raw.Close()
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, uc := range list {
			uc.raw.Close()
		}
	}
}

// alive reports whether a pooled connection may carry a request: nothing
// buffered, and the socket neither closed by the server nor holding stray
// bytes (a peek that would block means it is quiet and open).
func (uc *upstreamConn) alive() bool {
	if uc.br.Buffered() > 0 {
		return false
	}
	if uc.conn != uc.raw {
		// TLS keeps what it read off the socket but has not decrypted in
		// its own buffer, where the socket peek below cannot see it: ask
		// it, with a deadline already past, so nothing blocks. Only "would
		// block" means quiet. (A deadline in the past arms no timer.)
		uc.conn.SetReadDeadline(aLongTimeAgo)
		_, err := uc.br.Peek(1)
		uc.conn.SetReadDeadline(time.Time{})
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return false
		}
	}
	if uc.rawConn == nil {
		return true
	}
	uc.quiet = false
	err := uc.rawConn.Read(uc.peek)
	return err == nil && uc.quiet
}
