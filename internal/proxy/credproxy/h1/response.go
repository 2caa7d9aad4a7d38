package h1

import (
	"bufio"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is the http.ResponseWriter of one request.
type response struct {
	sc          *serverConn
	req         *http.Request // nil for the server's own refusals
	body        *serverBody   // nil for the server's own refusals
	h           http.Header
	status      int
	wroteHeader bool
	head        bool  // a HEAD request: no body is sent
	noBody      bool  // the status or method allows no body
	chunked     bool  // the body goes chunked
	cl          int64 // the declared Content-Length, or -1
	written     int64
	closeAfter  bool
	err         error
	after       []func()
}

// AfterResponse implements AfterResponder.
func (w *response) AfterResponse(f func()) { w.after = append(w.after, f) }

// runAfter runs the AfterResponse functions, once.
func (w *response) runAfter() {
	for i, f := range w.after {
		w.after[i] = nil
		f()
	}
	w.after = w.after[:0]
}

func (w *response) Header() http.Header { return w.h }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		return // interim responses are not relayed
	}
	w.status, w.wroteHeader = code, true
	w.writeHead(false)
}

// writeHead writes the status line and headers; final says the handler
// has returned, so an unset length is the length written (none).
func (w *response) writeHead(final bool) {
	h := w.h
	for k := range hopByHop {
		delete(h, k)
	}
	w.cl = -1
	if v := h["Content-Length"]; len(v) == 1 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			w.cl = n
		} else {
			delete(h, "Content-Length")
		}
	} else if len(v) > 1 {
		delete(h, "Content-Length")
	}
	w.noBody = w.head || w.status == http.StatusNoContent || w.status == http.StatusNotModified
	switch {
	case w.status == http.StatusNoContent || w.status == http.StatusNotModified:
		delete(h, "Content-Length")
	case w.noBody:
	case w.cl >= 0:
	case final:
		w.cl = 0
		h["Content-Length"] = []string{"0"}
	default: // an unknown length: chunked (every request is HTTP/1.1)
		w.chunked = true
	}
	if w.req != nil && (w.req.Close || len(w.req.TransferEncoding) > 0) || w.sc.s.closing.Load() {
		// A request framed by a transfer coding ends its connection: Go's
		// parser drops a Content-Length sent beside it, so this is the only
		// way to honour RFC 9112 6.3 (a server MUST close after a request
		// with both). Clients that care send a length.
		w.closeAfter = true
	}
	if b := w.body; b != nil && !b.done.Load() && (b.expect || w.req.ContentLength < 0 || w.req.ContentLength-b.n.Load() > maxDiscardBytes) {
		// A rest of the body too large to skip, or one the client was
		// told to hold back (no 100 Continue went out, so it may never
		// come): this response is the connection's last, and says so.
		w.closeAfter = true
	}
	bw := w.sc.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(w.status))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(w.status))
	bw.WriteString("\r\n")
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			writeFieldValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
}

// writeFieldValue writes v with any control byte (CR, LF, NUL, …) as a
// space, so a value can never end the header early.
func writeFieldValue(bw *bufio.Writer, v string) {
	if httpguts.ValidHeaderFieldValue(v) {
		bw.WriteString(v)
		return
	}
	for i := 0; i < len(v); i++ {
		b := v[i]
		if b < ' ' && b != '\t' || b == 0x7f {
			b = ' '
		}
		bw.WriteByte(b)
	}
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody || len(p) == 0 {
		return len(p), nil
	}
	var short error
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		p = p[:w.cl-w.written]
		short = http.ErrContentLength
	}
	bw := w.sc.bw
	if w.chunked {
		var hex [16]byte
		bw.Write(strconv.AppendInt(hex[:0], int64(len(p)), 16))
		bw.WriteString("\r\n")
	}
	n, err := bw.Write(p)
	if w.chunked && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	w.written += int64(n)
	if err != nil {
		w.err = err
		return n, err
	}
	return n, short
}

// FlushError sends what was written so far.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	if err := w.sc.bw.Flush(); err != nil {
		w.err = err
	}
	return w.err
}

// Flush implements http.Flusher.
func (w *response) Flush() { _ = w.FlushError() }

// SetReadDeadline serves http.ResponseController (a handler's own
// timeout on reading the body).
func (w *response) SetReadDeadline(t time.Time) error { return w.sc.c.SetReadDeadline(t) }

// EnableFullDuplex serves http.ResponseController. A Server is always
// full duplex: a handler may read the request's body after it began the
// response, and once the handler has read from it, one other goroutine
// may read it while the handler writes.
func (w *response) EnableFullDuplex() error { return nil }

// EndConnection implements ConnectionEnder.
func (w *response) EndConnection() { w.sc.abort() }

// finish ends the response after the handler returned.
func (w *response) finish() {
	if !w.wroteHeader {
		w.status, w.wroteHeader = http.StatusOK, true
		w.writeHead(true)
	}
	if w.err != nil {
		return
	}
	if w.chunked {
		w.sc.bw.WriteString("0\r\n\r\n")
	}
	if w.cl >= 0 && w.written < w.cl && !w.noBody {
		w.closeAfter = true // the client sees a short body; the connection cannot go on
	}
	if err := w.sc.bw.Flush(); err != nil {
		w.err = err
	}
}
