package credproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

// forward sends an accepted request upstream and streams the answer back:
// what httputil.ReverseProxy did here before, in one pass over the headers
// each way and without its per-request machinery (a cloned request, a
// client trace, header passes that paddock's own rules make redundant).
//
//   - The upstream request carries the client's headers except those that
//     never travel (isStripped), those its Connection header names, and any
//     whose value holds the session token; then exactly one credential.
//     Without a client User-Agent none is sent (not Go's).
//   - The answer's hop-by-hop headers and those its Connection names are
//     dropped; the rest pass unchanged, as do status and body. Trailers are
//     not relayed (the API sends none).
//   - An event stream, or a body of unknown length, is flushed after every
//     read from the upstream; a body of known length goes in as few writes
//     as the server makes.
//   - A client that reads nothing of the answer for the stream-idle
//     timeout has its connection closed (see tapBody).
//   - A body that breaks off (the upstream failed, the idle timeout, the
//     client went) ends the handler with panic(http.ErrAbortHandler), so
//     the server closes the connection with the response unfinished: the
//     client never takes a cut answer for a whole one.
func (p *Proxy) forward(ctx context.Context, w *countingWriter, r *http.Request, st *reqState) {
	resp, err := p.tr.RoundTrip(p.outRequest(ctx, r, st))
	if err == nil && resp.StatusCode == http.StatusUnauthorized && st.relay == nil && p.opts.OnExpired != nil {
		if body, again := p.expired(resp); again {
			fresh, ok := p.opts.OnExpired(ctx, st.cred)
			switch {
			case !ok: // no fresher login: the 401 goes on as it came
				resp.Body = io.NopCloser(bytes.NewReader(body))
			case !p.wholeBody(st):
				p.brokenBody(w, st)
				return
			default:
				st.cred = fresh
				st.entry.Reason = "the token had expired: refreshed and sent again"
				resp, err = p.tr.RoundTrip(p.outRequest(ctx, r, st))
			}
		}
	}
	if err != nil {
		if s := st.stream; s != nil && s.err != nil && r.Context().Err() == nil {
			// The client's body broke off while it went upstream: the
			// upstream's connection is closed with the request unfinished.
			p.brokenBody(w, st)
			return
		}
		p.upstreamError(w, r, st, err) // aborts the handler when the client went
		p.drainBody(w, st)             // the answer first, then the rest of the body
		return
	}
	st.entry.Status = resp.StatusCode
	st.entry.UpstreamRequestID = logkey.Clip(resp.Header.Get("Request-Id"), 80)
	ct := resp.Header.Get("Content-Type")
	sse := mediaTypeIs(ct, "text/event-stream")
	switch {
	case sse:
		st.scanner = &anthropic.UsageScanner{}
	case mediaTypeIs(ct, "application/json") && resp.Header.Get("Content-Encoding") == "":
		st.scanner = &anthropic.UsageScanner{JSON: true}
	}
	st.tap = newTapBody(p.wd, resp.Body, st.scanner, p.opts.StreamIdleTimeout, st.cancel, w.ResponseWriter)
	defer st.tap.Close() // disarms the idle watch, releases the upstream connection

	h := w.Header()
	named := connectionNominated(resp.Header)
	for k, vs := range resp.Header {
		if h1.IsHopByHop(k) || nominated(named, k) {
			continue
		}
		h[k] = vs
	}
	w.WriteHeader(resp.StatusCode)

	flush := resp.ContentLength < 0 || sse
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := st.tap.Read(buf)
		if n > 0 {
			st.tap.writing.Store(true)
			_, werr := w.Write(buf[:n])
			if werr == nil && flush {
				werr = w.FlushError()
			}
			st.tap.writing.Store(false)
			if werr != nil {
				panic(http.ErrAbortHandler) // the client went, or stopped reading
			}
		}
		if rerr == io.EOF {
			p.drainBody(w, st)
			return
		}
		if rerr != nil {
			if ctx.Err() == nil && !st.tap.cut() {
				st.upErr = rerr
				st.entry.Reason = "the upstream's answer broke off"
			}
			panic(http.ErrAbortHandler)
		}
	}
}

// outRequest builds the upstream request (see forward).
func (p *Proxy) outRequest(ctx context.Context, r *http.Request, st *reqState) *http.Request {
	u := &st.url
	if st.relay != nil {
		*u = *st.relay.Upstream
		u.Path = st.relay.Upstream.Path + "/" + st.relayPath
	} else {
		*u = *p.opts.Upstream
		u.Path = p.opts.Upstream.Path + st.rt.path
	}
	u.RawPath, u.RawQuery, u.Fragment = "", st.query, ""

	h := make(http.Header, len(r.Header)+1)
	named := connectionNominated(r.Header)
next:
	for k, vs := range r.Header {
		if isStripped(k) || nominated(named, k) {
			continue
		}
		if st.token != "" {
			for _, v := range vs {
				if strings.Contains(v, st.token) {
					continue next // a copy of the token, in a custom header
				}
			}
		}
		h[k] = vs
	}
	if st.relay != nil {
		h.Del(st.relay.Header) // the client's own, if it sent one
		h.Set(st.relay.Header, st.relaySecret.Reveal())
	} else {
		h.Set(st.cred.Kind.Header(), st.cred.Kind.HeaderValue(st.cred.Secret))
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // writeRequest then sends none
	}
	out := &st.out
	*out = http.Request{Method: r.Method, URL: &st.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: http.NoBody}
	if s := st.stream; s != nil {
		out.Body = s
		out.ContentLength = s.want
	} else if len(st.body) > 0 {
		st.outBody.Reset(st.body)
		out.Body = &st.outBody
		out.ContentLength = int64(len(st.body))
	}
	return out.WithContext(ctx)
}

// wholeBody has the rest of a streamed body read, for a request sent
// again (the first exchange is over, so no write reads it any more). A
// body that cannot be had whole is answered as a client's broken body,
// and the request is not sent again.
func (p *Proxy) wholeBody(st *reqState) bool {
	s := st.stream
	if s == nil {
		return true
	}
	if err := s.finish(); err != nil {
		return false
	}
	st.body, st.stream = s.data, nil
	st.entry.BytesIn = int64(len(st.body))
	return true
}

// drainBody reads what is left of a streamed body after an answer given
// before the upstream had all of it (its early 413, or paddock's 502 or
// 504 when it failed meanwhile): the answer is flushed
// first, then the rest is read, within the read timeout, as the body read
// whole first used to be. A client still uploading expects to finish
// before it reads the answer, and a connection closed under its upload
// would reach it as a reset instead of that answer.
func (p *Proxy) drainBody(w http.ResponseWriter, st *reqState) {
	s := st.stream
	if s == nil || s.complete() {
		return
	}
	if http.NewResponseController(w).Flush() != nil {
		return
	}
	st.answered = true // the answer is out: a client that leaves now has it
	_ = s.finish()
}

// brokenBody answers a request whose streamed body the client did not
// send whole (it broke off, or was slower than the read timeout).
func (p *Proxy) brokenBody(w http.ResponseWriter, st *reqState) {
	st.upErr = nil
	st.entry.Status, st.entry.Reason = http.StatusBadRequest, "the request body could not be read completely; the upstream got none of it whole"
	anthropic.WriteError(w, http.StatusBadRequest, anthropic.InvalidRequest, st.entry.Reason, st.entry.RequestID)
}

// nominated reports whether header k is among the names a Connection
// header listed (case-insensitive).
func nominated(names []string, k string) bool {
	for _, n := range names {
		if strings.EqualFold(n, k) {
			return true
		}
	}
	return false
}

// mediaTypeIs reports whether a Content-Type is the media type want,
// parameters aside, in any case.
func mediaTypeIs(ct, want string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), want)
}

// upstreamError answers a request whose upstream exchange failed before an
// answer began: 504 for a timeout, 502 otherwise; for a client that went,
// it aborts the handler so that no response at all is sent.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, st *reqState, err error) {
	st.upErr = err
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// No answer at all: an empty 200 from the server would look like
		// a success to a client that only half-closed.
		st.entry.Status, st.entry.Reason = 499, "client went away"
		panic(http.ErrAbortHandler)
	}
	status, msg := http.StatusBadGateway, "the upstream API could not be reached"
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status, msg = http.StatusGatewayTimeout, "the upstream API did not answer in time"
	}
	st.entry.Status, st.entry.Reason = status, msg
	anthropic.WriteError(w, status, anthropic.APIError, msg, st.entry.RequestID)
}

// maxExpiredBody bounds the 401 body read to tell an expired token.
const maxExpiredBody = 16 << 10

// expired reads a 401's body to tell whether it says the token expired
// (the API's "OAuth token has expired"). If so, the upstream's body is
// closed (its connection released), and again is true with the whole
// body, to relay if the request is not sent again; if not, resp's body
// still reads whole, to relay.
func (p *Proxy) expired(resp *http.Response) (body []byte, again bool) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxExpiredBody+1))
	if err == nil && len(b) <= maxExpiredBody && bytes.Contains(bytes.ToLower(b), []byte("token has expired")) {
		resp.Body.Close()
		return b, true
	}
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(b), resp.Body), Closer: resp.Body}
	return nil, false
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Abort passes the tap's abort on to the upstream body (h1.Aborter).
func (r readCloser) Abort() {
	if a, ok := r.Closer.(h1.Aborter); ok {
		a.Abort()
	}
}

// copyBufs are the 32 KiB buffers responses are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
