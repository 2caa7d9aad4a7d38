// Package credproxy is the credential proxy: an HTTP reverse proxy that
// accepts a live per-session token from a box and forwards the request to
// the Anthropic API with the owner's real credential in its place.
//
// Contract, for every request:
//
//   - Only POST /v1/messages, POST /v1/messages/count_tokens and GET
//     /v1/models are forwarded, matched on the raw request target byte for
//     byte, each only with its method, with the query policy of routes.go.
//     HEAD /api/hello is answered locally (see helloPath). Anything else gets
//     an error in the Anthropic JSON shape and causes no upstream request.
//   - CONNECT, absolute-form and authority-form targets, and any Upgrade
//     (h2c, websocket) are refused.
//   - The session token must arrive, exactly once, in the header its kind
//     travels in (Authorization: Bearer for oauth and auth_token, x-api-key
//     for api_key) and be live. A connection that arrived over a session's
//     channel (WithChannelSession) accepts only that session's token.
//   - Every client credential header is removed, in any case or spelling,
//     duplicated, nominated in Connection or sent as a trailer; so are
//     hop-by-hop and X-Forwarded-* headers. The owner's credential is then
//     set exactly once. Other headers (anthropic-version, anthropic-beta, the
//     CLI's own) pass unchanged.
//   - A request body over MaxRequestBytes is refused before anything goes
//     upstream. A body that came with its head, or one without a declared
//     length, is read whole first. A larger body of declared length still
//     arriving is passed upstream as it arrives, every byte kept for the
//     record (stream.go): a conversation of a megabyte is not uploaded twice
//     in a row. If the client's body breaks off or is slower than
//     ReadTimeout, the upstream's connection is closed with the request
//     unfinished (so it acts on nothing) and the client gets a 400. An
//     upstream that answers before it has read the body is handled by the
//     Transport (golang/go#40747 is net/http's, not paddock's).
//   - The body's summary (the model, the tool results) is made after the
//     response has ended, never on the stream's path.
//   - The response is streamed back untouched (forward.go): an event
//     stream flushed after every read from the upstream; a client that
//     goes away cancels the upstream request at once (h1.Server).
//   - One Entry per request goes to the decision log, and one line to the
//     Runner's log: at debug level for an ordinary forwarded request, info
//     for an upstream 4xx or a cut stream, warn for a refusal or a 5xx.
//     Neither can hold a secret: see package secret.
package credproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/anthropic"
	"github.com/paddockhq/paddock/internal/chansession"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/credproxy/h1"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/sessiontoken"
	"github.com/paddockhq/paddock/internal/watchdog"
)

// Tokens checks session tokens; *sessiontoken.Registry implements it.
type Tokens interface {
	Lookup(secret.Value) (sessiontoken.Record, bool)
}

// Limiter applies per-session limits; *limits.Tracker implements it.
type Limiter interface {
	// Admit asks before a request goes upstream: release when it ends, or
	// a reason to refuse it.
	Admit(session string) (release func(), reason string)
	// Account adds the tokens a request used.
	Account(session string, tokens int64)
}

// EntryAccounter is an optional Limiter feature: a Limiter that has it is
// given each request's whole entry (its model and each kind of token, to
// price it against a budget in money) instead of Account's sum. It runs
// at the end of every request and must not block for long.
type EntryAccounter interface {
	AccountEntry(e *decisionlog.Entry)
}

// Options configure a Proxy. Upstream, Credential and Tokens are required.
type Options struct {
	// Upstream is the API base URL (already checked by config.ParseUpstream);
	// its path, if any, prefixes every route.
	Upstream   *url.URL
	Credential credential.Provider
	Tokens     Tokens
	// Log receives one line per decision; nil discards.
	Log *slog.Logger
	// Decisions receives one Entry per request; nil discards.
	Decisions decisionlog.Sink
	// MaxRequestBytes caps a request body; 0 means 32 MiB.
	MaxRequestBytes int64
	// ReadTimeout bounds reading one request body, less any time the
	// upstream held a body passed on as it arrives back; 0 means 5 minutes.
	ReadTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for upstream headers; 0 means 10 minutes.
	ResponseHeaderTimeout time.Duration
	// StreamIdleTimeout ends a response silent for this long; 0 means 5 minutes.
	StreamIdleTimeout time.Duration
	// MaxIdleConns sizes the upstream keep-alive pool; 0 means 512.
	MaxIdleConns int
	// Transport replaces the upstream transport (tests); nil builds one.
	Transport http.RoundTripper
	// UpstreamRoots, if set, are the only roots an https upstream's
	// certificate may chain to (a test server's); nil uses the system's.
	UpstreamRoots *x509.CertPool
	// Limits, if set, may refuse a request with 429 before it goes upstream.
	Limits Limiter
	// Relays are further routes to other upstreams (a hub's /mod/*, …),
	// each injecting the session's secret for it (RelaySecret).
	Relays      []Relay
	RelaySecret func(session, relay string) (secret.Value, bool)
	// SessionCredential, if set, picks the credential of each session's
	// requests instead of Credential: its own, its owner's, or the
	// Runner's, as the Runner decides. An error refuses the request: 403
	// (permission_error) when it wraps errdefs.ErrForbidden, else 503;
	// its message goes to the box, so it must name what to do and never
	// hold a secret.
	SessionCredential func(session string) (credential.Credential, error)
	// OnExpired, if set, is asked when the upstream answers 401 saying the
	// token a request went out with expired: a fresher credential, and
	// true, has the request sent once more with it (the body whole: a
	// streamed one is read to its end first); false passes the 401 on.
	// The Runner refreshes its own login there, once however many requests
	// ask. ctx is the box's request's: a refresh must never end with it
	// (once the OAuth server has rotated, its answer holds the only live
	// refresh token), so oauth.Authority.RefreshNow runs it on a context
	// of its own and ctx only ends the wait.
	OnExpired func(ctx context.Context, used credential.Credential) (credential.Credential, bool)
	// UsageView is anthropic.usage_view (config.Anthropic.UsageViewOn):
	// only with it does the direct path forward GET /api/oauth/usage;
	// without it (the default) that route is refused with 403 and causes
	// no upstream request.
	UsageView bool
}

// Proxy is an http.Handler. Serve it with NewServer for the timeouts paddock
// relies on.
type Proxy struct {
	opts Options
	wd   *watchdog.Watchdog // request body and stream idle deadlines
	tr   http.RoundTripper  // the upstream transport
	// caps are what tr promises: with h1.Transport, a tap aborts an
	// exchange without a context of its own, and a large body may go
	// upstream as it arrives.
	caps      h1.Capabilities
	log       *slog.Logger
	decisions decisionlog.Sink
	ids       atomic.Uint64
	idPrefix  string
	bufs      sync.Pool
	// pending counts finished requests not yet recorded (Drain waits for
	// zero; a WaitGroup may not be Added to while someone Waits at zero).
	pendMu  sync.Mutex
	pendC   *sync.Cond
	pending int
}

// New checks opts and builds the proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Upstream == nil || opts.Credential == nil || opts.Tokens == nil {
		return nil, errors.New("credproxy: Upstream, Credential and Tokens are required")
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 32 << 20
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 5 * time.Minute
	}
	if opts.ResponseHeaderTimeout <= 0 {
		opts.ResponseHeaderTimeout = 10 * time.Minute
	}
	if opts.StreamIdleTimeout <= 0 {
		opts.StreamIdleTimeout = 5 * time.Minute
	}
	if opts.MaxIdleConns <= 0 {
		opts.MaxIdleConns = 512
	}
	p := &Proxy{opts: opts, log: opts.Log, decisions: opts.Decisions, wd: watchdog.New(min(opts.ReadTimeout, opts.StreamIdleTimeout))}
	p.pendC = sync.NewCond(&p.pendMu)
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.decisions == nil {
		p.decisions = decisionlog.Discard{}
	}
	p.idPrefix = "req_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "_"
	p.tr = opts.Transport
	if p.tr == nil {
		t := h1.NewTransport(opts.MaxIdleConns, opts.ResponseHeaderTimeout)
		if opts.UpstreamRoots != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: opts.UpstreamRoots}
		}
		p.tr = t
	}
	p.caps = h1.CapabilitiesOf(p.tr)
	return p, nil
}

// WithChannelSession marks a connection's context as arriving over the
// named session's channel; only that session's token is accepted on it.
// Use it from http.Server.ConnContext.
func WithChannelSession(ctx context.Context, session string) context.Context {
	return chansession.With(ctx, session)
}

func channelSession(ctx context.Context) (string, bool) { return chansession.From(ctx) }

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

// finish completes the entry and has it recorded. Under paddock's Server
// that happens once the response is sent (h1.AfterResponder), so the
// response is not held up by summarizing the body or writing the logs: on
// the connection's goroutine, or for a large body on one of its own;
// under any other server, at once. Records may therefore be written out of
// the order their requests ended in; each carries its time.
func (p *Proxy) finish(st *reqState, w http.ResponseWriter, r *http.Request, start time.Time) {
	if s := st.stream; s != nil {
		// The upstream write is over (RoundTrip and the answer's Close wait
		// for it): what came is the handler's.
		s.disarm()
		s.clearAbort()
		st.body, st.stream = s.data, nil
		st.entry.BytesIn = int64(len(st.body))
	}
	if st.cw != nil {
		st.entry.BytesOut = st.cw.n
		if st.entry.Status == 0 {
			st.entry.Status = st.cw.status
		}
		switch {
		case st.entry.Reason != "":
		case st.tap != nil && st.tap.idled.Load():
			st.entry.Reason = "the upstream sent nothing for " + p.opts.StreamIdleTimeout.String() + "; response cut"
		case st.tap != nil && st.tap.stalled.Load():
			st.entry.Reason = "the client read nothing for " + p.opts.StreamIdleTimeout.String() + "; connection closed"
		case r.Context().Err() != nil && !st.answered:
			st.entry.Reason = "client went away"
		}
	}
	st.entry.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	p.pendMu.Lock()
	p.pending++
	p.pendMu.Unlock()
	if ar, ok := w.(h1.AfterResponder); ok {
		if len(st.body) >= recordAsideMin {
			// Summarizing a large body takes about a millisecond a
			// megabyte: on a goroutine of its own, so that the connection
			// reads its next request meanwhile.
			ar.AfterResponse(func() { go p.recordNow(st) })
			return
		}
		ar.AfterResponse(func() { p.recordNow(st) })
		return
	}
	p.recordNow(st)
}

// recordAsideMin is the body size from which a request is recorded off
// its connection's goroutine. Below it, waking another goroutine costs
// more than the record (see docs/PERFORMANCE.md).
const recordAsideMin = 64 << 10

// recordNow records one request that finish counted as pending.
func (p *Proxy) recordNow(st *reqState) {
	p.record(st)
	p.putBuf(st.buf)
	p.pendMu.Lock()
	if p.pending--; p.pending == 0 {
		p.pendC.Broadcast()
	}
	p.pendMu.Unlock()
}

// Drain waits until every request finished so far has been recorded.
func (p *Proxy) Drain() {
	p.pendMu.Lock()
	for p.pending > 0 {
		p.pendC.Wait()
	}
	p.pendMu.Unlock()
}

// authenticate finds the session token. The rules: exactly one value in
// exactly one of Authorization / X-Api-Key (other spellings are stripped
// unread), the value in that header's form, live, and issued for the kind
// that travels in that header.
func (p *Proxy) authenticate(r *http.Request) (sessiontoken.Record, string, string) {
	auth := r.Header.Values("Authorization")
	keys := r.Header.Values("X-Api-Key")
	if len(auth) > 1 || len(keys) > 1 {
		return sessiontoken.Record{}, "", "a credential header is repeated"
	}
	try := func(vals []string, kinds ...credential.Kind) (sessiontoken.Record, string, bool) {
		if len(vals) != 1 {
			return sessiontoken.Record{}, "", false
		}
		tok, ok := kinds[0].FromHeaderValue(vals[0])
		if !ok {
			return sessiontoken.Record{}, "", false
		}
		rec, ok := p.opts.Tokens.Lookup(tok)
		if !ok {
			return sessiontoken.Record{}, "", false
		}
		for _, k := range kinds {
			if rec.Kind == k {
				return rec, tok.Reveal(), true
			}
		}
		return sessiontoken.Record{}, "", false
	}
	if rec, tok, ok := try(keys, credential.KindAPIKey); ok {
		return rec, tok, ""
	}
	if rec, tok, ok := try(auth, credential.KindOAuth, credential.KindAuthToken); ok {
		return rec, tok, ""
	}
	if len(auth) == 0 && len(keys) == 0 {
		return sessiontoken.Record{}, "", "no session token: send it as the box's credential (x-api-key or Authorization: Bearer)"
	}
	// One message for unknown, revoked and misplaced tokens: the caller
	// learns nothing about which tokens exist.
	return sessiontoken.Record{}, "", "invalid session token (unknown, revoked, or in the wrong header)"
}

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

func (p *Proxy) record(st *reqState) {
	e := &st.entry
	if e.Decision == decisionlog.Forwarded {
		sum := anthropic.Summarize(st.body)
		e.Model, e.Stream, e.ToolResultIDs = sum.Model, sum.Stream, sum.ToolResultIDs
		if st.scanner != nil {
			st.scanner.Close()
			if st.scanner.Model != "" {
				e.Model = st.scanner.Model
			}
			e.MessageID, e.ToolUseIDs = st.scanner.MessageID, st.scanner.ToolUseIDs
			u := st.scanner.Usage
			e.InputTokens, e.OutputTokens = u.InputTokens, u.OutputTokens
			e.CacheReadTokens, e.CacheCreationTokens = u.CacheReadInputTokens, u.CacheCreationInputTokens
		}
	}
	st.body = nil
	if p.opts.Limits != nil && e.Session != "" {
		if ea, ok := p.opts.Limits.(EntryAccounter); ok {
			ea.AccountEntry(e)
		} else {
			p.opts.Limits.Account(e.Session, e.InputTokens+e.OutputTokens)
		}
	}
	decisionlog.Clamp(e) // before the log line below too: the model and ids are the box's
	p.decisions.Record(*e)
	// The decision log holds every request; the Runner's log repeats the
	// ordinary ones at debug level only, and what went wrong above it.
	level := slog.LevelDebug
	switch {
	case e.Decision == decisionlog.Refused || e.Status >= 500:
		level = slog.LevelWarn
	case e.Status >= 400 || e.Reason != "" || st.upErr != nil:
		level = slog.LevelInfo
	}
	if !p.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String(logkey.Decision, string(e.Decision)), slog.String(logkey.Session, e.Session),
		slog.String(logkey.RequestID, e.RequestID), slog.String(logkey.Method, e.Method),
		slog.String(logkey.Path, e.Path), slog.Int(logkey.Status, e.Status),
		slog.Int64(logkey.BytesIn, e.BytesIn), slog.Int64(logkey.BytesOut, e.BytesOut),
		slog.Float64(logkey.Duration, e.DurationMS),
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String(logkey.Reason, e.Reason))
	}
	if e.Model != "" {
		attrs = append(attrs, slog.String(logkey.Model, e.Model),
			slog.Int64(logkey.InputTok, e.InputTokens), slog.Int64(logkey.OutputTok, e.OutputTokens))
	}
	if st.upErr != nil {
		attrs = append(attrs, slog.String(logkey.Error, st.upErr.Error()))
	}
	p.log.LogAttrs(context.Background(), level, "proxy decision", attrs...)
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

// copyBufs are the 32 KiB buffers responses are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
