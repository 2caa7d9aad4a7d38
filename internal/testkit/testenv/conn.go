package testenv

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// MemConn is a connection whose peer sent In and reads Out: reads end
// with io.EOF once In is read, as when a client half-closes. Deadlines
// and Close do nothing.
type MemConn struct {
	In  *bytes.Reader
	Out bytes.Buffer
}

func (c *MemConn) Read(p []byte) (int, error)         { return c.In.Read(p) }
func (c *MemConn) Write(p []byte) (int, error)        { return c.Out.Write(p) }
func (c *MemConn) Close() error                       { return nil }
func (c *MemConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *MemConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *MemConn) SetDeadline(t time.Time) error      { return nil }
func (c *MemConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *MemConn) SetWriteDeadline(t time.Time) error { return nil }

// CheckFramed holds what a server wrote on a connection, out, to be
// well-framed HTTP/1.1 responses, to requests of the given methods in
// order (GET beyond them: a server's own refusals): each parses, has a
// status from 100 to 599 and a body that reads to its end, and out ends
// exactly where the last response does.
func CheckFramed(tb testing.TB, out []byte, methods []string) {
	tb.Helper()
	br := bufio.NewReader(bytes.NewReader(out))
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err == io.EOF {
			return
		}
		req := &http.Request{Method: "GET"}
		if i < len(methods) {
			req.Method = methods[i]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			tb.Fatalf("malformed response: %v\n%q", err, out)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 599 {
			tb.Fatalf("bad status %d", resp.StatusCode)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			tb.Fatalf("response body: %v\n%q", err, out)
		}
	}
}
