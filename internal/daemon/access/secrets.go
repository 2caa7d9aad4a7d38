package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/api"
)

// A person's service credentials are theirs alone: the Runner keeps them
// by the caller's uid, so the Guard only passes these through; no role
// on any session reaches another person's.

func (g *Guard) secrets() (api.Secrets, error) {
	s, ok := g.inner.(api.Secrets)
	if !ok {
		return nil, fmt.Errorf("this Runner keeps no service credentials: %w", errdefs.ErrUnavailable)
	}
	return s, nil
}

// ListSecrets lists the caller's own.
func (g *Guard) ListSecrets(ctx context.Context) ([]service.Status, error) {
	s, err := g.secrets()
	if err != nil {
		return nil, err
	}
	return s.ListSecrets(ctx)
}

// SetSecret stores one of the caller's own.
func (g *Guard) SetSecret(ctx context.Context, sec service.Secret) (service.Status, error) {
	s, err := g.secrets()
	if err != nil {
		return service.Status{}, err
	}
	return s.SetSecret(ctx, sec)
}

// RemoveSecret removes one of the caller's own.
func (g *Guard) RemoveSecret(ctx context.Context, name string) error {
	s, err := g.secrets()
	if err != nil {
		return err
	}
	return s.RemoveSecret(ctx, name)
}

var _ api.Secrets = (*Guard)(nil)
