package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/events"
)

// eventsOnly is a Backend with nothing but a hub's events.
type eventsOnly struct {
	Backend
	hub *events.Hub
}

func (e *eventsOnly) Events(_ context.Context, ref string, after uint64) (Stream, error) {
	if ref == "gone" {
		return Stream{}, errors.New("no session \"gone\": " + errdefs.ErrNotFound.Error())
	}
	s := e.hub.Subscribe(after)
	return Stream{C: s.C, Lagged: s.Lagged, Err: s.Err, Close: s.Close}, nil
}

// TestEventStream: a client of GET /v1/events sees a turn start and end
// in order, as server-sent events with ids; coming back with the last id
// it saw, it gets only what came after; a bad last id is refused.
func TestEventStream(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	b := &eventsOnly{hub: events.New()}
	srv := &http.Server{Handler: Handler(b)}
	go srv.Serve(ln)
	defer srv.Close()
	c := NewClient(sock)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan events.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.Events(ctx, "", 0, func(e events.Event) bool {
			got <- e
			return e.Type != events.TurnEnded
		})
	}()
	// The subscription is made when the request arrives: publish until
	// the first event comes through.
	idle, work := activity.Activity{State: activity.Waiting}, activity.Activity{State: activity.Working}
	var first events.Event
	for first.Seq == 0 {
		b.hub.Pending("s1", "one", "example.com", 443)
		select {
		case first = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.hub.ActivityChanged("s1", "one", idle, work)
	b.hub.ActivityChanged("s1", "one", work, idle)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(got)
	var types []events.Type
	for e := range got {
		types = append(types, e.Type)
	}
	var names []string
	for _, ty := range types {
		if ty != events.EgressPending { // the primers that came after the first
			names = append(names, string(ty))
		}
	}
	if got, want := strings.Join(names, " "), "activity turn.started activity turn.ended"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}

	// Resume after the first: everything after it again, in order.
	var again []uint64
	if err := c.Events(ctx, "", first.Seq, func(e events.Event) bool {
		again = append(again, e.Seq)
		return e.Type != events.TurnEnded
	}); err != nil {
		t.Fatal(err)
	}
	if len(again) < 4 || again[0] != first.Seq+1 {
		t.Fatalf("resumed at %v after %d", again, first.Seq)
	}
	req, _ := http.NewRequest("GET", "http://paddock/v1/events", nil)
	req.Header.Set("Last-Event-ID", "x")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("a bad Last-Event-ID: %d", resp.StatusCode)
	}
}
