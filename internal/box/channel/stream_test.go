package channel

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestTLSKeptAliveOverAForward: an HTTPS server over a forwarded stream
// (as the Runner's service and API proxies are) answers a second POST on
// the same kept-alive connection. net/http sets a read deadline in the
// past after each response; yamux's timeout error is not Temporary, and
// crypto/tls made it permanent, so the server closed the connection
// before reading the second request and the client's POST got EOF (gh's
// GraphQL call, flaky under load).
func TestTLSKeptAliveOverAForward(t *testing.T) {
	a, b := net.Pipe()
	cl, err := NewClient(a)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := NewServer(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); gs.Close() })
	caPEM, cert := testenv.CA(t, "svc.test")
	served := make(chan int, 4)
	go func() {
		st, _, br, err := cl.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		_ = WriteJSONLine(st, Reply{OK: true})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			served <- len(body)
			fmt.Fprintf(w, "got %d", len(body))
		})}
		tc := tls.Server(&readerConn{st, br}, &tls.Config{Certificates: []tls.Certificate{cert}})
		_ = srv.Serve(&oneListener{c: tc, done: make(chan struct{})})
	}()
	bc, bbr, err := gs.OpenForward("svc")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := tls.Client(&readerConn{bc, bbr}, &tls.Config{ServerName: "svc.test", RootCAs: pool})
	br := bufio.NewReader(tc)
	for i := 1; i <= 3; i++ {
		body := `{"query":"mutation"}`
		fmt.Fprintf(tc, "POST /graphql HTTP/1.1\r\nHost: svc.test\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("POST %d on the kept-alive connection: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %d: %s", i, resp.Status)
		}
		time.Sleep(50 * time.Millisecond) // the server's background read is aborted meanwhile
	}
	if len(served) != 3 {
		t.Fatalf("%d requests reached the handler, want 3", len(served))
	}
}

// readerConn reads through the bufio.Reader that holds what followed the
// header.
type readerConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.br.Read(b) }

// oneListener accepts c once, then blocks until closed.
type oneListener struct {
	c    net.Conn
	done chan struct{}
}

func (l *oneListener) Accept() (net.Conn, error) {
	if c := l.c; c != nil {
		l.c = nil
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneListener) Close() error   { return nil }
func (l *oneListener) Addr() net.Addr { return &net.UnixAddr{Name: "forward", Net: "unix"} }
