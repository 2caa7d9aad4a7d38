package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/daemon/access"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Steering a session's egress while it runs: its posture and rules change
// at once (claude keeps running: every box has the egress proxy in its
// environment, which in the offline posture refuses everything and says
// so), and in ask mode a connection no rule decides waits for a person.

// alwaysKey is where an owner's "always" approvals are kept.
func alwaysKey(uid uint32) string { return fmt.Sprintf("egress_always/%d", uid) }

// alwaysMu makes each change of a standing list one read-modify-write:
// two of an owner's sessions approve for always under their own locks.
var alwaysMu sync.Mutex

// alwaysOf is an owner's standing approvals (for their ask-mode sessions).
func (r *Runner) alwaysOf(uid uint32) []session.Approval {
	b, err := r.store.Get(store.BucketMeta, alwaysKey(uid))
	if err != nil {
		return nil
	}
	var out []session.Approval
	if json.Unmarshal(b, &out) != nil {
		r.log.Warn("an owner's standing egress approvals are unreadable and ignored", slog.Uint64("uid", uint64(uid)))
		return nil
	}
	return out
}

// egressSpec is what the session's policy is made of now: its posture and
// rules, the named policies attached to it (read from the config), its
// approvals and, in ask mode, its owner's standing ones.
func (r *Runner) egressSpec(s session.Session) (egress.Spec, error) {
	sp := egress.Spec{Posture: s.Egress, Deny: slices.Clone(s.EgressDeny)}
	if s.Egress != session.EgressAllowlist {
		return sp, nil // the posture's own rules; approvals wait for allowlist
	}
	sp.Allow, sp.Ask = slices.Clone(s.EgressAllow), s.EgressAsk
	for _, name := range s.EgressPolicies {
		p, ok := r.opts.Config.Egress.Policies[name]
		if !ok {
			return sp, fmt.Errorf("egress policy %q is attached but no longer in the Runner's config; detach it (paddock egress detach %s %s) or put it back: %w", name, s.Name, name, errdefs.ErrNotFound)
		}
		sp.Allow, sp.Deny = append(sp.Allow, p.Allow...), append(sp.Deny, p.Deny...)
	}
	approved := s.EgressApproved
	if s.EgressAsk {
		approved = append(slices.Clone(approved), r.alwaysOf(s.Owner.UID)...)
	}
	for _, a := range approved {
		rule, err := egress.ParseRule(a.Rule)
		if err != nil {
			continue // validated when approved; a hand-edited store is not trusted
		}
		sp.Approved = append(sp.Approved, egress.Approval{Rule: rule, Until: a.Until, By: a.By})
	}
	return sp, nil
}

// egressChanged records a change of a session's egress in its decision
// log (the place an auditor reads its network history) and the Runner's.
func (r *Runner) egressChanged(s session.Session, by, what string, cut int) {
	reason := what + " (by " + by + ")"
	if cut > 0 {
		reason += fmt.Sprintf("; %d open connection(s) the new policy refuses were cut", cut)
	}
	r.decisions.Record(decisionlog.Entry{Time: time.Now().UTC(), Kind: "egress", Session: s.ID, RequestID: "egress_change",
		Method: "POLICY", Decision: decisionlog.Changed, Rule: s.EgressSummary(), Reason: reason})
	r.log.Info("egress changed", slog.String(logkey.Session, s.ID), slog.String("by", by), slog.String("change", what), slog.Int("cut", cut))
}

// applyEgressSet applies the egress part of a SetRequest to s, validated;
// changed says whether it had one.
func (r *Runner) applyEgressSet(s *session.Session, req api.SetRequest) (changed bool, err error) {
	if req.Egress == nil && req.Allow == nil && req.Deny == nil && req.Ask == nil && len(req.Attach) == 0 && len(req.Detach) == 0 {
		return false, nil
	}
	next := *s
	next.EgressAllow, next.EgressDeny = slices.Clone(s.EgressAllow), slices.Clone(s.EgressDeny)
	next.EgressPolicies = slices.Clone(s.EgressPolicies)
	if req.Egress != nil {
		switch *req.Egress {
		case session.EgressOffline, session.EgressAnthropic, session.EgressAllowlist:
		default:
			return false, fmt.Errorf("egress %q is not offline, anthropic or allowlist: %w", *req.Egress, errdefs.ErrInvalid)
		}
		next.Egress = *req.Egress
	}
	if next.Egress == session.EgressAllowlist && s.CredentialMode == session.ModeDirect {
		return false, fmt.Errorf("credential mode direct needs egress offline or anthropic, not allowlist (the real credential is in that box): %w", errdefs.ErrForbidden)
	}
	if req.Allow != nil {
		next.EgressAllow = slices.Clone(*req.Allow)
	}
	if req.Deny != nil {
		next.EgressDeny = slices.Clone(*req.Deny)
	}
	if req.Ask != nil {
		next.EgressAsk = *req.Ask
	}
	for _, name := range req.Attach {
		if _, ok := r.opts.Config.Egress.Policies[name]; !ok {
			return false, fmt.Errorf("no egress policy %q in the Runner's config (egress.policies): %w", name, errdefs.ErrNotFound)
		}
		if !slices.Contains(next.EgressPolicies, name) {
			next.EgressPolicies = append(next.EgressPolicies, name)
		}
	}
	for _, name := range req.Detach {
		i := slices.Index(next.EgressPolicies, name)
		if i < 0 {
			return false, fmt.Errorf("egress policy %q is not attached to session %q: %w", name, s.Name, errdefs.ErrNotFound)
		}
		next.EgressPolicies = slices.Delete(next.EgressPolicies, i, i+1)
	}
	if next.Egress != session.EgressAllowlist && (req.Ask != nil && *req.Ask || len(req.Attach) > 0 || req.Allow != nil && len(*req.Allow) > 0) {
		return false, fmt.Errorf("--allow, --ask and policies need --egress allowlist (this session's egress is %s): %w", next.Egress, errdefs.ErrInvalid)
	}
	if next.Egress != session.EgressOffline {
		sp, err := r.egressSpec(next)
		if err != nil {
			return false, err
		}
		if _, err := sp.Policy(); err != nil {
			return false, err
		}
	}
	*s = next
	return true, nil
}

// EgressPending lists the connections waiting for approval in the
// sessions the caller may see (filtered by the guard).
func (r *Runner) EgressPending(ctx context.Context) ([]api.PendingView, error) {
	out := []api.PendingView{}
	for _, p := range r.egress.Pending("") {
		s, err := r.Session(ctx, p.Session)
		if err != nil {
			continue
		}
		out = append(out, api.PendingView{Pending: p, Name: s.Name})
	}
	return out, nil
}

// ApproveEgress answers a session's waiting connections to a rule's names
// and records the rule: for the session's life, for a while, or always
// (the owner's every ask-mode session). Deny refuses them; with scope
// "session" it also adds a deny rule. Forbidden address classes stay
// forbidden whatever is approved: the proxy checks them on every dial.
func (r *Runner) ApproveEgress(ctx context.Context, ref string, req api.ApproveRequest) (api.ApproveResult, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpSet)
	if err != nil {
		return api.ApproveResult{}, err
	}
	defer unlock()
	rule, err := egress.ParseRule(strings.TrimSpace(req.Rule))
	if err != nil {
		return api.ApproveResult{}, err
	}
	if s.Egress != session.EgressAllowlist {
		return api.ApproveResult{}, fmt.Errorf("session %q's egress is %s; approvals need the allowlist posture (paddock set %s --egress allowlist --ask): %w", s.Name, s.Egress, s.Name, errdefs.ErrInvalid)
	}
	by := r.caller(ctx).Name
	res := api.ApproveResult{Rule: rule.String()}
	now := time.Now().UTC()
	if req.Deny {
		switch req.Scope {
		case "", "once":
		case "session":
			s.EgressDeny = append(s.EgressDeny, rule.String())
			res.Recorded = true
		default:
			return res, fmt.Errorf("a denial is for the waiting connections (once) or the session; not %q: %w", req.Scope, errdefs.ErrInvalid)
		}
		// The waiting ones hear who answered, before the new policy would
		// answer them itself.
		res.Answered = r.egress.Answer(s.ID, rule, egress.Verdict{Reason: fmt.Sprintf("%s was denied by %s", rule, by)})
		if res.Recorded {
			if err := r.save(&s); err != nil {
				return res, err
			}
			if _, err := r.setPolicy(&s); err != nil {
				return res, err
			}
		}
		r.egressChanged(s, by, fmt.Sprintf("denied %s (%s); %d waiting connection(s) refused", rule, cmp.Or(req.Scope, "once"), res.Answered), 0)
		return res, nil
	}
	if !strings.HasPrefix(rule.Host, "*.") {
		if why, never := r.egress.Unreachable(ctx, rule.Host, rule.Port); never {
			return res, fmt.Errorf("approving %s would let nothing through: %s; address classes stay forbidden whatever is approved: %w", rule, why, errdefs.ErrInvalid)
		}
	}
	a := session.Approval{Rule: rule.String(), By: by, At: now}
	switch req.Scope {
	case "", "session":
	case "for":
		d, err := time.ParseDuration(req.For)
		if err != nil || d < time.Second || d > 90*24*time.Hour {
			return res, fmt.Errorf("--for %q: give a duration between 1s and 2160h (like 30m or 1h): %w", req.For, errdefs.ErrInvalid)
		}
		a.Until = now.Add(d)
	case "always":
		// Who may is the guard's to say: the owner and admins only.
		alwaysMu.Lock()
		list := r.alwaysOf(s.Owner.UID)
		if !slices.ContainsFunc(list, func(x session.Approval) bool { return x.Rule == a.Rule }) {
			list = append(list, a)
			if err := r.putAlways(s.Owner.UID, list); err != nil {
				alwaysMu.Unlock()
				return res, err
			}
		}
		alwaysMu.Unlock()
	default:
		return res, fmt.Errorf("scope %q: say session, for (with a duration) or always: %w", req.Scope, errdefs.ErrInvalid)
	}
	// The same rule once, and no expired ones kept.
	s.EgressApproved = slices.DeleteFunc(s.EgressApproved, func(x session.Approval) bool {
		return x.Rule == a.Rule || !x.Until.IsZero() && !now.Before(x.Until)
	})
	s.EgressApproved = append(s.EgressApproved, a) // its end is armed by setPolicy (armExpiryLocked)
	if err := r.save(&s); err != nil {
		return res, err
	}
	res.Recorded = true
	res.Answered = r.egress.Answer(s.ID, rule, egress.Verdict{Allow: true, By: by})
	if _, err := r.setPolicy(&s); err != nil {
		return res, err
	}
	what := fmt.Sprintf("approved %s", rule)
	switch {
	case req.Scope == "for":
		what += " until " + a.Until.Format(time.RFC3339)
	case req.Scope == "always":
		what += " always (every ask-mode session of " + s.Owner.Name + ")"
	default:
		what += " for the session"
	}
	r.egressChanged(s, by, fmt.Sprintf("%s; %d waiting connection(s) let through", what, res.Answered), 0)
	return res, nil
}

// putAlways stores an owner's standing list (none left: the key goes).
func (r *Runner) putAlways(uid uint32, list []session.Approval) error {
	if len(list) == 0 {
		return r.store.Delete(store.BucketMeta, alwaysKey(uid))
	}
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return r.store.Put(store.BucketMeta, alwaysKey(uid), b)
}

// StandingApprovals is who's standing list: what egress approve --always
// recorded, used by every ask-mode session of theirs. Who may read whose
// is the guard's to say.
func (r *Runner) StandingApprovals(_ context.Context, who session.Person) ([]session.Approval, error) {
	alwaysMu.Lock()
	defer alwaysMu.Unlock()
	list := r.alwaysOf(who.UID)
	if list == nil {
		list = []session.Approval{}
	}
	return list, nil
}

// RemoveStandingApproval takes rule off who's standing list. Each of their
// sessions forgets the copy recorded where it was approved (the same
// approval: rule, by and at), and each with a policy installed has it set
// again: connections that approval alone let through wait again (or are
// refused, out of ask mode), and open tunnels it alone allowed are cut.
// An approval of the same rule made for one session alone stays.
func (r *Runner) RemoveStandingApproval(ctx context.Context, who session.Person, rule string) (api.AlwaysRemoveResult, error) {
	res := api.AlwaysRemoveResult{User: who.Name, Rule: strings.TrimSpace(rule)}
	if pr, err := egress.ParseRule(res.Rule); err == nil {
		res.Rule = pr.String() // as approve recorded it: a port always
	}
	if err := r.waitAdopted(ctx); err != nil {
		return res, err
	}
	alwaysMu.Lock()
	list := r.alwaysOf(who.UID)
	i := slices.IndexFunc(list, func(a session.Approval) bool { return a.Rule == res.Rule })
	if i < 0 {
		alwaysMu.Unlock()
		return res, fmt.Errorf("%s has no standing egress approval of %s; paddock egress always ls lists them: %w", who.Name, res.Rule, errdefs.ErrNotFound)
	}
	gone := list[i]
	err := r.putAlways(who.UID, slices.Delete(list, i, i+1))
	alwaysMu.Unlock()
	if err != nil {
		return res, err
	}
	by := r.caller(ctx).Name
	all, err := r.Sessions(ctx)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, s := range all {
		if s.Owner.UID != who.UID || s.Egress != session.EgressAllowlist {
			continue
		}
		cut, reset, err := r.dropStanding(s.ID, gone, by)
		if err != nil {
			errs = append(errs, fmt.Errorf("session %q: %w", s.Name, err))
			continue
		}
		if reset {
			res.Sessions++
			res.Cut += cut
		}
	}
	return res, errors.Join(errs...)
}

// dropStanding has session id forget a standing approval taken off its
// owner's list: its copy of it, and its policy set again if it has one
// that used it; reset says whether it was.
func (r *Runner) dropStanding(id string, gone session.Approval, by string) (cut int, reset bool, err error) {
	unlock := r.sessionLock(id)
	defer unlock()
	s, err := r.reload(id)
	if err != nil {
		return 0, false, err
	}
	n := len(s.EgressApproved)
	s.EgressApproved = slices.DeleteFunc(s.EgressApproved, func(a session.Approval) bool {
		return a.Rule == gone.Rule && a.By == gone.By && a.At.Equal(gone.At)
	})
	copied := len(s.EgressApproved) < n
	if copied {
		if err := r.save(&s); err != nil {
			return 0, false, err
		}
	}
	if r.policy(id) == nil { // not running: its next start reads the list
		return 0, false, nil
	}
	if !copied && !s.EgressAsk {
		return 0, false, nil // it never used the list
	}
	if cut, err = r.setPolicy(&s); err != nil {
		return 0, true, err
	}
	r.egressChanged(s, by, fmt.Sprintf("standing approval %s of %s removed (paddock egress always rm)", gone.Rule, s.Owner.Name), cut)
	return cut, true, nil
}

var _ access.AlwaysInner = (*Runner)(nil)

// notifyPending runs the notify command for a connection that waits for
// approval (PADDOCK_ACTIVITY=egress_pending, PADDOCK_EGRESS_HOST).
func (r *Runner) notifyPending(p egress.Pending) {
	s, err := r.Session(context.Background(), p.Session)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("egress approval notification", slog.String(logkey.Session, p.Session), slog.Any(logkey.Error, err))
		}
		return
	}
	r.events.Pending(s.ID, s.Name, p.Host, p.Port)
	r.notifyEgress(s, fmt.Sprintf("%s:%d", p.Host, p.Port))
}
