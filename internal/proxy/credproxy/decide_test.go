package credproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// admitting is a Limiter that refuses session "limited" only.
type admitting struct{ released *int }

func (a admitting) Admit(session string) (func(), string) {
	if session == "limited" {
		return nil, "this session has too many requests in flight"
	}
	return func() { *a.released++ }, ""
}

func (admitting) Account(string, int64) {}

// TestDecide: what decide makes of each kind of request, without a
// server, a body or an upstream: the outcome, the status, whose request it
// is, and for a forward its plan.
func TestDecide(t *testing.T) {
	reg, err := sessiontoken.New(store.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{}
	for _, s := range []string{"s1", "s2", "forbidden", "expired", "broken", "limited"} {
		tok, err := reg.Issue(s, credential.KindOAuth)
		if err != nil {
			t.Fatal(err)
		}
		bearer[s] = "Bearer " + tok.Reveal()
	}
	hub, err := NewRelay("hub", "/mod/", "https://hub.example", "X-Hub-Key")
	if err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse("https://api.example")
	owner := credential.Credential{Kind: credential.KindOAuth, Secret: secret.New("sk-fake-owner"), User: "ann"}
	released := 0
	p, err := New(Options{Upstream: up, Credential: credential.Static(owner), Tokens: reg, Relays: []Relay{hub},
		RelaySecret: func(session, relay string) (secret.Value, bool) {
			return secret.New("sk-fake-hub"), session == "s1" && relay == "hub"
		},
		SessionCredential: func(session string) (credential.Credential, error) {
			switch session {
			case "forbidden":
				return credential.Credential{}, fmt.Errorf("%w: ann shares no credential with this session", errdefs.ErrForbidden)
			case "expired":
				return credential.Credential{}, fmt.Errorf("the login ran out: %w", credential.ErrExpired)
			case "broken":
				return credential.Credential{}, errors.New("no credential is stored")
			}
			return owner, nil
		},
		Limits: admitting{&released}})
	if err != nil {
		t.Fatal(err)
	}
	channel := func(s string) func(context.Context) context.Context {
		return func(ctx context.Context) context.Context { return WithChannelSession(ctx, s) }
	}
	const (
		fwd = decisionlog.Forwarded
		ref = decisionlog.Refused
	)
	for _, c := range []struct {
		name, method, target, from string // from: whose token, if any
		hdr                        http.Header
		ctx                        func(context.Context) context.Context
		want                       decisionlog.Decision
		status                     int
		session                    string
	}{
		{name: "messages", method: "POST", target: "/v1/messages?beta=true", from: "s1", want: fwd, session: "s1"},
		{name: "models", method: "GET", target: "/v1/models?limit=3", from: "s1", want: fwd, session: "s1"},
		{name: "relay", method: "POST", target: "/mod/v1/x?a=1", from: "s1", want: fwd, session: "s1"},
		{name: "preconnect", method: "HEAD", target: "/api/hello", want: decisionlog.Local, status: 200},
		{name: "connect", method: "CONNECT", target: "evil:443", from: "s1", want: ref, status: 405},
		{name: "absolute form", method: "POST", target: "http://evil/v1/messages", from: "s1", want: ref, status: 400},
		{name: "upgrade", method: "GET", target: "/v1/models", from: "s1", hdr: http.Header{"Upgrade": {"h2c"}}, want: ref, status: 400},
		{name: "unknown path", method: "POST", target: "/v1/files", from: "s1", want: ref, status: 404},
		{name: "direct path elsewhere", method: "GET", target: "/api/oauth/profile", from: "s1", ctx: WithDirect, want: ref, status: 404},
		{name: "wrong method", method: "GET", target: "/v1/messages", from: "s1", want: ref, status: 405},
		{name: "query", method: "POST", target: "/v1/messages?beta=false", from: "s1", want: ref, status: 400},
		{name: "usage view off", method: "GET", target: "/api/oauth/usage", from: "s1", ctx: WithDirect, want: ref, status: 403},
		{name: "relay path", method: "GET", target: "/mod/a/../b", from: "s1", want: ref, status: 400},
		{name: "no token", method: "POST", target: "/v1/messages", want: ref, status: 401},
		{name: "bad token", method: "POST", target: "/v1/messages", hdr: http.Header{"Authorization": {"Bearer sk-fake-nothing"}}, want: ref, status: 401},
		{name: "channel's session, no token", method: "POST", target: "/v1/messages", ctx: channel("s1"), want: ref, status: 401, session: "s1"},
		{name: "another session's box", method: "POST", target: "/v1/messages", from: "s2", ctx: channel("s1"), want: ref, status: 403, session: "s2"},
		{name: "own box", method: "POST", target: "/v1/messages", from: "s1", ctx: channel("s1"), want: fwd, session: "s1"},
		{name: "relay without a secret", method: "POST", target: "/mod/x", from: "s2", want: ref, status: 403, session: "s2"},
		{name: "credential forbidden", method: "POST", target: "/v1/messages", from: "forbidden", want: ref, status: 403, session: "forbidden"},
		{name: "credential expired", method: "POST", target: "/v1/messages", from: "expired", want: ref, status: 401, session: "expired"},
		{name: "no credential", method: "POST", target: "/v1/messages", from: "broken", want: ref, status: 503, session: "broken"},
		{name: "limited", method: "POST", target: "/v1/messages", from: "limited", want: ref, status: 429, session: "limited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, nil)
			for k, vs := range c.hdr {
				r.Header[k] = vs
			}
			if c.from != "" {
				r.Header.Set("Authorization", bearer[c.from])
			}
			if c.ctx != nil {
				r = r.WithContext(c.ctx(r.Context()))
			}
			v := p.decide(r)
			if v.outcome != c.want || v.status != c.status || v.session != c.session {
				t.Fatalf("%s %d session %q (%s), want %s %d session %q", v.outcome, v.status, v.session, v.reason, c.want, c.status, c.session)
			}
			switch {
			case v.outcome == decisionlog.Refused && (v.reason == "" || v.errType == ""):
				t.Fatalf("a refusal without its reason or type: %+v", v)
			case v.outcome != decisionlog.Forwarded && v.plan.release != nil:
				t.Fatal("a request not forwarded holds a slot of the limiter")
			case v.outcome == decisionlog.Forwarded && (v.plan.release == nil || v.plan.token == "" || v.plan.cred.User != "ann"):
				t.Fatalf("a forward's plan: %+v", v.plan)
			}
			if v.plan.release != nil {
				v.plan.release()
			}
		})
	}
	if r := httptest.NewRequest("GET", "/v1/messages", nil); p.decide(r).allow != "POST" {
		t.Error("a 405 names no Allow")
	}
	r := httptest.NewRequest("POST", "/mod/v1/x?b=2&a=1", nil)
	r.Header.Set("Authorization", bearer["s1"])
	if v := p.decide(r); v.plan.relay != &p.opts.Relays[0] || v.plan.relayPath != "v1/x" || v.plan.query != "a=1&b=2" || v.plan.relaySecret.Reveal() != "sk-fake-hub" {
		t.Errorf("relay plan %+v", v.plan)
	} else {
		v.plan.release()
	}
	if released != 5 {
		t.Errorf("%d slots released, want one per forward (5)", released)
	}
}
