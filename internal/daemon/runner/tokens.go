package runner

import (
	"context"

	"github.com/paddockhq/paddock/internal/daemon/access"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// CreateAPIToken makes an API token for the caller.
func (r *Runner) CreateAPIToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	p, ok := people.From(ctx)
	if !ok {
		return api.NewToken{}, access.ErrNoCaller
	}
	tok, info, err := r.apiTokens.Create(p.UID, req.Scope, req.Name)
	if err != nil {
		return api.NewToken{}, err
	}
	return api.NewToken{TokenInfo: info, Token: api.Secret(tok.Reveal())}, nil
}

// APITokens lists the caller's API tokens.
func (r *Runner) APITokens(ctx context.Context) ([]api.TokenInfo, error) {
	p, ok := people.From(ctx)
	if !ok {
		return nil, access.ErrNoCaller
	}
	return r.apiTokens.List(p.UID)
}

// RemoveAPIToken revokes one of the caller's API tokens (an admin's: any).
func (r *Runner) RemoveAPIToken(ctx context.Context, id string) (api.TokenInfo, error) {
	p, ok := people.From(ctx)
	if !ok {
		return api.TokenInfo{}, access.ErrNoCaller
	}
	return r.apiTokens.Remove(p.UID, p.Admin, id)
}

var _ api.Tokener = (*Runner)(nil)
