package access

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
)

// messengerInner is a Runner that takes messages.
type messengerInner struct{ *fakeInner }

func (m messengerInner) SendMessage(ctx context.Context, id string, req api.MessageRequest) (api.MessageResult, error) {
	m.note(ctx, "message "+id+" "+req.Text)
	s, err := m.Session(ctx, id)
	return api.MessageResult{Session: s, Bytes: len(req.Text), Accepted: true}, err
}

// TestMessagesForDrivers: an observer's message is refused and never
// reaches the Runner; a driver's does; a stranger's session is not found;
// each is audited with its size, never its words.
func TestMessagesForDrivers(t *testing.T) {
	g0, in, dir, lg := setup(t)
	g := New(messengerInner{in}, dir, lg, nil)
	s := mustCreate(t, g, ann, "work")
	if _, err := g.SendMessage(as(cy), "work", api.MessageRequest{Text: "cy-words"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a stranger's message: %v", err)
	}
	if _, err := g.Share(as(ann), "work", "ben", "observer"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SendMessage(as(ben), "work", api.MessageRequest{Text: "observer-words"}); !errors.Is(err, errdefs.ErrForbidden) ||
		!strings.Contains(err.Error(), "sending a message to its claude needs driver") {
		t.Fatalf("an observer's message: %v", err)
	}
	if _, err := g.Share(as(ann), "work", "ben", "driver"); err != nil {
		t.Fatal(err)
	}
	res, err := g.SendMessage(as(ben), "work", api.MessageRequest{Text: "driver-words"})
	if err != nil || !res.Accepted || res.Session.YourRole != "driver" {
		t.Fatalf("a driver's message: %+v %v", res, err)
	}
	did := strings.Join(in.did, "\n")
	if !strings.Contains(did, "ben message "+s.ID+" driver-words") || strings.Contains(did, "observer-words") || strings.Contains(did, "cy-words") {
		t.Fatalf("the Runner was asked:\n%s", did)
	}
	// A Runner without messages says so.
	if _, err := g0.SendMessage(as(ann), "work", api.MessageRequest{Text: "x"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("no Messenger: %v", err)
	}
	es, _, err := lg.Read(audit.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range es {
		if e.Action != audit.ActionMessage {
			continue
		}
		l := e.User + " " + e.Detail
		if e.Error != "" {
			l += " refused"
		}
		lines = append(lines, l)
	}
	if got := strings.Join(lines, "\n"); got != "ben 14 bytes refused\nben 12 bytes, taken" {
		t.Fatalf("the audit log's messages:\n%s", got)
	}
}
