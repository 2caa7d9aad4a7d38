package testenv

import (
	"context"
	"net"
	"testing"
	"time"
)

// ServeConns listens on a loopback port until the test ends and runs
// handle on each connection it accepts, on a goroutine of its own, closing
// the connection when handle returns. It returns the address.
func ServeConns(tb testing.TB, handle func(c net.Conn)) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l.Addr().String()
}

// A Server is what Served runs: net/http's server, or the proxy's own
// (package h1).
type Server interface {
	Serve(l net.Listener) error
	Close() error
	Shutdown(ctx context.Context) error
}

// Served is a Server serving a listener, shaped like httptest.Server.
type Served struct {
	URL      string
	Listener net.Listener
	Server   Server
}

// ServeLoopback serves s on a new loopback port.
func ServeLoopback(tb testing.TB, s Server) *Served {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ServeOn(s, l)
}

// ServeOn serves s on l, a listener the test made; l's address is the URL.
func ServeOn(s Server, l net.Listener) *Served {
	go s.Serve(l)
	return &Served{URL: "http://" + l.Addr().String(), Listener: l, Server: s}
}

// Close closes every connection at once and waits up to 10 s for their
// handlers to return.
func (ts *Served) Close() {
	ts.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts.Server.Shutdown(ctx)
}
