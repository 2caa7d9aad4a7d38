package credproxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/watchdog"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

// streamMin is the body size above which a request body of declared
// length that has not all arrived with its head is passed upstream as it
// arrives (streamedBody) instead of read whole first. It is the size above
// which the Transport writes a body from a goroutine of its own, watching
// for an early answer; smaller bodies fit the sockets' buffers anyway.
const streamMin = h1.EarlyAnswerMin

// streamedBody is a request body of declared length passed upstream as it
// arrives from the client, every byte kept for the record (the body's
// summary; the request sent again after a token refresh). The upstream's
// copy starts while the client is still sending, as nginx's does with
// proxy_request_buffering off, so a large conversation is not uploaded
// twice in a row.
//
// Its reads of the client run on the Transport's write goroutine while the
// handler relays the answer (an upstream may answer before it has read
// everything): it writes itself (h1.BodyWriter), and the Transport ends a
// read that blocks with AbortRead (h1.ReadAborter) when it stops the
// write. Once RoundTrip has failed, or the answer's body is
// closed, the write is over: data and err belong to the handler again.
//
// A client whose body breaks off (it went, or was slower than the read
// timeout) fails the write: the upstream gets an incomplete request and
// its connection is closed, so nothing the client did not send whole is
// ever acted on. The read timeout's clock stops while a write to the
// upstream runs (holdTimeout): the upstream's pace is not the client's.
type streamedBody struct {
	p    *Proxy
	rc   *http.ResponseController // the client's connection, for its read deadline
	src  io.Reader                // the client's body
	data []byte                   // what was read so far
	want int64                    // the declared length
	err  error                    // the client's failure, if any
	wt   *watchdog.Watch          // the read timeout, while armed
	off  int                      // what Read has handed out

	// The Transport's AbortRead may run on the handler's goroutine while
	// the write goroutine reads: aborted says it did, reading that a read
	// of the client is under way (so only then does AbortRead set a past
	// deadline on the connection), deadline that it set one, which the
	// handler clears once the write is over (clearAbort). fired is the
	// read timeout's own deadline.
	aborted, reading, deadline, fired atomic.Bool
}

var (
	_ h1.BodyWriter  = (*streamedBody)(nil)
	_ h1.ReadAborter = (*streamedBody)(nil)
)

// streamBody starts a streamed body for r, whose declared length is over
// streamMin and within the limit. The first read is made here, on the
// handler's goroutine: it answers an Expect: 100-continue, so the other
// goroutine never writes to the client.
func (p *Proxy) streamBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (*streamedBody, int, string) {
	buf.Grow(int(min(r.ContentLength, 1<<20)))
	s := &streamedBody{p: p, rc: http.NewResponseController(w), src: r.Body, data: buf.AvailableBuffer(), want: r.ContentLength}
	s.arm()
	if err := s.readSome(); err != nil {
		s.disarm()
		return nil, http.StatusBadRequest, "the request body could not be read completely"
	}
	return s, 0, ""
}

// arm starts the read timeout: past it, the client's reads fail at once
// (a deadline in the past, set by the watchdog: no per-request socket
// deadline).
func (s *streamedBody) arm() {
	s.fired.Store(false)
	s.wt = s.p.wd.Arm(s.p.opts.ReadTimeout, func() {
		s.fired.Store(true)
		_ = s.rc.SetReadDeadline(aLongTimeAgo)
	})
}

// disarm stops the read timeout; if it fired, the connection's deadline
// is cleared again (the response may still be written and the hang-up
// watched) and the body, if it is not whole, failed by it.
func (s *streamedBody) disarm() {
	if s.wt == nil {
		return
	}
	if s.p.wd.Disarm(s.wt) {
		_ = s.rc.SetReadDeadline(time.Time{})
		if s.err == nil && !s.complete() {
			s.err = errors.New("request body deadline")
		}
	}
	s.wt = nil
}

func (s *streamedBody) complete() bool { return int64(len(s.data)) == s.want }

// readSome reads what the client has sent next into data. At the
// declared length it reads once more, which returns the body's end (from
// the body's own count, not the connection): the server then knows the
// body is done — unless the read was stopped meanwhile, when a deadline
// may be left on the connection that must not meet the server's watch of
// it. The read timeout is disarmed as soon as the body is whole: what
// follows is the upstream's time, not the client's.
//
// A read the Transport stopped (AbortRead) returns errAbortedRead and is
// not the client's failure: err is left as it was.
func (s *streamedBody) readSome() error {
	if s.err != nil {
		return s.err
	}
	if s.complete() {
		s.disarm()
		if !s.aborted.Load() {
			_, _ = s.src.Read(s.data[len(s.data):len(s.data)])
		}
		return nil
	}
	if len(s.data) == cap(s.data) {
		grow := min(s.want-int64(len(s.data)), int64(max(cap(s.data), 64<<10)))
		s.data = slices.Grow(s.data, int(grow))
	}
	end := min(int64(cap(s.data)), s.want)
	s.reading.Store(true)
	if s.aborted.Load() { // after reading is set: AbortRead sees one or the other
		s.reading.Store(false)
		return errAbortedRead
	}
	n, err := s.src.Read(s.data[len(s.data):end])
	s.reading.Store(false)
	s.data = s.data[:len(s.data)+n]
	if err == io.EOF && !s.complete() {
		err = io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	switch {
	case err == nil:
		if s.complete() {
			s.disarm()
		}
	case s.aborted.Load() && !s.fired.Load():
		return errAbortedRead
	case s.fired.Load():
		s.err = errors.New("request body deadline")
	default:
		s.err = err
	}
	return s.err
}

// WriteBody copies the body to w as it arrives, starting with what the
// first read brought. The Transport calls it with its buffered writer and
// the request's ContentLength, n, which must be the declared length; it
// returns once all of it is written, or on the first failure of either
// side.
//
// Each piece is flushed as it is written (w may be buffered): the next
// read may wait on the client, and what came must not wait with it.
func (s *streamedBody) WriteBody(w io.Writer, n int64) (int64, error) {
	defer s.disarm()
	if n != s.want {
		return 0, errors.New("the request's length is not the body's")
	}
	f, _ := w.(interface{ Flush() error })
	var sent int
	for {
		if sent < len(s.data) {
			left := s.holdTimeout()
			n, err := w.Write(s.data[sent:])
			sent += n
			if err == nil && f != nil && !s.complete() {
				err = f.Flush()
			}
			s.resumeTimeout(left)
			if err != nil {
				return int64(sent), err
			}
		}
		if s.complete() {
			_ = s.readSome() // the body's end
			return int64(sent), nil
		}
		if err := s.readSome(); err != nil {
			return int64(sent), h1.BodyReadError{Err: err}
		}
	}
}

// holdTimeout stops the read timeout's clock while the upstream takes a
// piece: a write that blocks is the upstream holding the body back, and
// the client with it (the proxy reads no more meanwhile), which is not the
// client's time. It returns what was left of the timeout: 0 if none is
// armed, or it is already due (then it fires as it would have).
func (s *streamedBody) holdTimeout() time.Duration {
	if s.wt == nil {
		return 0
	}
	left := time.Until(s.wt.Deadline())
	if left <= 0 {
		return 0
	}
	s.wt.Extend(watchdog.Never)
	return left
}

// resumeTimeout starts the read timeout's clock again after holdTimeout,
// with what was left of it.
func (s *streamedBody) resumeTimeout(left time.Duration) {
	if left > 0 && s.wt != nil {
		s.wt.Extend(left)
	}
}

var errAbortedRead = errors.New("credproxy: the request body's read was stopped")

// AbortRead ends a read of the client in progress, and any to come, from
// any goroutine (the Transport's, when it stops the write). Only a read
// under way gets a past deadline on the connection; clearAbort takes it
// off again.
func (s *streamedBody) AbortRead() {
	s.aborted.Store(true)
	if s.reading.Load() {
		s.deadline.Store(true)
		_ = s.rc.SetReadDeadline(aLongTimeAgo)
	}
}

// clearAbort undoes AbortRead once no write runs any more: the
// connection's deadline is cleared (its next request, or the rest of the
// body, is read as usual) and reads may go on.
func (s *streamedBody) clearAbort() {
	if s.deadline.Swap(false) {
		_ = s.rc.SetReadDeadline(time.Time{}) // the read timeout, if armed and due, sets it again
	}
	s.aborted.Store(false)
}

// finish reads what is left of the body, once no write runs any more: for
// a request sent again, or after an early answer. A read stopped by
// AbortRead goes on.
func (s *streamedBody) finish() error {
	s.clearAbort()
	if s.complete() {
		return nil
	}
	s.arm()
	defer s.disarm()
	for !s.complete() {
		if err := s.readSome(); err != nil {
			return err
		}
	}
	return nil
}

// Read makes the body an io.Reader, for a Transport other than paddock's
// own (which uses WriteBody): it hands out data, reading from the client as
// it runs out.
func (s *streamedBody) Read(p []byte) (int, error) {
	if s.off == len(s.data) {
		if s.complete() {
			s.disarm()
			_ = s.readSome()
			return 0, io.EOF
		}
		if err := s.readSome(); err != nil {
			s.disarm()
			return 0, err
		}
	}
	n := copy(p, s.data[s.off:])
	s.off += n
	return n, nil
}

func (s *streamedBody) Close() error { return nil }
