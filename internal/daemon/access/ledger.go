package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Ledger is the session's ledger, for observers and up (as its logs are:
// the transcript's tool inputs it adds are on the terminal they watch).
func (g *Guard) Ledger(ctx context.Context, ref string, o api.LedgerOptions) (api.LedgerResult, error) {
	_, s, err := g.resolve(ctx, ref, session.OpView)
	if err != nil {
		return api.LedgerResult{}, err
	}
	l, ok := g.inner.(api.Ledgerer)
	if !ok {
		return api.LedgerResult{}, fmt.Errorf("this Runner keeps no ledger: %w", errdefs.ErrUnavailable)
	}
	return l.Ledger(ctx, s.ID, o)
}

var _ api.Ledgerer = (*Guard)(nil)
