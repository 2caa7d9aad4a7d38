// Package h1 is the HTTP/1.1 engine paddock's credential proxy runs on: a
// server (Server) that runs an http.Handler with one goroutine per
// connection and none per request, and a client for a proxy's upstream
// (Transport) that runs each exchange on its caller's goroutine. It knows
// nothing of what it carries — no credential, session, token or API: the
// proxy's policy is package credproxy's, which imports this one (deptest
// holds it so).
//
// Beyond net/http's interfaces, the engine and its users meet through
// small optional interfaces, each found by a type assertion, as
// http.ResponseController finds FlushError or SetReadDeadline on a
// ResponseWriter. A user that does not find one does without, as each
// says:
//
//   - a Server's ResponseWriter implements AfterResponder and
//     ConnectionEnder (and, for http.ResponseController, FlushError,
//     SetReadDeadline and EnableFullDuplex);
//   - a Server's request body implements BufferedBody;
//   - a Server's request context implements CloseWatcher, which Transport
//     looks for;
//   - a request body given to Transport may implement BodyWriter and
//     ReadAborter;
//   - Transport's response bodies implement Aborter;
//   - Transport implements Capable, which says what else it promises.
package h1

import (
	"io"
	"net/http"
)

// AfterResponder is implemented by a Server's ResponseWriter.
// AfterResponse has f run once the response has been sent, or its
// connection has failed, on the connection's goroutine: work that must
// not hold the response up (recording it) runs there without a goroutine
// woken per request. The connection's next request waits for f, so f must
// not block for long. A handler that does not find it does such work
// itself before it returns.
type AfterResponder interface {
	AfterResponse(f func())
}

// ConnectionEnder is implemented by a Server's ResponseWriter.
// EndConnection closes the response's connection at once, from any
// goroutine, and cancels its request: a handler's write blocked on a
// client that stopped reading fails. Calling it again does nothing. A
// handler that does not find it sets a write deadline in the past
// (http.ResponseController), the nearest thing.
type ConnectionEnder interface {
	EndConnection()
}

// BufferedBody is implemented by a Server's request bodies. Buffered
// reports whether the rest of the body, of a declared length, is already
// in the connection's buffer: reading it to its end cannot block, and no
// 100 Continue is owed. A body that does not implement it may block.
type BufferedBody interface {
	Buffered() bool
}

// BodyWriter is an optional interface of a request body given to
// Transport: a body that writes itself to the connection, instead of
// being read and copied — one in memory in a single write, one still
// arriving from elsewhere piece by piece.
//
// WriteBody writes exactly n bytes, the request's ContentLength, to w or
// fails (a body that is not n bytes long fails at once). w buffers: a
// body whose next read may wait flushes it first (w implements
// Flush() error). A failure of the body's own source comes as a
// BodyReadError, after which the request can never be finished and its
// connection is closed. Transport may call WriteBody on a goroutine of its
// own, while RoundTrip's caller reads the answer.
type BodyWriter interface {
	WriteBody(w io.Writer, n int64) (int64, error)
}

// ReadAborter is an optional interface of a request body given to
// Transport whose reads may wait on someone else (a body streamed from a
// proxy's client, which may stall). AbortRead, from any goroutine, makes
// a read in progress, and any to come, fail at once. Transport calls it
// wherever it stops a request's write, so that the write ends whichever
// side it waits on. The body stays aborted: its owner undoes it, if it
// wants to read on, once the exchange is over.
type ReadAborter interface {
	AbortRead()
}

// Aborter is implemented by Transport's response bodies. Abort ends the
// exchange from any goroutine, as cancelling the request's context would:
// the connection is closed, and a Read in progress or to come fails. Once
// the body has ended (its end read, or Close) it does nothing. A caller
// that does not find it gives the request a context it can cancel.
type Aborter interface {
	Abort()
}

// CloseWatcher is implemented by the contexts of a Server's requests
// (unless the connection's own context can end: ConnContext). Transport
// looks for it on a request's context to close the request's connection
// when the context is cancelled, without a goroutine or a closure per
// request; on another context it uses context.AfterFunc. There is one
// slot: one exchange per request at a time.
type CloseWatcher interface {
	// WatchClose arranges for c to be closed when the context is
	// cancelled, or at once if it already is; it replaces any earlier c.
	WatchClose(c io.Closer)
	// UnwatchClose stops that, and reports whether it stopped it in time
	// (false: the context was cancelled, and c is or will be closed).
	UnwatchClose() bool
}

// Capabilities are what an http.RoundTripper promises beyond
// RoundTripper's contract, for a caller deciding what it may hand it.
type Capabilities struct {
	// AbortableBodies: every response body implements Aborter.
	AbortableBodies bool
	// StreamedBodies: a request body may be one that can stall. The
	// RoundTripper calls its AbortRead (ReadAborter) wherever it stops
	// writing it, and RoundTrip, and the response body's end or Close,
	// return only once it is done reading it.
	StreamedBodies bool
}

// Capable is an optional interface of an http.RoundTripper that states its
// Capabilities. Transport implements it.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what rt promises: nothing beyond RoundTripper's
// contract unless it implements Capable.
func CapabilitiesOf(rt http.RoundTripper) Capabilities {
	if c, ok := rt.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

var (
	_ AfterResponder  = (*response)(nil)
	_ ConnectionEnder = (*response)(nil)
	_ BufferedBody    = (*serverBody)(nil)
	_ CloseWatcher    = (*requestContext)(nil)
	_ BodyWriter      = (*BytesBody)(nil)
	_ Aborter         = (*upstreamBody)(nil)
	_ Capable         = (*Transport)(nil)
)
