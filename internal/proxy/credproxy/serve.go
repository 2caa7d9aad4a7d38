package credproxy

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// reqState is one request's state, from ServeHTTP through forward to
// the record.
type reqState struct {
	entry    decisionlog.Entry
	plan     // how it goes out, as decided
	body     []byte
	stream   *streamedBody // a body passed on as it arrives; then body is set in finish
	answered bool          // the whole answer was sent before the rest of a streamed body was read
	scanner  *anthropic.UsageScanner
	cancel   context.CancelFunc // nil with a Transport whose bodies abort (h1.Aborter)
	upErr    error
	buf      *bytes.Buffer
	cw       *countingWriter
	tap      *tapBody
	// the upstream request, kept here to save allocations
	out     http.Request
	url     url.URL
	outBody h1.BytesBody
}

func (p *Proxy) nextID() string { return p.idPrefix + strconv.FormatUint(p.ids.Add(1), 10) }

// ServeHTTP implements http.Handler: decide says what to do with the
// request, and ServeHTTP does it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &reqState{entry: decisionlog.Entry{
		Time: start.UTC(), RequestID: p.nextID(), Method: r.Method, Path: logkey.Clip(r.RequestURI, 200),
	}}
	// One deferred finish, so that it runs even when the reverse proxy aborts
	// a broken stream with panic(http.ErrAbortHandler).
	defer p.finish(st, w, r, start)
	v := p.decide(r)
	st.entry.Session = v.session
	switch v.outcome {
	case decisionlog.Refused:
		if v.allow != "" {
			w.Header().Set("Allow", v.allow)
		}
		refuse(w, st, v.status, v.errType, v.reason)
	case decisionlog.Local:
		st.entry.Decision, st.entry.Reason, st.entry.Status = decisionlog.Local, v.reason, v.status
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(v.status)
	case decisionlog.Forwarded:
		if v.plan.release != nil {
			defer v.plan.release()
		}
		st.plan = v.plan
		p.send(w, r, st)
	}
}

// refuse answers a request paddock refuses, in the API's error shape, and
// says so in its entry.
func refuse(w http.ResponseWriter, st *reqState, status int, errType, reason string) {
	st.entry.Decision, st.entry.Reason, st.entry.Status = decisionlog.Refused, reason, status
	anthropic.WriteError(w, status, errType, reason, st.entry.RequestID)
}

// send carries out a forward: the body is read (or begins to go upstream
// as it arrives), then forward sends the request and streams the answer
// back. A body that cannot be had is still a refusal.
func (p *Proxy) send(w http.ResponseWriter, r *http.Request, st *reqState) {
	if st.relay == nil && st.cred.Kind != st.tokenKind {
		p.log.Warn("owner credential kind differs from the session token's; restart the session so its CLI matches",
			logkey.Session, st.entry.Session, logkey.Kind, string(st.cred.Kind))
	}
	st.entry.CredentialUser = st.cred.User

	// Read the body before going upstream, or pass a large one on as it
	// arrives (see the package doc).
	body, stream, status, why := p.readBody(w, r)
	if why != "" {
		typ := anthropic.InvalidRequest
		if status == http.StatusRequestEntityTooLarge {
			typ = anthropic.RequestTooLarge
		}
		refuse(w, st, status, typ, why)
		return
	}
	st.buf = body
	if stream != nil {
		st.stream = stream // st.body and BytesIn: in finish, once it has all come
	} else {
		st.body = body.Bytes()
		st.entry.BytesIn = int64(body.Len())
	}

	// The tap's timeouts end the upstream exchange by its body's Abort
	// (h1.Aborter); with another transport (tests), by a context of its
	// own.
	ctx := r.Context()
	if !p.caps.AbortableBodies {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		st.cancel = cancel
	}
	st.entry.Decision = decisionlog.Forwarded
	st.cw = &countingWriter{ResponseWriter: w}
	p.forward(ctx, st.cw, r, st)
}
