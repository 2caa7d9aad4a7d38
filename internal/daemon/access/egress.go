package access

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// EgressInner is what the egress routes need of the Runner.
type EgressInner interface {
	EgressPending(ctx context.Context) ([]api.PendingView, error)
	ApproveEgress(ctx context.Context, ref string, req api.ApproveRequest) (api.ApproveResult, error)
}

// AlwaysInner is what the standing approvals' routes need of the Runner:
// a person's list, and a removal from it.
type AlwaysInner interface {
	StandingApprovals(ctx context.Context, who session.Person) ([]session.Approval, error)
	RemoveStandingApproval(ctx context.Context, who session.Person, rule string) (api.AlwaysRemoveResult, error)
}

// ActionEgressAlwaysRemove is the audit action of paddock egress always rm
// (audit's readers accept actions they do not list).
const ActionEgressAlwaysRemove = "egress-always-rm"

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
// does). For always, the session's owner and admins only: it writes to
// the owner's standing list, which every ask-mode session of theirs uses,
// not only the one shared. Recorded in the audit log with the rule and
// scope, refusals too.
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
		if req.Scope == "always" && !req.Deny {
			if err := g.mayApproveAlways(ctx, id); err != nil {
				return session.Session{}, err
			}
		}
		var err error
		res, err = ei.ApproveEgress(ctx, id, req)
		return session.Session{}, err
	})
	return res, err
}

// mayApproveAlways: the caller is session id's owner, or an admin.
func (g *Guard) mayApproveAlways(ctx context.Context, id string) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	s, err := g.inner.Session(ctx, id)
	if err != nil {
		return err
	}
	if p.Admin || s.Owner.UID == p.UID {
		return nil
	}
	return fmt.Errorf("only the session's owner (%s) or an admin can approve for always: it would let every ask-mode session of %s reach it; approve for this session without --always: %w",
		s.Owner.Name, s.Owner.Name, errdefs.ErrForbidden)
}

// EgressAlways lists a person's standing approvals: the caller's own;
// admins may name anyone's.
func (g *Guard) EgressAlways(ctx context.Context, user string) (api.AlwaysList, error) {
	p, ai, err := g.always(ctx)
	if err != nil {
		return api.AlwaysList{}, err
	}
	who, err := g.whoseAlways(p, user)
	if err != nil {
		return api.AlwaysList{}, err
	}
	list, err := ai.StandingApprovals(ctx, who)
	if err != nil {
		return api.AlwaysList{}, err
	}
	return api.AlwaysList{User: who.Name, Approvals: list}, nil
}

// RemoveEgressAlways takes a rule off a person's standing list: the
// caller's own; admins anyone's. Recorded in the audit log (refusals
// too), with the person as its target.
func (g *Guard) RemoveEgressAlways(ctx context.Context, req api.AlwaysRemoveRequest) (api.AlwaysRemoveResult, error) {
	p, ai, err := g.always(ctx)
	if err != nil {
		return api.AlwaysRemoveResult{}, err
	}
	var res api.AlwaysRemoveResult
	who, err := g.whoseAlways(p, req.User)
	if err == nil {
		res, err = ai.RemoveStandingApproval(ctx, who, req.Rule)
	}
	g.record(p, ActionEgressAlwaysRemove, nil, err, func(e *audit.Entry) {
		e.Target = cmp.Or(who.Name, req.User, p.Name)
		e.Admin = p.Admin && e.Target != p.Name
		e.Detail = strings.TrimSpace(req.Rule)
		if err == nil {
			e.Detail = fmt.Sprintf("%s sessions=%d cut=%d", res.Rule, res.Sessions, res.Cut)
		}
	})
	return res, err
}

// always is the caller and the Runner's standing approvals.
func (g *Guard) always(ctx context.Context) (people.Person, AlwaysInner, error) {
	p, err := caller(ctx)
	if err != nil {
		return p, nil, err
	}
	ai, ok := g.inner.(AlwaysInner)
	if !ok {
		return p, nil, fmt.Errorf("this Runner does not steer egress: %w", errdefs.ErrUnavailable)
	}
	return p, ai, nil
}

// whoseAlways is the person whose standing list a call is about: the
// caller's own (user "" or their name), another's for admins only.
func (g *Guard) whoseAlways(p people.Person, name string) (session.Person, error) {
	if name == "" || name == p.Name {
		return session.Person{UID: p.UID, Name: p.Name}, nil
	}
	if !p.Admin {
		return session.Person{}, fmt.Errorf("%s's standing egress approvals are theirs and the admins' alone; yours are listed by paddock egress always ls: %w", name, errdefs.ErrForbidden)
	}
	to, err := g.dir.Lookup(name)
	if err == nil {
		return session.Person{UID: to.UID, Name: to.Name}, nil
	}
	if !errors.Is(err, people.ErrNotMember) {
		return session.Person{}, err
	}
	// Taken out of the group: their sessions run on with the list.
	u, uerr := user.Lookup(name)
	if uerr != nil {
		return session.Person{}, err
	}
	id, uerr := strconv.ParseUint(u.Uid, 10, 32)
	if uerr != nil {
		return session.Person{}, err
	}
	return session.Person{UID: uint32(id), Name: u.Username}, nil
}

var _ api.EgressStanding = (*Guard)(nil)
