package h1

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// FuzzServe feeds arbitrary bytes, as what a client sent on one
// connection, to a Server whose handler answers in each way a handler may
// (a declared length, chunks flushed one by one, a body left unread, no
// body). Whatever they are: no panic, the output is a sequence of
// well-framed HTTP/1.1 responses, and every request the handler sees is
// one the Server's contract lets through: HTTP/1.1 (or a later 1.x, read
// as 1.1: RFC 9110 2.5), a valid Host, valid header fields, no transfer
// coding but chunked.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"GET /sized HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"POST /unread HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789GET /sized HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /sized HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
		"HEAD /sized HTTP/1.1\r\nHost: x\r\n\r\nGET /empty HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	var methods []string // of the requests the handler saw, in order
	var bad string       // what the handler found wrong, if anything
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !httpguts.ValidHostHeader(r.Host) {
			bad = "a request of " + r.Proto + " with Host " + r.Host
		}
		if _, _, found := invalidField(r.Header); found {
			bad = "a request with an invalid header field"
		}
		if len(r.TransferEncoding) > 1 || len(r.TransferEncoding) == 1 && r.TransferEncoding[0] != "chunked" {
			bad = "a request with transfer codings " + strings.Join(r.TransferEncoding, ", ")
		}
		switch r.URL.Path {
		case "/unread":
			w.WriteHeader(http.StatusForbidden)
			return
		case "/stream":
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
			w.(http.Flusher).Flush()
			io.WriteString(w, "end")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Length", "3")
			w.Write(append(b, "abc"...)[:min(3, len(b)+3)])
		}
	}), time.Second)
	f.Fuzz(func(t *testing.T, data []byte) {
		methods, bad = methods[:0], ""
		c := &testenv.MemConn{In: bytes.NewReader(data)}
		srv.ServeConn(c)
		if bad != "" {
			t.Fatalf("the handler saw %s", bad)
		}
		testenv.CheckFramed(t, c.Out.Bytes(), methods)
	})
}
