package h1

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/watchdog"
)

// Server serves an http.Handler over HTTP/1.1 on its own connection
// loop: one goroutine per connection reads a request with net/http's own
// parser (http.ReadRequest), runs the handler on that goroutine and writes
// the response, with no other goroutine or timer per request.
//
// It replaces net/http's server in front of paddock's proxy because that server
// starts a goroutine per request to watch for the client going away and
// stops it again with a socket deadline when the handler returns: thread
// wake-ups and syscalls on every request, which on a proxy's short requests
// cost more than the work (docs/PERFORMANCE.md). Here a client that goes
// away is seen by the kernel: each socket is registered once per connection
// with an epoll set that reports its hang-up (hangup_linux.go), which
// cancels the request in flight. Connections without a socket (a box's
// channel streams) fall back to one background read per request, started
// only once its body has been read.
//
// Contracts, beyond http.ReadRequest's:
//   - HTTP/1.1 only (a later 1.x is served as 1.1, as RFC 9110 2.5 asks;
//     1.0 gets a 505: its responses of unknown length would be framed by
//     the connection's end, where a cut stream looks whole); requests need
//     a valid Host header (a repeated one counts as its first: a proxy
//     should never pass it on); header names and values must be valid (no
//     control bytes);
//     a request head is at most MaxHeaderBytes. An obsolete line folding
//     is replaced by a space, as http.ReadRequest does (RFC 9112 5.2). A malformed request gets a
//     400 (431 for a large head, 505 for another version, 501 for an
//     unsupported transfer coding, 417 for an Expect other than
//     100-continue), written by WriteRefusal, never echoing its bytes,
//     and the connection is closed.
//   - Expect: 100-continue is answered when the handler first reads the
//     body. A body the handler did not read to its end closes the
//     connection after the response (nothing of it is taken for a next
//     request). So does a request framed by a transfer coding: one that
//     also carried a Content-Length must end its connection (RFC 9112
//     6.3), and http.ReadRequest drops that length unseen.
//   - The response is framed by its Content-Length, or chunked. Hop-by-hop
//     headers a handler sets are dropped; response trailers are not sent.
//     A handler that panics (a proxy aborting a broken stream) gets its
//     connection closed with the response unfinished, so a client
//     never takes a cut stream for a whole one.
//   - ReadHeaderTimeout bounds reading a request head once its first byte
//     came; IdleTimeout bounds the wait for it. Both close the connection,
//     enforced by a watchdog (package watchdog) with one watch per
//     connection.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds reading a request head; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request; 0 means 2 minutes.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing what is left of a response once its
	// handler returned (at most a buffer's worth); 0 means 1 minute.
	WriteTimeout time.Duration
	// MaxHeaderBytes caps a request head; 0 means 64 KiB.
	MaxHeaderBytes int
	// ConnContext, if set, gives the context of a connection's requests.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// Log receives handler panics other than http.ErrAbortHandler; nil
	// discards.
	Log *slog.Logger
	// WriteRefusal, if set, writes the response to a request the Server
	// refuses itself (a malformed head, another HTTP version, …): status
	// and a reason that never quotes the request. nil writes the reason as
	// plain text (http.Error).
	WriteRefusal func(w http.ResponseWriter, status int, reason string)

	initOnce sync.Once
	wd       *watchdog.Watchdog

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	closing   atomic.Bool
}

// NewServer returns a Server for h with the given header read timeout and
// the defaults for the rest.
func NewServer(h http.Handler, readHeaderTimeout time.Duration) *Server {
	return &Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		if s.ReadHeaderTimeout <= 0 {
			s.ReadHeaderTimeout = 10 * time.Second
		}
		if s.IdleTimeout <= 0 {
			s.IdleTimeout = 2 * time.Minute
		}
		if s.WriteTimeout <= 0 {
			s.WriteTimeout = time.Minute
		}
		if s.MaxHeaderBytes <= 0 {
			s.MaxHeaderBytes = 64 << 10
		}
		s.wd = watchdog.New(min(s.ReadHeaderTimeout, s.IdleTimeout, s.WriteTimeout))
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*serverConn]struct{}{}
	})
}

// Serve accepts connections on l until Close or Shutdown, after which it
// returns http.ErrServerClosed; any other accept error ends it too.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if isTemporaryAccept(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		sc := s.newConn(c)
		if sc == nil {
			continue
		}
		go sc.serve()
	}
}

// ServeConn serves one connection c, on the calling goroutine, until it
// ends, as Serve serves each connection it accepts; it closes c.
func (s *Server) ServeConn(c net.Conn) {
	s.init()
	if sc := s.newConn(c); sc != nil {
		sc.serve()
	}
}

// isTemporaryAccept reports accept errors worth retrying: out of file
// descriptors or buffers, a connection aborted before it was accepted, a
// timeout.
func isTemporaryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close closes the listeners and every connection at once, cancelling
// the requests they run.
func (s *Server) Close() error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		// A socket closed here leaves the hang-up set unreported: abort
		// cancels what it was running (net/http's server does the same).
		c.abort()
	}
	return nil
}

// Shutdown closes the listeners, then idle connections as they become
// idle (a new one after 5 s without a request), until none is left or ctx
// ends (whose error it then returns). Requests in flight run to their end;
// Close after a failed Shutdown cancels them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	wait := time.Millisecond
	for {
		s.mu.Lock()
		for c := range s.conns {
			// A new connection counts as idle once it has had 5 s to
			// send its first request (as net/http's server counts it).
			if c.idle.Load() && (!c.fresh.Load() || time.Since(c.born) > 5*time.Second) {
				c.abort()
			}
		}
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
