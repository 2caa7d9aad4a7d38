package credproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

// readBody reads the request's body whole, or starts to pass it on as it
// arrives (a streamedBody): only a body of declared length over streamMin
// still arriving, under paddock's own Server (whose body says what is
// buffered, and may be read beside the response) and Transport (which can
// stop such a read).
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, *streamedBody, int, string) {
	buf := p.getBuf()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
			p.putBuf(buf)
			return nil, nil, http.StatusBadRequest, "a GET request may not have a body"
		}
		return buf, nil, 0, ""
	}
	if r.ContentLength > p.opts.MaxRequestBytes {
		p.putBuf(buf)
		return nil, nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", p.opts.MaxRequestBytes)
	}
	if r.ContentLength >= 0 {
		if bb, ok := r.Body.(h1.BufferedBody); ok {
			if bb.Buffered() {
				// All of it came with the head (the usual small request): no
				// read can block, and its length is within the limit.
				buf.Grow(int(r.ContentLength))
				if _, err := buf.ReadFrom(r.Body); err != nil {
					p.putBuf(buf)
					return nil, nil, http.StatusBadRequest, "the request body could not be read completely"
				}
				return buf, nil, 0, ""
			}
			if r.ContentLength > streamMin && p.caps.StreamedBodies && fullDuplex(w) {
				s, status, why := p.streamBody(w, r, buf)
				if why != "" {
					p.putBuf(buf)
					return nil, nil, status, why
				}
				return buf, s, 0, ""
			}
		}
	}
	// A body slower than ReadTimeout is cut by a deadline in the past on
	// the connection, set by the watchdog (no per-request socket deadline).
	rc := http.NewResponseController(w)
	wt := p.wd.Arm(p.opts.ReadTimeout, func() { _ = rc.SetReadDeadline(aLongTimeAgo) })
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, p.opts.MaxRequestBytes))
	if p.wd.Disarm(wt) {
		// Clear the deadline before streaming the response: a deadline hit
		// by the server's background read would cancel the request.
		_ = rc.SetReadDeadline(time.Time{})
		if err == nil {
			err = errors.New("request body deadline")
		}
	}
	if err != nil {
		p.putBuf(buf)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", p.opts.MaxRequestBytes)
		}
		return nil, nil, http.StatusBadRequest, "the request body could not be read completely"
	}
	return buf, nil, 0, ""
}

func (p *Proxy) getBuf() *bytes.Buffer {
	if b, ok := p.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (p *Proxy) putBuf(b *bytes.Buffer) {
	if b != nil && b.Cap() <= 1<<20 { // do not pin huge bodies in the pool
		p.bufs.Put(b)
	}
}

// fullDuplex reports whether w's server lets the request body be read
// while the response is written, as a body passed on as it arrives is
// when the upstream answers early.
func fullDuplex(w http.ResponseWriter) bool {
	return http.NewResponseController(w).EnableFullDuplex() == nil
}
