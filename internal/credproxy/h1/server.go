package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/paddockhq/paddock/internal/watchdog"
)

// Server serves an http.Handler over HTTP/1.1 on its own connection
// loop: one goroutine per connection reads a request with net/http's own
// parser (http.ReadRequest), runs the handler on that goroutine and writes
// the response, with no other goroutine or timer per request.
//
// It replaces net/http's server in front of paddock's proxy because that server
// starts a goroutine per request to watch for the client going away and
// stops it again with a socket deadline when the handler returns: thread
// wake-ups and syscalls on every request, which on a proxy's short requests
// cost more than the work (docs/PERFORMANCE.md). Here a client that goes
// away is seen by the kernel: each socket is registered once per connection
// with an epoll set that reports its hang-up (hangup_linux.go), which
// cancels the request in flight. Connections without a socket (a box's
// channel streams) fall back to one background read per request, started
// only once its body has been read.
//
// Contracts, beyond http.ReadRequest's:
//   - HTTP/1.1 only (1.0 gets a 505: its responses of unknown length
//     would be framed by the connection's end, where a cut stream looks
//     whole); requests need a valid Host header
//     (a repeated one counts as its first: a proxy should never pass it on); header names and values must be valid (no control bytes);
//     a request head is at most MaxHeaderBytes. An obsolete line folding
//     is replaced by a space, as http.ReadRequest does (RFC 9112 5.2). A malformed request gets a
//     400 (431 for a large head, 505 for another version, 501 for an
//     unsupported transfer coding, 417 for an Expect other than
//     100-continue), written by WriteRefusal, never echoing its bytes,
//     and the connection is closed.
//   - Expect: 100-continue is answered when the handler first reads the
//     body. A body the handler did not read to its end closes the
//     connection after the response (nothing of it is taken for a next
//     request). So does a request framed by a transfer coding: one that
//     also carried a Content-Length must end its connection (RFC 9112
//     6.3), and http.ReadRequest drops that length unseen.
//   - The response is framed by its Content-Length, or chunked. Hop-by-hop
//     headers a handler sets are dropped; response trailers are not sent.
//     A handler that panics (a proxy aborting a broken stream) gets its
//     connection closed with the response unfinished, so a client
//     never takes a cut stream for a whole one.
//   - ReadHeaderTimeout bounds reading a request head once its first byte
//     came; IdleTimeout bounds the wait for it. Both close the connection,
//     enforced by a watchdog (package watchdog) with one watch per
//     connection.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds reading a request head; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request; 0 means 2 minutes.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing what is left of a response once its
	// handler returned (at most a buffer's worth); 0 means 1 minute.
	WriteTimeout time.Duration
	// MaxHeaderBytes caps a request head; 0 means 64 KiB.
	MaxHeaderBytes int
	// ConnContext, if set, gives the context of a connection's requests.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// Log receives handler panics other than http.ErrAbortHandler; nil
	// discards.
	Log *slog.Logger
	// WriteRefusal, if set, writes the response to a request the Server
	// refuses itself (a malformed head, another HTTP version, …): status
	// and a reason that never quotes the request. nil writes the reason as
	// plain text (http.Error).
	WriteRefusal func(w http.ResponseWriter, status int, reason string)

	initOnce sync.Once
	wd       *watchdog.Watchdog

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	closing   atomic.Bool
}

// NewServer returns a Server for h with the given header read timeout and
// the defaults for the rest.
func NewServer(h http.Handler, readHeaderTimeout time.Duration) *Server {
	return &Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		if s.ReadHeaderTimeout <= 0 {
			s.ReadHeaderTimeout = 10 * time.Second
		}
		if s.IdleTimeout <= 0 {
			s.IdleTimeout = 2 * time.Minute
		}
		if s.WriteTimeout <= 0 {
			s.WriteTimeout = time.Minute
		}
		if s.MaxHeaderBytes <= 0 {
			s.MaxHeaderBytes = 64 << 10
		}
		s.wd = watchdog.New(min(s.ReadHeaderTimeout, s.IdleTimeout, s.WriteTimeout))
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*serverConn]struct{}{}
	})
}

// Serve accepts connections on l until Close or Shutdown, after which it
// returns http.ErrServerClosed; any other accept error ends it too.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if isTemporaryAccept(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		sc := s.newConn(c)
		if sc == nil {
			continue
		}
		go sc.serve()
	}
}

// ServeConn serves one connection c, on the calling goroutine, until it
// ends, as Serve serves each connection it accepts; it closes c.
func (s *Server) ServeConn(c net.Conn) {
	s.init()
	if sc := s.newConn(c); sc != nil {
		sc.serve()
	}
}

// isTemporaryAccept reports accept errors worth retrying: out of file
// descriptors or buffers, a connection aborted before it was accepted, a
// timeout.
func isTemporaryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close closes the listeners and every connection at once, cancelling
// the requests they run.
func (s *Server) Close() error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		// A socket closed here leaves the hang-up set unreported: abort
		// cancels what it was running (net/http's server does the same).
		c.abort()
	}
	return nil
}

// Shutdown closes the listeners, then idle connections as they become
// idle (a new one after 5 s without a request), until none is left or ctx
// ends (whose error it then returns). Requests in flight run to their end;
// Close after a failed Shutdown cancels them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	wait := time.Millisecond
	for {
		s.mu.Lock()
		for c := range s.conns {
			// A new connection counts as idle once it has had 5 s to
			// send its first request (as net/http's server counts it).
			if c.idle.Load() && (!c.fresh.Load() || time.Since(c.born) > 5*time.Second) {
				c.abort()
			}
		}
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

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
