package access

import (
	"context"
	"errors"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// usageInner is a fakeInner that reports which sessions it was asked for.
type usageInner struct {
	*fakeInner
	asked []session.Session
}

func (u *usageInner) UsageOf(_ context.Context, ss []session.Session, q api.UsageQuery) (usage.Report, error) {
	u.asked = ss
	return usage.Report{By: q.By}, nil
}

// TestUsageGuard: usage covers the sessions the caller sees, no more; one
// session needs a role on it; every person's needs an admin.
func TestUsageGuard(t *testing.T) {
	_, in, dir, _ := setup(t)
	ui := &usageInner{fakeInner: in}
	g := New(ui, dir, nil, nil)
	mustCreate(t, g, ann, "a")
	mustCreate(t, g, ben, "b")
	mustCreate(t, g, ben, "b2")
	if _, err := g.Share(as(ben), "b2", "cy", "observer"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who  people.Person
		q    api.UsageQuery
		want string
		err  error
	}{
		{ann, api.UsageQuery{}, "a:owner", nil},
		{ben, api.UsageQuery{}, "b:owner,b2:owner", nil},
		{cy, api.UsageQuery{}, "b2:observer", nil},
		{cy, api.UsageQuery{Session: "b2"}, "b2:observer", nil},
		{ann, api.UsageQuery{Session: "a", By: usage.ByModel}, "a:owner", nil},
		{ann, api.UsageQuery{Session: "b"}, "", errdefs.ErrNotFound}, // not hers: it does not exist
		{cy, api.UsageQuery{Session: "b"}, "", errdefs.ErrNotFound},
		{ann, api.UsageQuery{AllUsers: true}, "", errdefs.ErrForbidden},
		{root, api.UsageQuery{AllUsers: true}, "a:admin,b:admin,b2:admin", nil},
		{root, api.UsageQuery{Session: "a"}, "a:admin", nil},
	} {
		ui.asked = nil
		_, err := g.Usage(as(c.who), c.q)
		if c.err != nil {
			if !errors.Is(err, c.err) || ui.asked != nil {
				t.Errorf("%s %+v: %v (asked %s), want %v", c.who, c.q, err, names(ui.asked), c.err)
			}
			continue
		}
		if err != nil || names(ui.asked) != c.want {
			t.Errorf("%s %+v: %v, sessions %q, want %q", c.who, c.q, err, names(ui.asked), c.want)
		}
	}
	if _, err := g.Usage(context.Background(), api.UsageQuery{}); !errors.Is(err, ErrNoCaller) {
		t.Fatalf("no caller: %v", err)
	}
	// A Runner without the feature says so.
	if _, err := New(in, dir, nil, nil).Usage(as(ann), api.UsageQuery{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("without UsageOf: %v", err)
	}
}
