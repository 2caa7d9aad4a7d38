package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// TestServerShutdown: Shutdown lets a running request finish, closes idle
// connections, and Serve returns http.ErrServerClosed.
func TestServerShutdown(t *testing.T) {
	release := make(chan struct{})
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "done")
	}), time.Second)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	serveErr := make(chan error, 1)
	go func() { serveErr <- ts.Server.Serve(l) }()
	idle, ibr := rawConn(t, ts)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, ibr, "GET")
	busy, bbr := rawConn(t, ts)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	shut := make(chan error, 1)
	go func() { shut <- ts.Server.Shutdown(context.Background()) }()
	if _, err := ibr.ReadByte(); err == nil {
		t.Fatal("the idle connection stayed open")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request running: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if resp, body := readResp(t, bbr, "GET"); body != "done" || !resp.Close {
		t.Fatalf("%q close=%v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := <-serveErr; err != http.ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
}

// TestServerShutdownWaitsForNewConnections: a connection accepted but not
// yet used is not closed at once by Shutdown (its first request may be on
// the way); the request it then sends is served, and Shutdown returns.
func TestServerShutdownWaitsForNewConnections(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served")
	}), time.Second)
	c, br := rawConn(t, ts)
	time.Sleep(50 * time.Millisecond) // accepted
	shut := make(chan error, 1)
	go func() { shut <- ts.Server.Shutdown(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := readResp(t, br, "GET"); body != "served" || !resp.Close {
		t.Fatalf("%q close=%v", body, resp.Close)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestIsTemporaryAccept: running out of descriptors or an aborted
// connection is retried; a closed listener is not.
func TestIsTemporaryAccept(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{net.ErrClosed, false},
		{&net.OpError{Op: "accept", Err: errors.New("use of closed network connection")}, false},
	} {
		if got := isTemporaryAccept(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}

// yamuxListener accepts a yamux session's streams, as the Runner's
// listener of box channel streams does; Close stops accepting only.
type yamuxListener struct {
	sess *yamux.Session
	done chan struct{}
	once *sync.Once
}

func (l yamuxListener) Accept() (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := l.sess.AcceptStream(); ch <- res{c, err} }()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l yamuxListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l yamuxListener) Addr() net.Addr { return l.sess.Addr() }

// TestServerTimeoutsEndChannelStreams: on a box's channel stream, whose
// Close is a half-close that does not wake a blocked read, the header and
// idle timeouts still end the connection (a box cannot hold them open with
// a partial head or by idling), and so do Shutdown and Close (found by
// review).
func TestServerTimeoutsEndChannelStreams(t *testing.T) {
	a, b := net.Pipe()
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	ss, err := yamux.Server(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := yamux.Client(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	defer ss.Close()
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 200*time.Millisecond)
	srv.IdleTimeout = 300 * time.Millisecond
	go srv.Serve(yamuxListener{ss, make(chan struct{}), new(sync.Once)})
	defer srv.Close()
	count := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns)
	}
	open := func(head string) net.Conn {
		st, err := cs.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(st, head)
		return st
	}
	for i := 0; i < 3; i++ {
		open("GET /x HTTP/1.1\r\nHost: x\r\n") // a partial head, held open
	}
	st := open("GET /x HTTP/1.1\r\nHost: x\r\n\r\n") // then idle
	if resp, err := http.ReadResponse(bufio.NewReader(st), nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d channel-stream connections outlived the header and idle timeouts", n)
	}
	// Shutdown and Close end the ones that are open when they are called.
	open("GET /x HTTP/1.1\r\nHost: x\r\n")
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("a channel-stream connection outlived Close: %v", err)
	}
}

// pipeListener hands the server one end of in-memory pipes, whose writes
// block until the other end reads.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// TestServerWriteTimeout: whatever the server itself still has to send —
// the rest of a response once the handler returned, what a handler that
// aborted had written, its own refusal, a 100 Continue — goes out within
// WriteTimeout or the connection ends: a client that reads nothing cannot
// hold the connection's goroutine (the last three found by review).
func TestServerWriteTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		h         http.HandlerFunc
	}{
		{"after the handler", "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "an answer nobody reads") // buffered until the handler returns
		}},
		{"aborted handler", "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, "part of an answer nobody reads")
			panic(http.ErrAbortHandler) // as a proxy does when the upstream breaks off or idles
		}},
		{"server refusal", "GET /x HTTP/1.1\r\n\r\n", func(w http.ResponseWriter, r *http.Request) {}}, // no Host
		{"100 Continue", "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, client := servePipe(t, tc.h, 200*time.Millisecond)
			if _, err := io.WriteString(client, tc.req); err != nil {
				t.Fatal(err)
			}
			if n := connsLeft(srv, 10*time.Second); n != 0 {
				t.Fatal("a client that reads nothing held its connection past the write timeout")
			}
			client.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := client.Read(make([]byte, 64)); err == nil {
				t.Fatalf("the response still went out after the timeout (%d bytes)", n)
			}
		})
	}
}

// servePipe serves h with the given WriteTimeout on one in-memory pipe,
// whose writes block until the other end reads, and returns the server and
// the client's end; both end with the test.
func servePipe(t *testing.T, h http.Handler, writeTimeout time.Duration) (*Server, net.Conn) {
	srv := NewServer(h, time.Second)
	srv.WriteTimeout = writeTimeout
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	go srv.Serve(l)
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); srv.Close() })
	l.conns <- server
	return srv, client
}

// connsLeft waits up to wait for srv to have no connection and returns how
// many it still has.
func connsLeft(srv *Server, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		srv.mu.Lock()
		n := len(srv.conns)
		srv.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stuckCloseConn's Close blocks until release is closed, as a channel
// stream's Close does while its box reads nothing.
type stuckCloseConn struct {
	net.Conn
	closing chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *stuckCloseConn) Close() error {
	c.once.Do(func() { close(c.closing) })
	<-c.release
	return c.Conn.Close()
}

// TestServerAbortDoesNotBlockItsWatchdog: ending a connection whose Close
// blocks does not hold up the watchdog that every connection's timeouts
// share (found by review: a box's channel stream can block Close for the
// session's write timeout).
func TestServerAbortDoesNotBlockItsWatchdog(t *testing.T) {
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), time.Second)
	srv.IdleTimeout = 200 * time.Millisecond
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	go srv.Serve(l)
	release := make(chan struct{})
	defer func() { close(release); srv.Close() }()
	_, a := net.Pipe()
	stuck := &stuckCloseConn{Conn: a, closing: make(chan struct{}), release: release}
	l.conns <- stuck
	// A second connection with a later deadline, already armed when the
	// first one's fires: a partial head, which the 1 s header timeout ends.
	client, b := net.Pipe()
	defer client.Close()
	l.conns <- b
	go io.WriteString(client, "GET /x HTTP/1.1\r\n")
	select {
	case <-stuck.closing: // its idle timeout fired, and its Close blocks
	case <-time.After(10 * time.Second):
		t.Fatal("the idle timeout never ended the first connection")
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(client); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the second connection's header timeout did not end it")
	}
}

// TestServerCloseCancelsInFlight: Close cancels the requests running on
// sockets, whose hang-up the kernel no longer reports once closed here
// (found by review).
func TestServerCloseCancelsInFlight(t *testing.T) {
	started := make(chan struct{})
	done := make(chan struct{})
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
		close(done)
	}), time.Second)
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	ts.Server.Close()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Errorf("1 s after Server.Close the in-flight request's context is still live")
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts.Server.Shutdown(ctx)
}

// The same without a socket (a channel stream): the background read
// notices the close.
func TestServerCloseCancelsInFlightWithoutSocket(t *testing.T) {
	started := make(chan struct{})
	done := make(chan error, 1)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			done <- nil
		case <-time.After(3 * time.Second):
			done <- fmt.Errorf("not cancelled")
		}
	}), time.Second)
	go srv.Serve(hidingListener{l})
	c, _ := net.Dial("tcp", l.Addr().String())
	defer c.Close()
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	srv.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
