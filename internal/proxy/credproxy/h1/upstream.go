package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/watchdog"
)

// Transport is an HTTP/1.1 client for a proxy's upstream (TLS for https)
// over a keep-alive pool, with the whole exchange — writing the request, reading
// the response head and body — on the caller's goroutine; only a request
// body over 16 KiB is written from a goroutine of its own, so that an answer
// that comes before it is all sent is seen.
//
// net/http's Transport runs two goroutines per connection and hands every
// request and response between them and the caller; on a proxy's short
// requests those handoffs cost more than the work (see docs/PERFORMANCE.md).
// This is the shape nginx has: one connection, one request at a time, the
// bytes parsed by net/http's own ReadResponse and written by Request.Write.
//
// Contracts:
//   - No proxy from the environment, no compression added: the request goes
//     as the caller built it, and the response comes back as sent.
//   - The request's context cancels it at any point: a request already
//     cancelled is not sent; later, the connection is closed at once (the
//     upstream sees its client go), and RoundTrip or the body's Read returns
//     the context's error.
//   - ResponseHeaderTimeout bounds writing the request and waiting for the
//     response head; the error is a net.Error whose Timeout() is true.
//   - An answer whose head comes before a large request is all written (a
//     413 from an upstream that then stops reading; a stream started before
//     the body is read, golang/go#40747) is returned at once. The rest of the
//     request goes on while the answer is read; if it has not all gone
//     250 ms after the answer ends, it is stopped and the connection is not
//     reused. A body that may itself wait on someone (ReadAborter: one
//     streamed from a proxy's client) has its read stopped with it.
//     RoundTrip and the body's end return only once the write is done with
//     the request's body. (Capabilities says so to a caller: both
//     StreamedBodies and AbortableBodies.)
//   - A request body that implements BodyWriter writes itself; any other is
//     copied, exactly ContentLength bytes of it.
//   - The response body implements Aborter.
//   - A connection returns to the pool only after its response body was read
//     to the end, with neither side asking to close; a pooled connection is
//     checked for a close or stray bytes from the server before reuse. A
//     request is never sent twice.
//   - Response heads are limited to MaxResponseHeaderBytes each, and to 16
//     interim (1xx) responses before the final one.
//   - Pooled connections idle for longer than IdleConnTimeout are closed
//     when the pool is next used.
type Transport struct {
	// DialTimeout bounds connecting (and the TLS handshake).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds writing the request and waiting for the
	// response head; 0: none.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout drops pooled connections idle for longer.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost caps the pool per scheme and host.
	MaxIdleConnsPerHost int
	// MaxResponseHeaderBytes caps a response head (default 1 MiB).
	MaxResponseHeaderBytes int64
	// TLSClientConfig is cloned for https; nil uses the system's roots.
	TLSClientConfig *tls.Config

	mu   sync.Mutex
	idle map[string][]*upstreamConn

	wdOnce sync.Once
	wd     *watchdog.Watchdog // the response head deadline
}

// headTimeoutError is the error of a response head that did not come in
// time; like a socket deadline's, its Timeout() is true.
type headTimeoutError struct{}

func (headTimeoutError) Error() string {
	return "h1: timeout awaiting the upstream's response head"
}
func (headTimeoutError) Timeout() bool   { return true }
func (headTimeoutError) Temporary() bool { return true }

// Capabilities implements Capable: Transport's response bodies can be
// aborted, and a request body may be one that stalls.
func (t *Transport) Capabilities() Capabilities {
	return Capabilities{AbortableBodies: true, StreamedBodies: true}
}

// NewTransport returns the default upstream Transport.
func NewTransport(maxIdle int, responseHeaderTimeout time.Duration) *Transport {
	return &Transport{
		DialTimeout:           10 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   maxIdle,
	}
}

// headLimitReader fails reads beyond limit while limit >= 0, with err
// (errHeadTooLarge if nil).
type headLimitReader struct {
	r     io.Reader
	limit int64
	err   error
}

var errHeadTooLarge = errors.New("h1: upstream response head too large")

func (h *headLimitReader) Read(p []byte) (int, error) {
	if h.limit < 0 {
		return h.r.Read(p)
	}
	if h.limit == 0 {
		if h.err != nil {
			return 0, h.err
		}
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > h.limit {
		p = p[:h.limit]
	}
	n, err := h.r.Read(p)
	h.limit -= int64(n)
	return n, err
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
		closeBody(req)
		return nil, fmt.Errorf("h1: unsupported upstream URL %v", req.URL)
	}
	if err := ctx.Err(); err != nil { // a request already cancelled is never sent
		closeBody(req)
		return nil, err
	}
	// A request writeRequest would refuse fails here, at once: refused
	// later, by the large body's write, it would leave readHead waiting for
	// an answer to a request never sent, until the head timeout.
	if err := checkOutbound(req); err != nil {
		closeBody(req)
		return nil, err
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	uc, err := t.get(ctx, key, req.URL)
	if err != nil {
		closeBody(req)
		return nil, ctxErr(ctx, err)
	}
	// From here a cancel closes the connection (the socket under any TLS:
	// closing a tls.Conn may block sending its alert).
	cw := watchCancel(ctx, uc.raw)
	fail := func(err error) (*http.Response, error) {
		cw.stop()
		uc.raw.Close()
		return nil, ctxErr(ctx, err)
	}
	if err := ctx.Err(); err != nil { // cancelled while connecting
		closeBody(req)
		return fail(err)
	}
	// The deadline covers writing the request and reading the response
	// head: an upstream that stops reading the body is cut too. It closes
	// the socket from the watchdog (no socket deadline: see watchdog).
	var head *watchdog.Watch
	if t.ResponseHeaderTimeout > 0 {
		t.wdOnce.Do(func() { t.wd = watchdog.New(t.ResponseHeaderTimeout) })
		head = t.wd.Arm(t.ResponseHeaderTimeout, func() { uc.raw.Close() })
	}
	timedOut := func(err error) error {
		if head != nil && t.wd.Disarm(head) {
			return headTimeoutError{}
		}
		return err
	}
	var resp *http.Response
	var writing chan error // a large body's write, while it may still run
	if req.ContentLength <= EarlyAnswerMin {
		// The common case, on this goroutine alone: a small request goes
		// into the socket's buffers whether or not the upstream reads it.
		if err := writeChecked(uc.bw, req); err != nil {
			return fail(timedOut(err))
		}
		if err := uc.bw.Flush(); err != nil {
			return fail(timedOut(err))
		}
		if resp, err = t.readHead(uc, req); err != nil {
			return fail(timedOut(err))
		}
	} else {
		// A large body is written on a goroutine of its own while this one
		// waits for the answer, which may come first: a refusal (413) from
		// an upstream that then stops reading, or a stream the upstream
		// starts before it reads (golang/go#40747).
		writing = startWrite(uc, req)
		resp, err = t.readHead(uc, req)
		if err != nil {
			select {
			case werr := <-writing:
				if werr != nil {
					err = werr // the write failed, and first
				}
			default:
				uc.raw.Close() // no answer: end the write too
				abortBodyRead(req.Body)
				<-writing
			}
			return fail(timedOut(err))
		}
		select {
		case werr := <-writing:
			writing = nil
			if werr != nil {
				resp.Close = true // an answer, but the upstream did not take the whole request
			}
		default: // still writing: the answer's end settles it (upstreamBody.finish)
		}
	}
	// From here a failure must also wait for a write still running: it
	// reads req.Body, which the caller reuses once RoundTrip returns.
	failAfterHead := func(err error) (*http.Response, error) {
		resp.Body.Close()
		r, err := fail(err) // closes the connection: the write ends
		if writing != nil {
			abortBodyRead(req.Body)
			<-writing
		}
		return r, err
	}
	if err := timedOut(nil); err != nil {
		return failAfterHead(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return failAfterHead(errors.New("h1: upstream switched protocols"))
	}
	resp.Body = &upstreamBody{rc: resp.Body, t: t, uc: uc, cw: cw, ctx: ctx, writing: writing,
		reuse: !resp.Close && !req.Close, reqBody: req.Body}
	return resp, nil
}

// BodyReadError is a request body's own failure during its write (a body
// streamed from a client that broke off), as opposed to the upstream's:
// the request can never be finished, and its connection is closed. A body
// that writes itself (WriteBody) returns its source's failure in one.
type BodyReadError struct{ Err error }

func (e BodyReadError) Error() string { return "reading the request body: " + e.Err.Error() }
func (e BodyReadError) Unwrap() error { return e.Err }

// abortBodyRead stops a read of a request body that may wait on someone
// else (ReadAborter), wherever a write is stopped.
func abortBodyRead(body io.ReadCloser) {
	if a, ok := body.(ReadAborter); ok {
		a.AbortRead()
	}
}

// EarlyAnswerMin is the body size above which RoundTrip writes the
// request on a goroutine of its own and watches for an answer meanwhile.
// A smaller request fits, with any head a Server admits, in the
// buffers of a fresh connection (on Linux 16 KiB to send, and the
// upstream's receive window, 64 KiB or more): its write does not wait for
// the upstream to read.
const EarlyAnswerMin = 16 << 10

// startWrite writes req (which checkOutbound passed) to uc from a goroutine
// of its own, and then sends the outcome on the channel it returns. (Its
// own function, so that the small requests' path allocates no closure.)
func startWrite(uc *upstreamConn, req *http.Request) chan error {
	done := make(chan error, 1)
	go func() {
		err := writeChecked(uc.bw, req)
		if err == nil {
			err = uc.bw.Flush()
		}
		if errors.As(err, new(BodyReadError)) {
			// The request can never be finished: the upstream must not
			// wait for the rest of it, nor this exchange for its answer.
			uc.raw.Close()
		}
		done <- err
	}()
	return done
}

// readHead reads the response head to req, past up to maxInterim interim
// (1xx) answers, all within MaxResponseHeaderBytes each.
func (t *Transport) readHead(uc *upstreamConn, req *http.Request) (*http.Response, error) {
	uc.lr.limit = t.maxHead()
	defer func() { uc.lr.limit = -1 }()
	for interim := 0; ; interim++ {
		resp, err := http.ReadResponse(uc.br, req)
		if err != nil {
			return nil, err
		}
		// 1xx answers are interim (a 101 would switch protocols, which
		// paddock never asks for); their heads share one size budget.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if interim == maxInterim {
			return nil, fmt.Errorf("h1: more than %d interim responses", maxInterim)
		}
	}
}

// cancelWatch closes a connection when a request's context is cancelled:
// through Server's request context without allocating, or with
// context.AfterFunc.
type cancelWatch struct {
	cw        CloseWatcher
	afterStop func() bool
}

func watchCancel(ctx context.Context, c io.Closer) cancelWatch {
	if cw, ok := ctx.(CloseWatcher); ok {
		cw.WatchClose(c)
		return cancelWatch{cw: cw}
	}
	return cancelWatch{afterStop: context.AfterFunc(ctx, func() { c.Close() })}
}

// stop ends the watch and reports whether it did so before a cancel.
func (w cancelWatch) stop() bool {
	if w.cw != nil {
		return w.cw.UnwatchClose()
	}
	return w.afterStop()
}

// maxInterim caps the 1xx responses before a final one.
const maxInterim = 16

func (t *Transport) maxHead() int64 {
	if t.MaxResponseHeaderBytes > 0 {
		return t.MaxResponseHeaderBytes
	}
	return 1 << 20
}

// ctxErr prefers the context's error: a cancelled request's failure is its
// cancellation, not the closed connection that carried it out.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// upstreamBody returns its connection to the pool once read to the end.
type upstreamBody struct {
	rc      io.ReadCloser
	t       *Transport
	uc      *upstreamConn
	cw      cancelWatch
	ctx     context.Context
	writing chan error // the request's write, if it was still running at the answer's head
	reqBody io.ReadCloser
	reuse   bool
	done    bool
	state   atomic.Int32
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			// Bare, as net/http's transport returns it: the cause is
			// the cancellation, not the closed connection.
			err = cerr
		}
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	b.finish(false)
	return nil
}

// Abort implements Aborter. After the body finished it does nothing: the
// connection may be in the pool.
func (b *upstreamBody) Abort() {
	if b.state.CompareAndSwap(bodyActive, bodyAborted) {
		b.uc.raw.Close()
	}
}

// upstreamBody.state orders finish against Abort.
const (
	bodyActive int32 = iota
	bodyFinished
	bodyAborted
)

// finish releases the connection: to the pool after a clean end, closed
// otherwise.
func (b *upstreamBody) finish(atEOF bool) {
	if b.done {
		return
	}
	b.done = true
	finished := b.state.CompareAndSwap(bodyActive, bodyFinished)
	keep := b.cw.stop() && finished && atEOF && b.reuse
	if b.writing != nil && !b.wrote(keep) {
		keep = false
	}
	if keep {
		b.t.put(b.uc)
		return
	}
	b.uc.raw.Close()
}

// wrote settles a request write still running when the answer's head came
// and reports whether the whole request went out; the writer is done when
// it returns (it reads the request's body, which the caller reuses).
//
// An upstream that read the whole request before it ended its answer may
// still have the writer a moment from reporting it: when the connection
// could be kept, it is given writeGrace. A write still blocked after that
// is an upstream that will not read the rest: it is stopped with a past
// deadline, and the connection is not reused.
func (b *upstreamBody) wrote(couldKeep bool) bool {
	select {
	case err := <-b.writing:
		return err == nil
	default:
	}
	if couldKeep {
		t := time.NewTimer(writeGrace)
		select {
		case err := <-b.writing:
			t.Stop()
			return err == nil
		case <-t.C:
		}
	}
	b.uc.conn.SetWriteDeadline(aLongTimeAgo)
	abortBodyRead(b.reqBody)
	<-b.writing
	return false // even had it just ended: the connection has a deadline now
}

// writeGrace is how long wrote waits for a request write that may be just
// ending before it stops it.
const writeGrace = 250 * time.Millisecond
