package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// tokens is the Runner's side of API tokens, which makes and lists them
// for the person in the context.
func (g *Guard) tokens() (api.Tokener, error) {
	t, ok := g.inner.(api.Tokener)
	if !ok {
		return nil, fmt.Errorf("this Runner makes no API tokens: %w", errdefs.ErrUnavailable)
	}
	return t, nil
}

// CreateAPIToken makes an API token for the caller, of the scope asked for;
// never through a token (a token makes no other).
func (g *Guard) CreateAPIToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	p, err := caller(ctx)
	if err != nil {
		return api.NewToken{}, err
	}
	if p.Via != "" {
		return api.NewToken{}, fmt.Errorf("an API token cannot make another; run paddock token create on the Runner's host: %w", errdefs.ErrForbidden)
	}
	t, err := g.tokens()
	if err != nil {
		return api.NewToken{}, err
	}
	res, err := t.CreateAPIToken(ctx, req)
	g.record(p, audit.ActionTokenCreate, nil, err, func(e *audit.Entry) {
		e.Target, e.Detail = res.ID, fmt.Sprintf("scope %s, name %q", req.Scope, req.Name)
	})
	return res, err
}

// APITokens lists the caller's tokens.
func (g *Guard) APITokens(ctx context.Context) ([]api.TokenInfo, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	t, err := g.tokens()
	if err != nil {
		return nil, err
	}
	return t.APITokens(ctx)
}

// RemoveAPIToken revokes one of the caller's tokens (an admin's: anyone's).
func (g *Guard) RemoveAPIToken(ctx context.Context, id string) (api.TokenInfo, error) {
	p, err := caller(ctx)
	if err != nil {
		return api.TokenInfo{}, err
	}
	t, err := g.tokens()
	if err != nil {
		return api.TokenInfo{}, err
	}
	res, err := t.RemoveAPIToken(ctx, id)
	g.record(p, audit.ActionTokenRemove, nil, err, func(e *audit.Entry) {
		e.Target, e.Detail = id, fmt.Sprintf("scope %s, name %q", res.Scope, res.Name)
	})
	return res, err
}

var _ api.Tokener = (*Guard)(nil)

// WebEnroll is a passkey enrolment link for the caller, or, for an admin,
// for user.
func (g *Guard) WebEnroll(ctx context.Context, user string) (string, error) {
	p, err := caller(ctx)
	if err != nil {
		return "", err
	}
	e, ok := g.inner.(api.WebEnroller)
	if !ok {
		return "", fmt.Errorf("this Runner makes no passkeys: %w", errdefs.ErrUnavailable)
	}
	if user != "" && user != p.Name && !p.Admin {
		err := fmt.Errorf("only an admin makes a passkey link for someone else; %s runs paddock web enroll themselves: %w", user, errdefs.ErrForbidden)
		g.record(p, audit.ActionPasskeyLink, nil, err, func(e *audit.Entry) { e.Target = user })
		return "", err
	}
	u, err := e.WebEnroll(ctx, user)
	g.record(p, audit.ActionPasskeyLink, nil, err, func(e *audit.Entry) { e.Target = user })
	return u, err
}

// RecordWebLogin records a login to the web page, by passkey or by a
// one-time URL (ActionWebLogin, Detail "used" or "refused", beside the
// entry of the URL's making), or its refusal.
func (g *Guard) RecordWebLogin(p people.Person, how, detail string, err error) {
	if how == "url" { // beside the entry of the URL's making
		g.record(p, audit.ActionWebLogin, nil, err, func(e *audit.Entry) { e.Detail = detail })
		return
	}
	g.record(p, audit.ActionWebPasskey, nil, err, func(e *audit.Entry) { e.Detail = how + " " + detail })
}

var _ api.WebEnroller = (*Guard)(nil)
