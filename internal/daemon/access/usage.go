package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// UsageSource is the optional Inner feature behind Guard.Usage: the
// Runner's usage report of the sessions the Guard chose.
type UsageSource interface {
	UsageOf(ctx context.Context, ss []session.Session, q api.UsageQuery) (usage.Report, error)
}

// Usage implements api.UsageReader: one session's usage for observers and
// up, or that of every session the caller sees (their own and those
// shared with them; with q.AllUsers every person's, for admins only).
// Reading usage changes nothing, so it is not audited, like Logs.
func (g *Guard) Usage(ctx context.Context, q api.UsageQuery) (usage.Report, error) {
	src, ok := g.inner.(UsageSource)
	if !ok {
		return usage.Report{}, fmt.Errorf("this Runner keeps no usage: %w", errdefs.ErrUnavailable)
	}
	var ss []session.Session
	switch {
	case q.Session != "":
		_, s, err := g.resolve(ctx, q.Session, session.OpView)
		if err != nil {
			return usage.Report{}, err
		}
		ss = []session.Session{s}
	case q.AllUsers:
		all, err := g.AllSessions(ctx)
		if err != nil {
			return usage.Report{}, err
		}
		ss = all
	default:
		mine, err := g.Sessions(ctx)
		if err != nil {
			return usage.Report{}, err
		}
		ss = mine
	}
	return src.UsageOf(ctx, ss, q)
}
