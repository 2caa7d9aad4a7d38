package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/paddockhq/paddock/internal/base/watchdog"
)

// serverConn is one client connection.
type serverConn struct {
	s      *Server
	c      net.Conn
	cr     connReader
	lr     headLimitReader
	br     *bufio.Reader
	bw     *bufio.Writer
	ctx    context.Context
	remote string
	watch  *watchdog.Watch // idle and head deadlines; never while a request runs
	idle   atomic.Bool
	hup    hangupReg // the kernel's hang-up report; nil: background reads

	fresh atomic.Bool // no request read yet
	born  time.Time

	mu     sync.Mutex // guards gone and cancel
	gone   bool       // the client hung up
	cancel context.CancelFunc
}

// errRequestHeadTooLarge is the read error of a request head over the limit.
var errRequestHeadTooLarge = errors.New("h1: request head too large")

func (s *Server) newConn(c net.Conn) *serverConn {
	sc := &serverConn{s: s, c: c, remote: c.RemoteAddr().String(), ctx: context.Background()}
	sc.cr.conn = c
	sc.cr.cond = sync.NewCond(&sc.cr.mu)
	sc.lr = headLimitReader{r: &sc.cr, limit: -1, err: errRequestHeadTooLarge}
	sc.br = bufio.NewReaderSize(&sc.lr, 8<<10)
	sc.bw = bufio.NewWriterSize(c, 8<<10)
	if s.ConnContext != nil {
		sc.ctx = s.ConnContext(sc.ctx, c)
	}
	sc.idle.Store(true)
	sc.fresh.Store(true)
	sc.born = time.Now()
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		c.Close()
		return nil
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	sc.watch = s.wd.Arm(s.IdleTimeout, sc.abort)
	sc.hup = watchHangup(c, sc.hungUp)
	return sc
}

// abort ends the connection from outside its goroutine (a timeout,
// Shutdown, Close): a deadline in the past wakes a read or write blocked on
// it — closing alone does not, on a channel stream, whose Close is a
// half-close — and the request in flight, if any, is cancelled.
func (sc *serverConn) abort() {
	_ = sc.c.SetDeadline(aLongTimeAgo)
	// The close itself on its own goroutine: a watchdog calls abort and
	// must not block, and a multiplexed stream's Close may wait, up to
	// its write timeout, to send its FIN to a peer that may have stopped
	// reading. The deadline above already ends the reads and
	// writes in progress.
	go sc.c.Close()
	sc.hungUp()
}

// hungUp runs when the kernel reports the client gone: the request in
// flight, if any, is cancelled.
func (sc *serverConn) hungUp() {
	sc.mu.Lock()
	sc.gone = true
	cancel := sc.cancel
	sc.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (sc *serverConn) serve() {
	s := sc.s
	defer func() {
		if sc.hup != nil {
			sc.hup.Stop()
		}
		s.wd.Disarm(sc.watch)
		sc.c.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
	}()
	linger := false // the client may have sent more than was read
	defer func() {
		if linger {
			sc.lingerClose()
		}
	}()
	for {
		sc.idle.Store(true)
		if s.closing.Load() {
			return
		}
		sc.watch.Extend(s.IdleTimeout)
		// The head's limit counts from here, where the buffer may
		// already hold up to its size of a pipelined request.
		sc.lr.limit = int64(s.MaxHeaderBytes) + 4096
		if _, err := sc.br.Peek(1); err != nil {
			return
		}
		linger = true
		sc.idle.Store(false)
		sc.fresh.Store(false)
		sc.watch.Extend(s.ReadHeaderTimeout)
		req, err := http.ReadRequest(sc.br)
		tooLarge := sc.lr.limit == 0
		sc.lr.limit = -1
		sc.watch.Extend(watchdog.Never)
		if err != nil {
			switch {
			case tooLarge:
				sc.fail(http.StatusRequestHeaderFieldsTooLarge, "the request head is larger than the limit of "+strconv.Itoa(s.MaxHeaderBytes)+" bytes")
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isNetError(err):
				// The client went, or a deadline closed the connection.
			case strings.Contains(err.Error(), "unsupported transfer encoding"):
				sc.fail(http.StatusNotImplemented, "only the chunked transfer coding is accepted")
			default:
				// Never the parser's message: it may quote the request.
				sc.fail(http.StatusBadRequest, "paddock could not parse this HTTP/1.1 request (request line, header or body framing)")
			}
			return
		}
		if status, why := checkRequest(req); why != "" {
			sc.fail(status, why)
			return
		}
		if !sc.serveRequest(req) {
			return
		}
		linger = false
	}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// checkRequest applies what net/http's server checks beyond ReadRequest.
func checkRequest(req *http.Request) (int, string) {
	if req.ProtoMajor != 1 || req.ProtoMinor < 1 {
		// HTTP/1.0 would need responses framed by the connection's end,
		// where a cut stream cannot be told from a whole one on a channel
		// stream (no reset): paddock's clients all speak HTTP/1.1.
		return http.StatusHTTPVersionNotSupported, "this server speaks HTTP/1.1 only"
	}
	// http.ReadRequest has moved Host into req.Host (the first, if
	// repeated; a proxy should never forward a client's Host).
	if req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect {
		return http.StatusBadRequest, "the Host header is missing"
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return http.StatusBadRequest, "the Host header is malformed"
	}
	if _, badName, bad := invalidField(req.Header); bad {
		if badName {
			return http.StatusBadRequest, "a header name is malformed"
		}
		return http.StatusBadRequest, "a header value holds a control byte"
	}
	if e := req.Header["Expect"]; len(e) > 0 {
		if len(e) > 1 || !strings.EqualFold(e[0], "100-continue") || !req.ProtoAtLeast(1, 1) {
			return http.StatusExpectationFailed, "only Expect: 100-continue is understood"
		}
	}
	return 0, ""
}

// fail answers a request the server itself refuses, and the connection
// then ends.
func (sc *serverConn) fail(status int, why string) {
	w := &response{sc: sc, h: http.Header{}, closeAfter: true}
	if sc.s.WriteRefusal != nil {
		sc.s.WriteRefusal(w, status, why)
	} else {
		http.Error(w, why, status)
	}
	sc.watch.Extend(sc.s.WriteTimeout)
	w.finish()
}

// boundedFlush flushes what the connection has buffered within
// WriteTimeout (else the connection ends), from a point where its watch
// is off; then the watch is off again.
func (sc *serverConn) boundedFlush() error {
	sc.watch.Extend(sc.s.WriteTimeout)
	err := sc.bw.Flush()
	sc.watch.Extend(watchdog.Never)
	return err
}

// serveRequest runs the handler for req and reports whether the
// connection may carry another request.
func (sc *serverConn) serveRequest(req *http.Request) (keep bool) {
	ctx, cancel := newRequestContext(sc.ctx)
	defer cancel()
	req = req.WithContext(ctx)
	req.RemoteAddr = sc.remote
	w := &response{sc: sc, req: req, h: make(http.Header, 8), head: req.Method == http.MethodHead}
	body := &serverBody{rc: req.Body, w: w}
	body.done.Store(req.Body == nil || req.Body == http.NoBody)
	w.body = body
	body.expect = !body.done.Load() && len(req.Header["Expect"]) > 0
	req.Body = body

	sc.mu.Lock()
	sc.cancel = cancel
	gone := sc.gone
	sc.mu.Unlock()
	if gone {
		cancel()
	}
	if sc.hup == nil && body.done.Load() {
		sc.cr.startBackgroundRead(sc.hungUp)
	}
	aborted := sc.runHandler(w, req)
	sc.mu.Lock()
	sc.cancel = nil
	gone = sc.gone
	sc.mu.Unlock()
	if sc.hup == nil {
		sc.cr.abortPendingRead()
	}
	if aborted {
		w.runAfter()
		return false
	}
	// The rest of the response goes out with a deadline: a client that
	// stopped reading must not hold the connection's goroutine forever.
	// (While the handler writes, bounding a stuck write is the handler's
	// own: see EndConnection.)
	sc.watch.Extend(sc.s.WriteTimeout)
	w.finish()
	sc.watch.Extend(watchdog.Never)
	w.runAfter()
	keep = w.err == nil && !req.Close && !w.closeAfter && !gone && !sc.s.closing.Load()
	if keep && !body.done.Load() {
		// A body the handler left (a refused request): skip a small rest
		// to keep the connection, as net/http's server does.
		sc.watch.Extend(sc.s.ReadHeaderTimeout)
		_, err := io.CopyN(io.Discard, body.rc, maxDiscardBytes+1)
		sc.watch.Extend(watchdog.Never)
		keep = err == io.EOF
	}
	return keep
}

// maxDiscardBytes is how much of a body left unread the server skips to
// keep a connection; more, and it closes it.
const maxDiscardBytes = 256 << 10

// lingerClose ends a connection whose client may still be sending (a
// refused body, a malformed request): it sends FIN, then reads what comes
// for up to half a second, so that the kernel does not answer the unread
// bytes with a reset that could destroy the response before the client
// reads it.
func (sc *serverConn) lingerClose() {
	cw, ok := sc.c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = sc.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, sc.c, maxDiscardBytes)
}

// runHandler calls the handler and reports whether it panicked.
func (sc *serverConn) runHandler(w *response, req *http.Request) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			if v != http.ErrAbortHandler && sc.s.Log != nil {
				buf := make([]byte, 4000)
				buf = buf[:runtime.Stack(buf, false)]
				sc.s.Log.Error("handler panicked", "err", strings.TrimSpace(string(buf)))
			}
			// What was written so far reaches the client, without the end
			// of the response (no last chunk): it sees a cut, not a whole
			// answer. A client that reads nothing gets WriteTimeout.
			sc.boundedFlush()
		}
	}()
	sc.s.Handler.ServeHTTP(w, req)
	return false
}

// serverBody is a request body: it answers Expect: 100-continue on the
// first read and notes the body's end, after which (without a hang-up
// report) the background read may watch the connection.
//
// After its first Read (which answers the Expect, on the handler's
// goroutine), the body may be read by one other goroutine while the
// handler writes the response (a body a proxy streams upstream; see
// EnableFullDuplex): done and n are read by both.
type serverBody struct {
	rc     io.ReadCloser
	w      *response
	expect bool
	done   atomic.Bool
	n      atomic.Int64 // bytes read
}

func (b *serverBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	if b.expect {
		b.expect = false
		if !b.w.wroteHeader {
			b.w.sc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if err := b.w.sc.boundedFlush(); err != nil {
				return 0, err
			}
		}
	}
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	if err == io.EOF {
		b.done.Store(true)
		if sc := b.w.sc; sc.hup == nil {
			sc.cr.startBackgroundRead(sc.hungUp)
		}
	}
	return n, err
}

func (b *serverBody) Close() error { return nil }

// Buffered implements BufferedBody.
func (b *serverBody) Buffered() bool {
	if b.done.Load() {
		return true
	}
	req, br := b.w.req, b.w.sc.br
	return !b.expect && req.ContentLength >= 0 && req.ContentLength-b.n.Load() <= int64(br.Buffered())
}

// connReader reads the connection for the request parser and, on
// connections without a hang-up report, runs the one background read that
// notices the client go while a handler runs (as net/http's server does).
type connReader struct {
	conn    net.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	inRead  bool
	aborted bool
	hasByte bool
	byteBuf [1]byte
}

func (cr *connReader) Read(p []byte) (int, error) {
	cr.mu.Lock()
	if cr.inRead {
		cr.mu.Unlock()
		return 0, errors.New("h1: concurrent read on a connection")
	}
	if cr.hasByte && len(p) > 0 {
		p[0] = cr.byteBuf[0]
		cr.hasByte = false
		cr.mu.Unlock()
		return 1, nil
	}
	cr.mu.Unlock()
	return cr.conn.Read(p)
}

// aLongTimeAgo is a deadline that has passed: set, it ends the reads
// and writes in progress at once.
var aLongTimeAgo = time.Unix(1, 0)

func (cr *connReader) startBackgroundRead(gone func()) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.inRead || cr.hasByte {
		return
	}
	cr.inRead = true
	go cr.backgroundRead(gone)
}

func (cr *connReader) backgroundRead(gone func()) {
	n, err := cr.conn.Read(cr.byteBuf[:])
	cr.mu.Lock()
	if n == 1 {
		cr.hasByte = true // the start of a pipelined request
	}
	var ne net.Error
	if err != nil && !(cr.aborted && errors.As(err, &ne) && ne.Timeout()) {
		defer gone()
	}
	cr.aborted, cr.inRead = false, false
	cr.mu.Unlock()
	cr.cond.Broadcast()
}

// abortPendingRead stops the background read, if one runs, and waits for
// it.
func (cr *connReader) abortPendingRead() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if !cr.inRead {
		return
	}
	cr.aborted = true
	_ = cr.conn.SetReadDeadline(aLongTimeAgo)
	for cr.inRead {
		cr.cond.Wait()
	}
	_ = cr.conn.SetReadDeadline(time.Time{})
}
