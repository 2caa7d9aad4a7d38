package credproxy

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// verdict is what decide makes of a request before anything is done about
// it: forward it (and with what), answer it here, or refuse it (with which
// status and reason). ServeHTTP then carries it out.
type verdict struct {
	// outcome is Forwarded, Local or Refused.
	outcome decisionlog.Decision
	// A refusal's or a local answer's status and reason; a refusal's error
	// type in the API's error shape, and a 405's Allow header.
	status  int
	errType string
	reason  string
	allow   string
	// session is whose request it is, as far as it is known: the session
	// whose channel it came on, then the token's.
	session string
	// plan is how a forwarded request goes out.
	plan plan
}

// plan is how a forwarded request goes out: to a route of the API, or to a
// relay with the path under its prefix; with the query re-encoded by the
// policy; with the credential (or, to a relay, the session's secret for
// it) in place of the token the box presented.
type plan struct {
	rt          route
	relay       *Relay
	relayPath   string
	query       string
	cred        credential.Credential
	relaySecret secret.Value
	token       string          // the presented token, to strip copies of it
	tokenKind   credential.Kind // the session token's kind, to warn when cred's differs
	release     func()          // the limiter's, to run when the request ends; may be nil
}

// refuse makes v a refusal.
func (v verdict) refuse(status int, errType, reason string) verdict {
	v.outcome, v.status, v.errType, v.reason = decisionlog.Refused, status, errType, reason
	return v
}

// decide says what to do with a request. It writes nothing and reads no
// body: it looks at the request line, the headers and the connection's
// context, asks the token registry, the relay secrets and the credential,
// and has one effect, the limiter's: a forward holds a slot of its
// session's until its plan's release runs.
//
// The first check that fails is the refusal: the target's form, its path,
// method and query (decideTarget); then the token, that it belongs to the
// session whose channel it came on, the relay's secret or the credential,
// and the limiter (decideSender).
func (p *Proxy) decide(r *http.Request) verdict {
	var v verdict
	if ch, ok := channelSession(r.Context()); ok {
		// A request over a box's channel is that box's, token or not: its
		// refusals go to its session's log too. The token must still agree.
		v.session = ch
	}
	v, decided := p.decideTarget(r, v)
	if decided {
		return v
	}
	return p.decideSender(r, v)
}

// decideTarget checks what a request asks for, and reports whether that
// decided it (a refusal, or the preconnect answered here); if not, v's
// plan has the route or relay and the query.
func (p *Proxy) decideTarget(r *http.Request, v verdict) (verdict, bool) {
	// Target form: only origin-form ("/path?query"). CONNECT uses
	// authority-form, forward proxies absolute-form; neither is ours.
	if r.Method == http.MethodConnect {
		return v.refuse(http.StatusMethodNotAllowed, anthropic.InvalidRequest, "CONNECT is not served by the credential proxy"), true
	}
	if !strings.HasPrefix(r.RequestURI, "/") || r.URL.IsAbs() || r.URL.Host != "" {
		return v.refuse(http.StatusBadRequest, anthropic.InvalidRequest, "only origin-form request targets (/v1/...) are served"), true
	}
	if wantsUpgrade(r) {
		return v.refuse(http.StatusBadRequest, anthropic.InvalidRequest, "protocol upgrades (h2c, websocket) are not served"), true
	}
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	if rawPath == helloPath && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		v.outcome, v.status, v.reason = decisionlog.Local, http.StatusOK, "preconnect answered by paddock"
		return v, true
	}
	if rl, suffix, ok := p.matchRelay(rawPath); ok {
		// A relay route: the same checks and handling, another upstream
		// and the session's secret for it instead of the credential.
		if why := checkRelayRequest(r.Method, suffix); why != "" {
			return v.refuse(http.StatusBadRequest, anthropic.InvalidRequest, why), true
		}
		q, why := checkRelayQuery(rawQuery)
		if why != "" {
			return v.refuse(http.StatusBadRequest, anthropic.InvalidRequest, why), true
		}
		dec, _ := url.PathUnescape(suffix) // checked above: no escaped separators
		v.plan.relay, v.plan.relayPath, v.plan.query = rl, dec, q
		return v, false
	}
	return p.decideRoute(r, v, rawPath, rawQuery)
}

// decideRoute is decideTarget for a path that is no relay's: one of the
// routes (routes.go), with its method and query policy.
func (p *Proxy) decideRoute(r *http.Request, v verdict, rawPath, rawQuery string) (verdict, bool) {
	direct := isDirect(r.Context())
	rts := matchPath(rawPath, direct)
	if len(rts) == 0 {
		if direct {
			return v.refuse(http.StatusNotFound, anthropic.NotFound, "paddock lets the API host's "+strconv.Quote(logkey.Clip(rawPath, 80))+" through to no one (see docs/DIRECT-REQUESTS.md)"), true
		}
		return v.refuse(http.StatusNotFound, anthropic.NotFound, "paddock forwards only POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models"+p.relayNote()), true
	}
	var rt route
	found := false
	for _, c := range rts {
		if c.method == r.Method {
			rt, found = c, true
		}
	}
	if !found {
		v.allow = allowed(rts)
		return v.refuse(http.StatusMethodNotAllowed, anthropic.InvalidRequest, "method "+logkey.Clip(r.Method, 20)+" is not allowed on "+rawPath), true
	}
	if rt.usageView && !p.opts.UsageView {
		return v.refuse(http.StatusForbidden, anthropic.Permission, usageViewOff), true
	}
	q, why := checkQuery(rt, rawQuery)
	if why != "" {
		return v.refuse(http.StatusBadRequest, anthropic.InvalidRequest, why), true
	}
	v.plan.rt, v.plan.query = rt, q
	return v, false
}

// decideSender checks who sent a request whose target decideTarget let
// through, and what it may go out with; it ends in a refusal or a forward.
func (p *Proxy) decideSender(r *http.Request, v verdict) verdict {
	// The token, once, in its kind's header.
	rec, tok, why := p.authenticate(r)
	if why != "" {
		return v.refuse(http.StatusUnauthorized, anthropic.Authentication, why)
	}
	v.session, v.plan.token, v.plan.tokenKind = rec.Session, tok, rec.Kind
	if ch, ok := channelSession(r.Context()); ok && ch != rec.Session {
		return v.refuse(http.StatusForbidden, anthropic.Permission, "this token belongs to another session than the box it came from")
	}
	if rl := v.plan.relay; rl != nil {
		sec, ok := secret.Value{}, false
		if p.opts.RelaySecret != nil {
			sec, ok = p.opts.RelaySecret(rec.Session, rl.Name)
		}
		if !ok {
			return v.refuse(http.StatusForbidden, anthropic.Permission, "this session has no secret for relay "+rl.Name+"; give one when the session is created")
		}
		v.plan.relaySecret = sec
	}
	// Asked for a relay's request too, which goes out without it: its
	// entry names whose credential the session's requests use.
	cred, err := p.credentialOf(rec.Session)
	switch {
	case err == nil || v.plan.relay != nil:
	case errors.Is(err, errdefs.ErrForbidden):
		return v.refuse(http.StatusForbidden, anthropic.Permission, err.Error())
	case errors.Is(err, credential.ErrExpired):
		// An expired or dead login: Claude Code shows this, and it says
		// what to do.
		return v.refuse(http.StatusUnauthorized, anthropic.Authentication, "paddock: "+err.Error())
	default:
		// The message names what to do; it never holds a secret.
		return v.refuse(http.StatusServiceUnavailable, anthropic.APIError, "paddock has no usable credential for the upstream: "+err.Error())
	}
	v.plan.cred = cred
	if p.opts.Limits != nil {
		release, why := p.opts.Limits.Admit(rec.Session)
		if why != "" {
			return v.refuse(http.StatusTooManyRequests, anthropic.RateLimit, why)
		}
		v.plan.release = release
	}
	v.outcome = decisionlog.Forwarded
	return v
}

// credentialOf is the credential a session's requests go out with: the
// one SessionCredential picks, else the Runner's.
func (p *Proxy) credentialOf(session string) (credential.Credential, error) {
	if p.opts.SessionCredential != nil {
		return p.opts.SessionCredential(session)
	}
	return p.opts.Credential.Current()
}
