package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/audit"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/session"
)

// EgressInner is what the egress routes need of the Runner.
type EgressInner interface {
	EgressPending(ctx context.Context) ([]api.PendingView, error)
	ApproveEgress(ctx context.Context, ref string, req api.ApproveRequest) (api.ApproveResult, error)
}

// EgressPending lists the waiting connections of the sessions the caller
// may see.
func (g *Guard) EgressPending(ctx context.Context) ([]api.PendingView, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	ei, ok := g.inner.(EgressInner)
	if !ok {
		return []api.PendingView{}, nil
	}
	all, err := ei.EgressPending(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.PendingView{}
	for _, pv := range all {
		s, err := g.inner.Session(ctx, pv.Session)
		if err != nil {
			continue
		}
		if _, ok := visible(p, s); ok {
			out = append(out, pv)
		}
	}
	return out, nil
}

// ApproveEgress answers a session's waiting connections: operators and
// up (approving widens what the agent reaches, as changing its settings
// does). Recorded in the audit log with the rule and scope.
func (g *Guard) ApproveEgress(ctx context.Context, ref string, req api.ApproveRequest) (api.ApproveResult, error) {
	ei, ok := g.inner.(EgressInner)
	if !ok {
		return api.ApproveResult{}, fmt.Errorf("this Runner does not steer egress: %w", errdefs.ErrUnavailable)
	}
	action := audit.ActionEgressApprove
	if req.Deny {
		action = audit.ActionEgressDeny
	}
	var res api.ApproveResult
	fill := func(e *audit.Entry) {
		e.Detail = req.Rule
		if req.Scope != "" {
			e.Detail += " scope=" + req.Scope
		}
		if req.For != "" {
			e.Detail += " for=" + req.For
		}
	}
	_, err := g.act(ctx, ref, session.OpSet, action, fill, func(id string) (session.Session, error) {
		var err error
		res, err = ei.ApproveEgress(ctx, id, req)
		return session.Session{}, err
	})
	return res, err
}
