package access

import (
	"context"
	"errors"
	"testing"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/audit"
	"github.com/paddockhq/paddock/internal/egress"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/session"
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
