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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/paddockhq/paddock/internal/testenv"
)

// rawConn dials ts and returns the connection with a reader over it.
func rawConn(t *testing.T, ts *testenv.Served) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func readResp(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return resp, string(b)
}

// TestServerFraming: a response of unknown length goes chunked; a declared
// length is kept; HEAD and 204 carry no body; several requests share one
// connection.
func TestServerFraming(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			io.WriteString(w, "one,")
			w.(http.Flusher).Flush()
			io.WriteString(w, "two")
		case "/sized":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "sized")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
			io.WriteString(w, "dropped")
		case "/nothing":
		}
	}), time.Second)
	defer ts.Close()
	c, br := rawConn(t, ts)
	io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /sized HTTP/1.1\r\nHost: x\r\n\r\nHEAD /sized HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /empty HTTP/1.1\r\nHost: x\r\n\r\nGET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResp(t, br, "GET")
	if body != "one,two" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("stream: %q %v", body, resp.TransferEncoding)
	}
	if resp, body = readResp(t, br, "GET"); body != "sized" || resp.ContentLength != 5 {
		t.Fatalf("sized: %q %d", body, resp.ContentLength)
	}
	if resp, body = readResp(t, br, "HEAD"); body != "" || resp.Header.Get("Content-Length") != "5" {
		t.Fatalf("head: %q %v", body, resp.Header)
	}
	if resp, body = readResp(t, br, "GET"); resp.StatusCode != 204 || body != "" {
		t.Fatalf("204: %d %q", resp.StatusCode, body)
	}
	if resp, body = readResp(t, br, "GET"); resp.StatusCode != 200 || resp.ContentLength != 0 || body != "" {
		t.Fatalf("nothing: %d %d %q", resp.StatusCode, resp.ContentLength, body)
	}

}

// TestServerRefusesMalformed: each malformed request gets its status and
// a reason, without its bytes echoed, and the connection ends.
func TestServerRefusesMalformed(t *testing.T) {
	var served atomic.Int32
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }), time.Second)
	defer ts.Close()
	big := strings.Repeat("a", 70<<10)
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"no host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad host", "GET / HTTP/1.1\r\nHost: a b/c\r\n\r\n", 400},
		{"http/2 version", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"http/1.0", "GET / HTTP/1.0\r\n\r\n", 505},
		{"http/1.0 with host", "POST / HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 505},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"bad te", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"te and cl", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\nContent-Length: 3\r\n\r\n", 501},
		{"two lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"negative length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"bare lf in value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : a\r\n\r\n", 400},
		{"nul in name", "GET / HTTP/1.1\r\nHost: x\r\nX\x00A: a\r\n\r\n", 400},
		{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"expect other", "POST / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na", 417},
		{"head too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := rawConn(t, ts)
			go io.WriteString(c, tc.req+"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, body := readResp(t, br, "GET")
			if resp.StatusCode != tc.status || body == "" {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if strings.Contains(body, "X-") || strings.Contains(body, "aaaa") {
				t.Fatalf("the request's bytes echoed: %s", body)
			}
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("the connection went on after a malformed request")
			}
		})
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the handler saw %d malformed requests", n)
	}
}

// TestServerExpectContinue: the interim 100 comes when the handler reads
// the body, not before; a handler that refuses without reading sends none.
func TestServerExpectContinue(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}), time.Second)
	defer ts.Close()
	c, br := rawConn(t, ts)
	io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("interim: %q %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	if resp, body := readResp(t, br, "POST"); resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	io.WriteString(c, "POST /refuse HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	// No 100 went out, so the client may hold its body back for good: the
	// refusal is the connection's last.
	if resp, _ := readResp(t, br, "POST"); resp.StatusCode != 401 || !resp.Close {
		t.Fatalf("refusal: %d close=%v", resp.StatusCode, resp.Close)
	}
}

// TestServerUnreadBody: a small body the handler left is skipped and the
// connection goes on; a large one ends the connection, and the client
// still reads the whole response (no reset destroys it).
func TestServerUnreadBody(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "no")
	}), time.Second)
	defer ts.Close()
	c, br := rawConn(t, ts)
	io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	for i := 0; i < 2; i++ {
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 403 || body != "no" {
			t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
		}
	}
	c2, br2 := rawConn(t, ts)
	n := 4 << 20
	go func() {
		io.WriteString(c2, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(n)+"\r\n\r\n")
		c2.Write(make([]byte, n))
	}()
	resp, body := readResp(t, br2, "POST")
	if resp.StatusCode != 403 || body != "no" || !resp.Close {
		t.Fatalf("large: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
}

// TestServerChunkedRequestEndsConnection: a request framed by chunks, with
// or without a Content-Length beside it (RFC 9112 6.3: the server MUST
// close after both), is answered and its connection ends; nothing sent
// behind it is taken for a request. A request with a length keeps its
// connection.
func TestServerChunkedRequestEndsConnection(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+":"+string(b))
		mu.Unlock()
		io.WriteString(w, "ok")
	}), time.Second)
	defer ts.Close()
	for _, head := range []string{
		"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /te HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n",
	} {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		c, br := rawConn(t, ts)
		io.WriteString(c, head+"3\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResp(t, br, "POST")
		if resp.StatusCode != 200 || body != "ok" || !resp.Close {
			t.Fatalf("%q: %d %q close=%v", head, resp.StatusCode, body, resp.Close)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("%q: the connection went on (%d, %v)", head, n, err)
		}
		mu.Lock()
		if len(bodies) != 1 || bodies[0] != "/te:abc" {
			t.Fatalf("%q: handler saw %q", head, bodies)
		}
		mu.Unlock()
	}
	c, br := rawConn(t, ts)
	io.WriteString(c, "POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResp(t, br, "POST"); resp.Close {
		t.Fatal("a request with a length closed its connection")
	}
	if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("next: %d %q", resp.StatusCode, body)
	}
}

// hiddenConn hides a socket's type, so the server cannot register it for
// hang-up reports and must watch it with background reads.
type hiddenConn struct{ net.Conn }

type hidingListener struct{ net.Listener }

func (l hidingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return hiddenConn{c}, nil
}

// TestServerClientGoneCancels: a client that goes away while its request
// runs cancels the request's context, whether the kernel reports the
// hang-up (a socket) or a background read notices it (a channel stream);
// the same holds after a body was read, and a request whose client stays
// is not cancelled by a pipelined next request.
func TestServerClientGoneCancels(t *testing.T) {
	for _, hidden := range []bool{false, true} {
		name := "socket"
		if hidden {
			name = "background read"
		}
		t.Run(name, func(t *testing.T) {
			cancelled := make(chan error, 4)
			started := make(chan struct{}, 4)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if r.URL.Path == "/quick" {
					return
				}
				started <- struct{}{}
				select {
				case <-r.Context().Done():
					cancelled <- r.Context().Err()
				case <-time.After(300 * time.Millisecond):
					cancelled <- nil
				}
			})
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var ts *testenv.Served
			if hidden {
				ts = testenv.ServeOn(NewServer(h, time.Second), hidingListener{l})
			} else {
				ts = testenv.ServeOn(NewServer(h, time.Second), l)
			}
			defer ts.Close()

			for _, req := range []string{"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n", "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"} {
				c, _ := rawConn(t, ts)
				io.WriteString(c, req)
				<-started
				c.Close()
				select {
				case err := <-cancelled:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("%q: the request ran on after its client went (%v)", req, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the handler never returned")
				}
			}
			// A client that stays, with a second request already sent.
			c, br := rawConn(t, ts)
			io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\nGET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
			<-started
			if err := <-cancelled; err != nil {
				t.Fatalf("a pipelined request cancelled the one before it: %v", err)
			}
			for i := 0; i < 2; i++ {
				if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
					t.Fatalf("response %d: %d", i, resp.StatusCode)
				}
			}
		})
	}
}

// TestServerAbortCutsResponse: a handler that panics with ErrAbortHandler
// (a proxy on a broken upstream stream) leaves the client a cut
// response, never one that looks whole; another panic is logged, not fatal.
func TestServerAbortCutsResponse(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("a bug")
	}), time.Second)
	defer ts.Close()
	for _, path := range []string{"/abort", "/bug"} {
		c, br := rawConn(t, ts)
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Fatalf("%s: a cut response read as whole: %q", path, b)
		}
		if string(b) != "partial" {
			t.Fatalf("%s: %q", path, b)
		}
	}
}

// TestServerHeadersSanitized: hop-by-hop headers a handler sets are not
// sent, and a value holding CR or LF cannot add a header.
func TestServerHeadersSanitized(t *testing.T) {
	ts := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Connection", "X-Secret")
		h.Set("Keep-Alive", "timeout=1")
		h.Set("Transfer-Encoding", "gzip")
		h["X-Split"] = []string{"a\r\nX-Injected: 1"}
		io.WriteString(w, "ok")
	}), time.Second)
	defer ts.Close()
	c, br := rawConn(t, ts)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResp(t, br, "GET")
	if body != "ok" || resp.Header.Get("X-Injected") != "" || resp.Header.Get("Keep-Alive") != "" ||
		resp.Header.Get("Connection") != "" || resp.Header.Get("X-Split") != "a  X-Injected: 1" {
		t.Fatalf("%q %v", body, resp.Header)
	}
}

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
