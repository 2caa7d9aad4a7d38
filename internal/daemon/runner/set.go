package runner

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Set changes the model or effort and, if the session runs, restarts
// claude with --resume and the new choice.
func (r *Runner) Set(ctx context.Context, ref string, req api.SetRequest) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpSet)
	if err != nil {
		return s, err
	}
	defer unlock()
	if req.Model != nil {
		if err := session.ValidModel(*req.Model); err != nil {
			return s, err
		}
		s.Model = *req.Model
	}
	if req.Effort != nil {
		if err := session.ValidEffort(*req.Effort); err != nil {
			return s, err
		}
		s.Effort = *req.Effort
	}
	egressWas := s
	egressChanged, err := r.applyEgressSet(&s, req)
	if err != nil {
		return s, err
	}
	if egressChanged {
		if err := r.save(&s); err != nil {
			return s, err
		}
		cut, err := r.setPolicy(&s)
		if err != nil {
			return s, err
		}
		r.egressChanged(s, r.caller(ctx).Name, "egress "+egressWas.EgressSummary()+" → "+s.EgressSummary(), cut)
		if req.Model == nil && req.Effort == nil && req.TokenBudget == nil && req.BudgetUSD == nil {
			return s, nil // claude keeps running: its egress proxy applies the change
		}
	}
	if req.BudgetUSD != nil {
		if s.Limits.BudgetUSD, err = budgetUSD(0, *req.BudgetUSD); err != nil {
			return s, err
		}
		r.usage.Set(s.ID, s.Limits, -1) // at once, keeping what was spent
		if req.Model == nil && req.Effort == nil && req.TokenBudget == nil {
			return s, r.save(&s) // no need to restart claude for a budget
		}
	}
	if req.TokenBudget != nil {
		if *req.TokenBudget < 0 {
			return s, fmt.Errorf("budget %d: must be 0 (none) or more: %w", *req.TokenBudget, errdefs.ErrInvalid)
		}
		s.Limits.TokenBudget = *req.TokenBudget
		r.usage.Set(s.ID, s.Limits, -1) // at once, keeping what was used
		if req.Model == nil && req.Effort == nil {
			return s, r.save(&s) // no need to restart claude for a budget
		}
	}
	if s.Observed == session.Running {
		if s.Frozen { // a new claude needs its box thawed
			if err := r.thaw(ctx, &s); err != nil {
				return s, err
			}
		}
		lv := r.getLive(s.ID)
		if lv == nil {
			return s, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
		}
		env, err := r.launch(ctx, &s, lv.link)
		if err != nil {
			return s, err
		}
		r.setLive(s.ID, &live{link: lv.link, env: env})
	}
	return s, r.save(&s)
}
