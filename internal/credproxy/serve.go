package credproxy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/anthropic"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/credproxy/h1"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/secret"
)

// reqState is one request's state, from ServeHTTP through forward to
// the record.
type reqState struct {
	entry    decisionlog.Entry
	rt       route
	query    string
	body     []byte
	stream   *streamedBody // a body passed on as it arrives; then body is set in finish
	answered bool          // the whole answer was sent before the rest of a streamed body was read
	cred     credential.Credential
	token    string // the presented token, to strip copies of it
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
	// relay routes
	relay       *Relay
	relayPath   string
	relaySecret secret.Value
}

func (p *Proxy) nextID() string { return p.idPrefix + strconv.FormatUint(p.ids.Add(1), 10) }

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &reqState{entry: decisionlog.Entry{
		Time: start.UTC(), RequestID: p.nextID(), Method: r.Method, Path: logkey.Clip(r.RequestURI, 200),
	}}
	// One deferred finish, so that it runs even when the reverse proxy aborts
	// a broken stream with panic(http.ErrAbortHandler).
	defer p.finish(st, w, r, start)
	// A request over a box's channel is that box's, token or not: its
	// refusals go to its session's log too. The token must still agree.
	if ch, ok := channelSession(r.Context()); ok {
		st.entry.Session = ch
	}

	refuse := func(status int, typ, reason string) {
		st.entry.Decision, st.entry.Reason, st.entry.Status = decisionlog.Refused, reason, status
		anthropic.WriteError(w, status, typ, reason, st.entry.RequestID)
	}

	// Target form: only origin-form ("/path?query"). CONNECT uses
	// authority-form, forward proxies absolute-form; neither is ours.
	if r.Method == http.MethodConnect {
		refuse(http.StatusMethodNotAllowed, anthropic.InvalidRequest, "CONNECT is not served by the credential proxy")
		return
	}
	if !strings.HasPrefix(r.RequestURI, "/") || r.URL.IsAbs() || r.URL.Host != "" {
		refuse(http.StatusBadRequest, anthropic.InvalidRequest, "only origin-form request targets (/v1/...) are served")
		return
	}
	if wantsUpgrade(r) {
		refuse(http.StatusBadRequest, anthropic.InvalidRequest, "protocol upgrades (h2c, websocket) are not served")
		return
	}
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	if rawPath == helloPath && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		st.entry.Decision, st.entry.Reason, st.entry.Status = decisionlog.Local, "preconnect answered by paddock", http.StatusOK
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	if rl, suffix, ok := p.matchRelay(rawPath); ok {
		// A relay route: the same checks and handling, another upstream
		// and the session's secret for it instead of the credential.
		if why := checkRelayRequest(r.Method, suffix); why != "" {
			refuse(http.StatusBadRequest, anthropic.InvalidRequest, why)
			return
		}
		q, why := checkRelayQuery(rawQuery)
		if why != "" {
			refuse(http.StatusBadRequest, anthropic.InvalidRequest, why)
			return
		}
		dec, _ := url.PathUnescape(suffix) // checked above: no escaped separators
		st.relay, st.relayPath, st.query = rl, dec, q
	} else {
		direct := isDirect(r.Context())
		rts := matchPath(rawPath, direct)
		if len(rts) == 0 {
			if direct {
				refuse(http.StatusNotFound, anthropic.NotFound, "paddock lets the API host's "+strconv.Quote(logkey.Clip(rawPath, 80))+" through to no one (see docs/DIRECT-REQUESTS.md)")
				return
			}
			refuse(http.StatusNotFound, anthropic.NotFound, "paddock forwards only POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models"+p.relayNote())
			return
		}
		var rt route
		found := false
		for _, c := range rts {
			if c.method == r.Method {
				rt, found = c, true
			}
		}
		if !found {
			w.Header().Set("Allow", allowed(rts))
			refuse(http.StatusMethodNotAllowed, anthropic.InvalidRequest, "method "+logkey.Clip(r.Method, 20)+" is not allowed on "+rawPath)
			return
		}
		if rt.usageView && !p.opts.UsageView {
			refuse(http.StatusForbidden, anthropic.Permission, usageViewOff)
			return
		}
		st.rt = rt
		q, why := checkQuery(rt, rawQuery)
		if why != "" {
			refuse(http.StatusBadRequest, anthropic.InvalidRequest, why)
			return
		}
		st.query = q
	}

	// Authentication: the token, once, in its kind's header.
	rec, tok, why := p.authenticate(r)
	if why != "" {
		refuse(http.StatusUnauthorized, anthropic.Authentication, why)
		return
	}
	st.entry.Session = rec.Session
	st.token = tok
	if ch, ok := channelSession(r.Context()); ok && ch != rec.Session {
		refuse(http.StatusForbidden, anthropic.Permission, "this token belongs to another session than the box it came from")
		return
	}
	if st.relay != nil {
		sec, ok := secret.Value{}, false
		if p.opts.RelaySecret != nil {
			sec, ok = p.opts.RelaySecret(rec.Session, st.relay.Name)
		}
		if !ok {
			refuse(http.StatusForbidden, anthropic.Permission, "this session has no secret for relay "+st.relay.Name+"; give one when the session is created")
			return
		}
		st.relaySecret = sec
	}
	var cred credential.Credential
	var err error
	if p.opts.SessionCredential != nil {
		cred, err = p.opts.SessionCredential(rec.Session)
	} else {
		cred, err = p.opts.Credential.Current()
	}
	if err != nil && st.relay == nil && errors.Is(err, errdefs.ErrForbidden) {
		refuse(http.StatusForbidden, anthropic.Permission, err.Error())
		return
	}
	if err != nil && st.relay == nil && errors.Is(err, credential.ErrExpired) {
		// An expired or dead login: Claude Code shows this, and it says
		// what to do.
		refuse(http.StatusUnauthorized, anthropic.Authentication, "paddock: "+err.Error())
		return
	}
	if err != nil && st.relay == nil {
		// The message names what to do; it never holds a secret.
		refuse(http.StatusServiceUnavailable, anthropic.APIError, "paddock has no usable credential for the upstream: "+err.Error())
		return
	}
	if p.opts.Limits != nil {
		release, why := p.opts.Limits.Admit(rec.Session)
		if why != "" {
			refuse(http.StatusTooManyRequests, anthropic.RateLimit, why)
			return
		}
		defer release()
	}
	if st.relay == nil && cred.Kind != rec.Kind {
		p.log.Warn("owner credential kind differs from the session token's; restart the session so its CLI matches",
			logkey.Session, rec.Session, logkey.Kind, string(cred.Kind))
	}
	st.cred = cred
	st.entry.CredentialUser = cred.User

	// Read the body before going upstream, or pass a large one on as it
	// arrives (see the package doc).
	body, stream, status, why := p.readBody(w, r)
	if why != "" {
		typ := anthropic.InvalidRequest
		if status == http.StatusRequestEntityTooLarge {
			typ = anthropic.RequestTooLarge
		}
		refuse(status, typ, why)
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
