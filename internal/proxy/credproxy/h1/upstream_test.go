package h1

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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// countConns serves h and counts the connections it accepts.
func countConns(t *testing.T, h http.Handler, tlsOn bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

func roundTrip(t *testing.T, tr http.RoundTripper, ctx context.Context, method, url, body string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// TestTransportReusesAndTLS: sequential requests share one connection, over
// plain HTTP and over TLS (HTTP/1.1 by ALPN), with bodies of known and
// unknown length, and HEAD.
func TestTransportReusesAndTLS(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("chunked") != "" {
			w.Write([]byte("part1 "))
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, r.Proto+" "+r.Method+" "+string(b))
	})
	for _, tlsOn := range []bool{false, true} {
		srv, conns := countConns(t, h, tlsOn)
		tr := NewTransport(4, time.Minute)
		if tlsOn {
			tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		}
		for i, q := range []string{"", "?chunked=1", "", "?chunked=1"} {
			resp, body, err := roundTrip(t, tr, context.Background(), "POST", srv.URL+"/x"+q, "hello")
			if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(body, "HTTP/1.1 POST hello") {
				t.Fatalf("tls=%v request %d: %v %v %q", tlsOn, i, err, resp, body)
			}
		}
		resp, body, err := roundTrip(t, tr, context.Background(), "HEAD", srv.URL+"/x", "")
		if err != nil || resp.StatusCode != 200 || body != "" {
			t.Fatalf("HEAD: %v %q", err, body)
		}
		if n := conns.Load(); n != 1 {
			t.Fatalf("tls=%v: %d connections for 5 sequential requests", tlsOn, n)
		}
		tr.CloseIdleConnections()
	}
}

// TestTransportStaleAndClose: a pooled connection the server has closed is
// not used; a response that says Connection: close is not pooled.
func TestTransportStaleAndClose(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	})
	srv, conns := countConns(t, h, false)
	tr := NewTransport(4, time.Minute)
	if _, body, err := roundTrip(t, tr, context.Background(), "GET", srv.URL+"/a", ""); err != nil || body != "ok" {
		t.Fatal(err, body)
	}
	srv.CloseClientConnections() // the server drops its idle keep-alive
	time.Sleep(50 * time.Millisecond)
	if _, body, err := roundTrip(t, tr, context.Background(), "POST", srv.URL+"/b", "x"); err != nil || body != "ok" {
		t.Fatalf("after the server closed the idle connection: %v %q", err, body)
	}
	if _, _, err := roundTrip(t, tr, context.Background(), "GET", srv.URL+"/close", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := roundTrip(t, tr, context.Background(), "GET", srv.URL+"/c", ""); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections; want 3 (first, after the drop, after Connection: close)", n)
	}
}

// TestTransportCancelAndTimeouts: a cancel closes the connection and the
// error is the context's; a slow head is a Timeout() error; a huge head is
// refused.
func TestTransportCancelAndTimeouts(t *testing.T) {
	gone := make(chan struct{}, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/slow":
			<-r.Context().Done()
			gone <- struct{}{}
		case "/stream":
			w.Write([]byte("first"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			gone <- struct{}{}
		case "/bighead":
			w.Header().Set("X-Big", strings.Repeat("a", 2<<20))
		}
	})
	srv, _ := countConns(t, h, false)
	tr := NewTransport(4, 200*time.Millisecond)

	_, _, err := roundTrip(t, tr, context.Background(), "POST", srv.URL+"/slow", "x")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("slow head: %v", err)
	}
	<-gone

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/stream", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	io.ReadFull(resp.Body, buf)
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream did not see the cancel")
	}

	// A transport of its own, whose head timeout a loaded machine (-race,
	// other tests) cannot reach while 1 MiB of head goes by.
	if _, _, err := roundTrip(t, NewTransport(4, time.Minute), context.Background(), "GET", srv.URL+"/bighead", ""); !errors.Is(err, errHeadTooLarge) {
		t.Fatalf("big head: %v", err)
	}
	if _, _, err := roundTrip(t, tr, context.Background(), "GET", "ftp://x/y", ""); err == nil {
		t.Fatal("ftp URL accepted")
	}
}

// heldConn holds back writes while hold is set, so two TLS records leave
// in one TCP segment.
type heldConn struct {
	net.Conn
	hold bool
	buf  []byte
}

func (h *heldConn) Write(p []byte) (int, error) {
	if h.hold {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

// TestTransportTLSStrayRecordNotReused: over TLS, a stray response that
// arrives in the same segment as the real one sits in the TLS layer's
// buffer, out of a socket peek's sight; the connection must not be reused,
// or the next request (another session's, perhaps) gets that response.
func TestTransportTLSStrayRecordNotReused(t *testing.T) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	cfg := ts.TLS.Clone()
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	ts.Close()
	var served atomic.Bool
	addr := testenv.ServeConns(t, func(c net.Conn) {
		first := !served.Swap(true) // the first connection's first answer
		hc := &heldConn{Conn: c}
		tc := tls.Server(hc, cfg)
		br := bufio.NewReader(tc)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if first {
				hc.hold = true
				io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nINJECT")
				hc.hold = false
				hc.Write(hc.buf)
				first = false
				continue
			}
			io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
		}
	})
	tr := NewTransport(4, time.Minute)
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	url := "https://" + addr + "/"
	if _, b, err := roundTrip(t, tr, context.Background(), "GET", url, ""); err != nil || b != "ok" {
		t.Fatalf("first: %q %v", b, err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, b, err := roundTrip(t, tr, context.Background(), "GET", url, ""); err != nil || b != "real" {
		t.Fatalf("second request got %q %v; want the answer to itself", b, err)
	}
}

// TestTransportCancelledNotSent: a request whose context is already done
// never reaches the upstream (a Messages request is billed).
func TestTransportCancelledNotSent(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bill" {
			hits.Add(1)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := NewTransport(4, time.Minute)
	for i := 0; i < 50; i++ {
		roundTrip(t, tr, context.Background(), "GET", srv.URL+"/warm", "") // a pooled connection
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := roundTrip(t, tr, ctx, "POST", srv.URL+"/bill", "{}"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d of 50 cancelled requests reached the upstream", n)
	}
}

// TestTransportEarlyAnswer: an answer whose head comes before a large
// request is all written is returned, not lost behind a write that cannot
// finish; the write is stopped when the answer ends, and that connection is
// not reused. A stream the upstream starts before reading the body keeps
// its connection. An upstream that reads nothing and answers nothing is
// cut by the head timeout.
func TestTransportEarlyAnswer(t *testing.T) {
	big := strings.Repeat("x", 32<<20)
	t.Run("refused, then reads nothing", func(t *testing.T) {
		answered := make(chan struct{})
		drained := make(chan int64, 1)
		var conns atomic.Int32
		addr := testenv.ServeConns(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if conns.Add(1) > 1 {
				serveOK(c, br)
				return
			}
			http.ReadRequest(br)
			io.WriteString(c, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
			// Once the client has the answer, read what still comes: the
			// proxy must have stopped writing and closed, well short of
			// the whole body.
			select {
			case <-answered:
			case <-time.After(20 * time.Second):
			}
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			n, _ := io.Copy(io.Discard, br)
			drained <- n
		})
		tr := NewTransport(4, time.Minute)
		done := make(chan error, 1)
		go func() {
			resp, body, err := roundTrip(t, tr, context.Background(), "POST", "http://"+addr+"/", big)
			if err == nil && (resp.StatusCode != 413 || body != "big") {
				err = fmt.Errorf("got %d %q, want the upstream's 413", resp.StatusCode, body)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the early answer never came: lost behind the blocked write")
		}
		close(answered)
		if n := <-drained; n >= int64(len(big)) {
			t.Fatalf("the upstream read %d bytes after answering: the write went on", n)
		}
		// The next request takes a new connection and gets its answer.
		resp, body, err := roundTrip(t, tr, context.Background(), "POST", "http://"+addr+"/", "next")
		if err != nil || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("next request: %v %v %q", err, resp, body)
		}
		if n := conns.Load(); n != 2 {
			t.Fatalf("%d connections, want 2: the refused one must not be reused", n)
		}
	})
	t.Run("stream before the body is read", func(t *testing.T) {
		var conns atomic.Int32
		addr := testenv.ServeConns(t, func(c net.Conn) {
			conns.Add(1)
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				// The head of a chunked answer, and its first chunk, go
				// out before the body is read; its length comes last.
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nstart \r\n")
				n, _ := io.Copy(io.Discard, req.Body)
				last := strconv.FormatInt(n, 10)
				fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(last), last)
			}
		})
		tr := NewTransport(4, time.Minute)
		for i := 0; i < 3; i++ {
			resp, body, err := roundTrip(t, tr, context.Background(), "POST", "http://"+addr+"/", big)
			if err != nil || resp.StatusCode != 200 || body != "start "+strconv.Itoa(len(big)) {
				t.Fatalf("request %d: %v %v %q", i, err, resp, body)
			}
		}
		if n := conns.Load(); n != 1 {
			t.Fatalf("%d connections for 3 requests: a stream begun early must keep its connection", n)
		}
	})
	t.Run("an answer that fails while the body is written", func(t *testing.T) {
		// A 101 (paddock never asks to switch) before the body is read:
		// RoundTrip fails, and only once its writer is done with the body,
		// which the proxy reuses for another request once it returns.
		release := make(chan struct{})
		defer close(release)
		addr := testenv.ServeConns(t, func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
			<-release // open, not reading
		})
		body := &closeMark{Reader: strings.NewReader(big)}
		req, _ := http.NewRequest("POST", "http://"+addr+"/", body)
		req.ContentLength = int64(len(big))
		if _, err := NewTransport(4, time.Minute).RoundTrip(req); err == nil {
			t.Fatal("a 101 was accepted")
		}
		if !body.closed.Load() {
			t.Fatal("RoundTrip returned while its writer still had the body")
		}
	})
	t.Run("reads nothing, answers nothing", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		addr := testenv.ServeConns(t, func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			<-release // open, not reading
		})
		tr := NewTransport(4, 300*time.Millisecond)
		done := make(chan error, 1)
		go func() {
			_, _, err := roundTrip(t, tr, context.Background(), "POST", "http://"+addr+"/", big)
			done <- err
		}()
		select {
		case err := <-done:
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("err %v; want a timeout", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the request write hung")
		}
	})
}

// closeMark is a request body that records its Close, which takes a
// moment: a RoundTrip that does not wait for its writer returns first.
type closeMark struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeMark) Close() error {
	time.Sleep(50 * time.Millisecond)
	c.closed.Store(true)
	return nil
}

// serveOK answers every request on c with 200 "ok".
func serveOK(c net.Conn, br *bufio.Reader) {
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

// FuzzTransportResponse sends arbitrary bytes as the upstream's answer to
// one request, then asks again: whatever the first answer was — torn,
// doubled, interim flood, wrong framing — the second request gets its own
// answer or an error, never bytes of the first (a reused connection that
// still held them would hand them to the next request, which may be
// another session's), also when the first answer comes before a large
// request is all written. Nothing panics and nothing hangs past the
// deadlines.
func FuzzTransportResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\nContent-Length: 4\r\n\r\nfake",
		"HTTP/1.0 200 OK\r\n\r\nok",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"garbage\r\n\r\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, first []byte, early bool) {
		// The server keeps the connection open after its first answer
		// (where stray bytes would wait for the next request), unless the
		// input ends in a NUL, which closes it (a quick end for torn input).
		// With early, the first request's body is large (written from a
		// goroutine of its own) and the server answers before reading it.
		closeAfter := len(first) > 0 && first[len(first)-1] == 0
		firstBody := "{}"
		if early {
			firstBody = strings.Repeat("x", 4*EarlyAnswerMin)
		}
		addr := testenv.ServeConns(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path != "/first" {
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
					continue
				}
				if early {
					c.Write(first)
				}
				io.Copy(io.Discard, req.Body)
				if !early {
					c.Write(first)
				}
				if closeAfter {
					return
				}
			}
		})
		tr := NewTransport(4, 100*time.Millisecond)
		defer tr.CloseIdleConnections()
		base := "http://" + addr
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/first", strings.NewReader(firstBody))
		if resp, err := tr.RoundTrip(req); err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, "POST", base+"/second", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return // an error is a clean outcome
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != 200 || string(b) != "real") {
			t.Fatalf("the second request got %d %q after the first answer %q", resp.StatusCode, b, first)
		}
	})
}

// TestTransportRefusesBeforeConnecting: a request the Transport will not
// send (here a header value that would end its line) fails at once, small
// or large, and no connection is made for it. A large one used to be
// refused by its write's goroutine while RoundTrip waited for an answer to
// it, until the head timeout (a minute here).
func TestTransportRefusesBeforeConnecting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			defer c.Close() // read nothing, answer nothing
		}
	}()
	tr := NewTransport(4, time.Minute)
	for _, size := range []int{100, EarlyAnswerMin + 1, 1 << 20} {
		body := &closeCount{Reader: strings.NewReader(strings.Repeat("x", size))}
		req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/v1/messages", nil)
		req.Body, req.ContentLength = body, int64(size)
		req.Header.Set("X-Split", "a\r\nInjected: 1")
		done := make(chan error, 1)
		go func() {
			_, err := tr.RoundTrip(req)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), `invalid value for header "X-Split"`) {
				t.Fatalf("%d bytes: %v", size, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d bytes: a refused request waited for an answer", size)
		}
		if body.closed.Load() != 1 {
			t.Fatalf("%d bytes: body closed %d times", size, body.closed.Load())
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections made for refused requests", n)
	}
}

type closeCount struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCount) Close() error { c.closed.Add(1); return nil }

// TestCapabilitiesOf: Transport states its promises; a RoundTripper that
// does not implement Capable promises nothing more.
func TestCapabilitiesOf(t *testing.T) {
	for _, c := range []struct {
		rt   http.RoundTripper
		want Capabilities
	}{
		{NewTransport(1, time.Second), Capabilities{AbortableBodies: true, StreamedBodies: true}},
		{http.DefaultTransport, Capabilities{}},
	} {
		if got := CapabilitiesOf(c.rt); got != c.want {
			t.Errorf("%T: %+v, want %+v", c.rt, got, c.want)
		}
	}
}
