package h1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req to bw as an HTTP/1.1 request: what Request.Write
// sends for the requests a proxy builds, without its per-request
// allocations (a transfer writer, a sorted copy of the header, the target
// as a new string).
//
// Contracts:
//   - The target is the URL's escaped path ("/" if empty; otherwise it
//     must start with "/") and raw query;
//     Host is req.Host, else the URL's host. User-Agent is the header's
//     first value, none if that is empty, Go's default if there is none.
//   - A body needs a known length (ContentLength > 0), and exactly that
//     many bytes are sent; an empty body is http.NoBody (POST, PUT and
//     PATCH then say "Content-Length: 0", as net/http does). Transfer
//     codings and trailers are refused. The body is closed.
//   - Header fields are sent in map order, except Host, User-Agent,
//     Content-Length, Transfer-Encoding and Trailer, which come from the
//     request's own fields. A field name, value, method, host or query
//     with a byte that could end the line or field fails the request, as
//     in net/http's Transport: nothing is sent rewritten.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	if err := checkOutbound(req); err != nil {
		closeBody(req)
		return err
	}
	return writeChecked(bw, req)
}

// checkOutbound is writeRequest's refusal, made before a byte is written:
// it fails the requests writeRequest would not send.
func checkOutbound(req *http.Request) error {
	host := requestHost(req)
	switch {
	case !httpguts.ValidHeaderFieldName(req.Method): // a method is a token, as a field name is
		return fmt.Errorf("h1: invalid method %q", req.Method)
	case host == "" || !httpguts.ValidHostHeader(host):
		return fmt.Errorf("h1: invalid host %q", host)
	case req.URL.Opaque != "" || !validTarget(req.URL.RawQuery) || req.URL.Path != "" && req.URL.Path[0] != '/':
		return errors.New("h1: unsupported request target")
	case len(req.TransferEncoding) > 0 || len(req.Trailer) > 0:
		return errors.New("h1: transfer codings and trailers are not sent upstream")
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.ContentLength <= 0 {
		return errors.New("h1: a request body needs a known length")
	}
	if k, badName, bad := invalidField(req.Header); bad {
		if badName {
			return fmt.Errorf("h1: invalid header name %q", k)
		}
		return fmt.Errorf("h1: invalid value for header %q", k)
	}
	return nil
}

// requestHost is the host a request is sent to: its Host, else its URL's.
func requestHost(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	return req.URL.Host
}

// writeChecked writes a request checkOutbound passed, and closes its body.
func writeChecked(bw *bufio.Writer, req *http.Request) (err error) {
	if req.Body != nil {
		defer func() {
			if cerr := req.Body.Close(); err == nil {
				err = cerr
			}
		}()
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	if p := req.URL.EscapedPath(); p != "" {
		bw.WriteString(p)
	} else {
		bw.WriteByte('/')
	}
	if req.URL.RawQuery != "" {
		bw.WriteByte('?')
		bw.WriteString(req.URL.RawQuery)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(requestHost(req))
	bw.WriteString("\r\n")
	if vs, ok := req.Header["User-Agent"]; !ok {
		bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	} else if len(vs) > 0 && vs[0] != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(vs[0])
		bw.WriteString("\r\n")
	}
	switch {
	case hasBody:
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(req.ContentLength, 10))
		bw.WriteString("\r\n")
	case req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch:
		bw.WriteString("Content-Length: 0\r\n")
	}
	if req.Close {
		bw.WriteString("Connection: close\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	if !hasBody {
		return nil
	}
	if b, ok := req.Body.(BodyWriter); ok {
		// In one write from memory, or each piece as it comes.
		if n, err := b.WriteBody(bw, req.ContentLength); err != nil {
			return fmt.Errorf("h1: request body: %d of %d bytes: %w", n, req.ContentLength, err)
		}
		return nil
	}
	n, err := io.CopyN(bw, req.Body, req.ContentLength)
	if err != nil {
		return fmt.Errorf("h1: request body: %d of %d bytes: %w", n, req.ContentLength, err)
	}
	if extra, _ := req.Body.Read(make([]byte, 1)); extra > 0 {
		return fmt.Errorf("h1: request body longer than its ContentLength %d", req.ContentLength)
	}
	return nil
}

// validTarget reports whether a raw query has no byte that could end the
// request line (a space, a control byte) or start a fragment.
func validTarget(q string) bool {
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c == 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// BytesBody is a request body already in memory, which Transport sends in
// one write (BodyWriter). Its zero value is empty; Reset sets what it
// holds.
type BytesBody struct {
	b   []byte
	off int
}

// Reset makes the body b, to be read from its start.
func (r *BytesBody) Reset(b []byte) { r.b, r.off = b, 0 }

func (r *BytesBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *BytesBody) Close() error { return nil }

// WriteBody implements BodyWriter: what is left of the body, in one write.
func (r *BytesBody) WriteBody(w io.Writer, n int64) (int64, error) {
	if int64(len(r.b)-r.off) != n {
		return 0, fmt.Errorf("the body holds %d bytes, not %d", len(r.b)-r.off, n)
	}
	m, err := w.Write(r.b[r.off:])
	r.off += m
	return int64(m), err
}
