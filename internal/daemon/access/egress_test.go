package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func (f *fakeInner) EgressPending(ctx context.Context) ([]api.PendingView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.PendingView
	for _, s := range f.sessions {
		out = append(out, api.PendingView{Pending: egress.Pending{ID: "ask_" + s.ID, Session: s.ID, Host: "docs.example.com", Port: 443}, Name: s.Name})
	}
	return out, nil
}

func (f *fakeInner) ApproveEgress(ctx context.Context, id string, req api.ApproveRequest) (api.ApproveResult, error) {
	f.note(ctx, "approve "+id+" "+req.Rule)
	return api.ApproveResult{Rule: req.Rule, Answered: 1, Recorded: true}, nil
}

// TestEgressAnswers: a person sees the waiting connections of the
// sessions they can see, never another's; answering needs the operator
// role; each answer is audited with the rule.
func TestEgressAnswers(t *testing.T) {
	g, in, _, lg := setup(t)
	annS := mustCreate(t, g, ann, "annwork")
	benS := mustCreate(t, g, ben, "benwork")
	ps, err := g.EgressPending(as(ben))
	if err != nil || len(ps) != 1 || ps[0].Session != benS.ID {
		t.Fatalf("ben's pending: %+v %v", ps, err)
	}
	if _, err := g.ApproveEgress(as(ben), annS.ID, api.ApproveRequest{Rule: "docs.example.com"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ben approving for ann's session: %v", err)
	}
	if _, err := g.Share(as(ann), annS.ID, "ben", "driver"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := g.EgressPending(as(ben)); len(ps) != 2 {
		t.Fatalf("a driver sees the session's pending: %+v", ps)
	}
	if _, err := g.ApproveEgress(as(ben), annS.ID, api.ApproveRequest{Rule: "docs.example.com"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a driver approving: %v", err)
	}
	if _, err := g.Share(as(ann), annS.ID, "ben", string(session.RoleOperator)); err != nil {
		t.Fatal(err)
	}
	if res, err := g.ApproveEgress(as(ben), annS.ID, api.ApproveRequest{Rule: "docs.example.com", Scope: "for", For: "1h"}); err != nil || res.Answered != 1 {
		t.Fatalf("an operator approving: %+v %v", res, err)
	}
	in.mu.Lock()
	did := in.did
	in.mu.Unlock()
	if len(did) == 0 || did[len(did)-1] != "ben approve "+annS.ID+" docs.example.com" {
		t.Fatalf("the Runner was called: %q", did)
	}
	es, _, err := lg.Read(audit.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range es {
		found = found || e.Action == "egress-approve" && e.User == "ben" && e.Session == annS.ID && e.Detail == "docs.example.com scope=for for=1h" && e.Error == ""
	}
	if !found {
		t.Fatalf("the audit log: %+v", es)
	}
}

// TestAlwaysIsTheOwners: approving for always writes to the session
// owner's standing list, which every ask-mode session of theirs uses; so
// an operator of one shared session may not (refused with who may, and
// audited), while the owner and an admin may.
func TestAlwaysIsTheOwners(t *testing.T) {
	g, in, _, lg := setup(t)
	annS := mustCreate(t, g, ann, "annwork")
	if _, err := g.Share(as(ann), annS.ID, "ben", string(session.RoleOperator)); err != nil {
		t.Fatal(err)
	}
	always := api.ApproveRequest{Rule: "docs.example.com", Scope: "always"}
	_, err := g.ApproveEgress(as(ben), annS.ID, always)
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "only the session's owner (ann) or an admin can approve for always") ||
		!strings.Contains(err.Error(), "without --always") {
		t.Fatalf("an operator approving for always: %v", err)
	}
	in.mu.Lock()
	did := slices.Clone(in.did)
	in.mu.Unlock()
	for _, d := range did {
		if strings.HasPrefix(d, "ben approve") {
			t.Fatalf("the Runner was asked: %q", did)
		}
	}
	// The same operator, for the session: allowed.
	if _, err := g.ApproveEgress(as(ben), annS.ID, api.ApproveRequest{Rule: "docs.example.com"}); err != nil {
		t.Fatalf("an operator approving for the session: %v", err)
	}
	for _, p := range []people.Person{ann, root} {
		if res, err := g.ApproveEgress(as(p), annS.ID, always); err != nil || res.Answered != 1 {
			t.Fatalf("%s approving for always: %+v %v", p, res, err)
		}
	}
	es, _, err := lg.Read(audit.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var refused, byAnn, byRoot bool
	for _, e := range es {
		if e.Action != audit.ActionEgressApprove || e.Detail != "docs.example.com scope=always" {
			continue
		}
		refused = refused || e.User == "ben" && strings.Contains(e.Error, "only the session's owner")
		byAnn = byAnn || e.User == "ann" && e.Error == ""
		byRoot = byRoot || e.User == "root" && e.Error == "" && e.Admin
	}
	if !refused || !byAnn || !byRoot {
		t.Fatalf("the audit log (refused %v, ann %v, root %v): %+v", refused, byAnn, byRoot, es)
	}
}

func (f *fakeInner) StandingApprovals(ctx context.Context, who session.Person) ([]session.Approval, error) {
	f.note(ctx, "always-ls "+who.Name)
	return []session.Approval{{Rule: "docs.example.com:443", By: who.Name}}, nil
}

func (f *fakeInner) RemoveStandingApproval(ctx context.Context, who session.Person, rule string) (api.AlwaysRemoveResult, error) {
	f.note(ctx, "always-rm "+who.Name+" "+rule)
	return api.AlwaysRemoveResult{User: who.Name, Rule: rule, Sessions: 2}, nil
}

// TestAlwaysListedAndRemovedByItsOwner: a person lists and removes their
// own standing approvals; another's only an admin may (ben naming ann is
// refused before the Runner is asked); each removal is audited with whose
// list it was, the refused one too.
func TestAlwaysListedAndRemovedByItsOwner(t *testing.T) {
	g, in, _, lg := setup(t)
	if l, err := g.EgressAlways(as(ann), ""); err != nil || l.User != "ann" || len(l.Approvals) != 1 {
		t.Fatalf("ann's own list: %+v %v", l, err)
	}
	if l, err := g.EgressAlways(as(ann), "ann"); err != nil || l.User != "ann" {
		t.Fatalf("ann naming herself: %+v %v", l, err)
	}
	if _, err := g.EgressAlways(as(ben), "ann"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "paddock egress always ls") {
		t.Fatalf("ben listing ann's: %v", err)
	}
	if _, err := g.RemoveEgressAlways(as(ben), api.AlwaysRemoveRequest{Rule: "docs.example.com", User: "ann"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("ben removing ann's: %v", err)
	}
	if l, err := g.EgressAlways(as(root), "ann"); err != nil || l.User != "ann" {
		t.Fatalf("an admin listing ann's: %+v %v", l, err)
	}
	if _, err := g.EgressAlways(as(root), "nobody"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an admin naming no one: %v", err)
	}
	if res, err := g.RemoveEgressAlways(as(ann), api.AlwaysRemoveRequest{Rule: "docs.example.com"}); err != nil || res.User != "ann" {
		t.Fatalf("ann removing her own: %+v %v", res, err)
	}
	if _, err := g.RemoveEgressAlways(as(root), api.AlwaysRemoveRequest{Rule: "x.example.com", User: "ann"}); err != nil {
		t.Fatalf("an admin removing ann's: %v", err)
	}
	if _, err := g.EgressAlways(context.Background(), ""); !errors.Is(err, ErrNoCaller) {
		t.Fatalf("no caller: %v", err)
	}
	in.mu.Lock()
	did := slices.Clone(in.did)
	in.mu.Unlock()
	want := []string{"ann always-ls ann", "ann always-ls ann", "root always-ls ann", "ann always-rm ann docs.example.com", "root always-rm ann x.example.com"}
	if !slices.Equal(did, want) {
		t.Fatalf("the Runner was asked %q, want %q", did, want)
	}
	es, _, err := lg.Read(audit.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		if e.Action == ActionEgressAlwaysRemove {
			got = append(got, fmt.Sprintf("%s %s admin=%v %s err=%v", e.User, e.Target, e.Admin, e.Detail, e.Error != ""))
		}
	}
	want = []string{"ben ann admin=false docs.example.com err=true", "ann ann admin=false docs.example.com sessions=2 cut=0 err=false",
		"root ann admin=true x.example.com sessions=2 cut=0 err=false"}
	if !slices.Equal(got, want) {
		t.Fatalf("the audit log:\n%q\nwant\n%q", got, want)
	}
	// ann reads the entries about her list, the admin's removal too.
	var seen int
	if err := g.Audit(as(ann), api.AuditQuery{}, func(e audit.Entry) error {
		if e.Action == ActionEgressAlwaysRemove {
			seen++
		}
		return nil
	}); err != nil || seen != 3 {
		t.Fatalf("ann's audit: %d %v", seen, err)
	}
}
