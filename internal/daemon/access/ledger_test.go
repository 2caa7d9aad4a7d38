package access

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
)

// ledgerInner is the fake Runner with a ledger.
type ledgerInner struct{ *fakeInner }

func (l ledgerInner) Ledger(ctx context.Context, id string, o api.LedgerOptions) (api.LedgerResult, error) {
	what := "ledger " + id
	if o.WithTranscript {
		what += " with transcript"
	}
	l.note(ctx, what)
	return api.LedgerResult{}, nil
}

// TestLedgerForObservers: a session's ledger, transcript and all, is for
// those who may see the session (an observer is enough, as for its logs);
// to anyone else the session does not exist.
func TestLedgerForObservers(t *testing.T) {
	plain, in, dir, lg := setup(t)
	g := New(ledgerInner{in}, dir, lg, nil)
	s := mustCreate(t, g, ann, "work")
	if _, err := g.Share(as(ann), "work", "ben", "observer"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ledger(as(ben), "work", api.LedgerOptions{WithTranscript: true}); err != nil {
		t.Fatalf("an observer's ledger: %v", err)
	}
	if _, err := g.Ledger(as(cy), "work", api.LedgerOptions{}); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "you can see") {
		t.Fatalf("cy's ledger of ann's session: %v", err)
	}
	if _, err := g.Ledger(context.Background(), "work", api.LedgerOptions{}); err == nil {
		t.Fatal("a ledger without a caller")
	}
	if got := strings.Join(in.did, "\n"); !strings.Contains(got, "ben ledger "+s.ID+" with transcript") || strings.Contains(got, "cy ") {
		t.Fatalf("what reached the Runner:\n%s", got)
	}
	// A Runner without the feature says so.
	if _, err := plain.Ledger(as(ann), "work", api.LedgerOptions{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("no ledger: %v", err)
	}
}
