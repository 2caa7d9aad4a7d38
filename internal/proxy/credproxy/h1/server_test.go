package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
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
