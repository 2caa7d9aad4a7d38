package credproxy

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/watchdog"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

// countingWriter counts response bytes and remembers the status for
// responses that paddock itself writes. It is used on the handler's
// goroutine only.
type countingWriter struct {
	http.ResponseWriter
	n      int64
	status int
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// FlushError flushes the underlying writer, reporting its error when it
// can.
func (c *countingWriter) FlushError() error {
	switch f := c.ResponseWriter.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
	}
	return nil
}

// tapBody feeds a usage scanner and enforces the idle timeout: a body not
// read for idle cancels the upstream request. Either the upstream sent
// nothing (idled says so), or the client stopped reading and the copy is
// stuck writing to it (stalled says so): then endClient also ends the
// client's connection, which would otherwise hold the stuck write, its
// goroutine and buffers for as long as the client likes.
type tapBody struct {
	rc      io.ReadCloser
	scanner *anthropic.UsageScanner
	wd      *watchdog.Watchdog
	w       *watchdog.Watch
	idle    time.Duration
	idled   atomic.Bool
	stalled atomic.Bool
	writing atomic.Bool // the copy is writing to the client
}

// newTapBody taps rc, the answer to a request whose client w gets; cancel
// (may be nil) ends the upstream exchange on a transport other than
// paddock's.
func newTapBody(wd *watchdog.Watchdog, rc io.ReadCloser, sc *anthropic.UsageScanner, idle time.Duration, cancel context.CancelFunc, w http.ResponseWriter) *tapBody {
	t := &tapBody{rc: rc, scanner: sc, wd: wd, idle: idle}
	t.w = wd.Arm(idle, func() {
		if t.writing.Load() {
			t.stalled.Store(true)
			endClient(w)
		} else {
			t.idled.Store(true)
		}
		if a, ok := rc.(h1.Aborter); ok {
			a.Abort()
		}
		if cancel != nil {
			cancel()
		}
	})
	return t
}

// cut reports whether the idle timeout ended the exchange.
func (t *tapBody) cut() bool { return t.idled.Load() || t.stalled.Load() }

// endClient ends the connection of w's client at once: paddock's Server
// closes it (h1.ConnectionEnder; sockets and channel streams alike);
// another server's gets a write deadline in the past, which fails the
// stuck write.
func endClient(w http.ResponseWriter) {
	if e, ok := w.(h1.ConnectionEnder); ok {
		e.EndConnection()
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(aLongTimeAgo)
}

func (t *tapBody) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	if n > 0 {
		t.w.Extend(t.idle)
		if t.scanner != nil {
			t.scanner.Write(b[:n])
		}
	}
	return n, err
}

func (t *tapBody) Close() error {
	t.wd.Disarm(t.w)
	return t.rc.Close()
}

// aLongTimeAgo is a deadline that has passed: set, it ends the reads
// and writes in progress at once.
var aLongTimeAgo = time.Unix(1, 0)
