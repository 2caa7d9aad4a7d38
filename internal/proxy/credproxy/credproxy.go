// Package credproxy is the credential proxy: an HTTP reverse proxy that
// accepts a live per-session token from a box and forwards the request to
// the Anthropic API with the owner's real credential in its place.
//
// Each request is decided first, then acted on: decide (decide.go) looks
// at the request and returns a verdict — forward it with a plan, answer it
// here, or refuse it with a status and a reason — and ServeHTTP
// (serve.go) carries that out; only reading the body and the upstream's
// answer can still end a forwarded request otherwise. The HTTP/1.1 it
// runs on, server and upstream client, is package h1's, which knows
// nothing of credentials.
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
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/watchdog"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
	"github.com/paddockhq/paddock/internal/sessions/chansession"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
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
