package events

import (
	"errors"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

func drain(s *Sub) []Event {
	var out []Event
	for {
		select {
		case e, ok := <-s.C:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// A turn: working then waiting makes activity events and a turn's start
// and end, whose usage is the sum of the proxy's entries between them
// (the egress proxy's entries are decisions, not usage).
func TestTurnUsage(t *testing.T) {
	h := New()
	s := h.Subscribe(0)
	idle := activity.Activity{State: activity.Waiting}
	work := activity.Activity{State: activity.Working}
	h.Record(decisionlog.Entry{Session: "a", InputTokens: 1000}) // before the turn: not counted
	h.ActivityChanged("a", "one", idle, work)
	h.ActivityChanged("a", "one", work, work) // no change: nothing
	h.Record(decisionlog.Entry{Session: "a", InputTokens: 10, OutputTokens: 5, CacheReadTokens: 2})
	h.Record(decisionlog.Entry{Session: "b", InputTokens: 99}) // another session's
	h.Record(decisionlog.Entry{Session: "a", Kind: "egress", Host: "example.com"})
	h.Record(decisionlog.Entry{Session: "a", InputTokens: 1, OutputTokens: 1})
	h.ActivityChanged("a", "one", work, idle)
	got := drain(s)
	var types []Type
	for _, e := range got {
		types = append(types, e.Type)
	}
	want := []Type{Decision, Activity, TurnStarted, Decision, Decision, Decision, Decision, Activity, TurnEnded}
	if len(types) != len(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] || got[i].Seq != uint64(i+1) {
			t.Fatalf("event %d: %s seq %d, want %s seq %d", i, types[i], got[i].Seq, want[i], i+1)
		}
	}
	end := got[len(got)-1]
	if end.Usage == nil || end.Usage.Input != 11 || end.Usage.Output != 6 || end.Usage.CacheRead != 2 || end.Requests != 2 || end.Activity.State != activity.Waiting {
		t.Fatalf("turn.ended: %+v usage %+v", end, end.Usage)
	}
}

// Lifecycle events come only on a change of state; removed forgets.
func TestLifecycle(t *testing.T) {
	h := New()
	s := h.Subscribe(0)
	h.StateChanged("a", "one", "created")
	h.StateChanged("a", "one", "created")
	h.StateChanged("a", "one", "running")
	h.StateChanged("a", "one", Removed)
	h.StateChanged("a", "one", Removed)
	var states []string
	for _, e := range drain(s) {
		states = append(states, e.State)
	}
	if len(states) != 4 || states[0] != "created" || states[1] != "running" || states[2] != Removed || states[3] != Removed {
		// A second removed is published: the hub forgot the session, as
		// it must not keep removed sessions forever.
		t.Fatalf("states %v", states)
	}
}

// A client coming back with the last Seq it saw gets what came after;
// one whose Seq is no longer kept is told it lagged; a Seq from an
// earlier Runner (larger than any now) gets all that is kept, lagged.
func TestResume(t *testing.T) {
	h := New()
	for i := 0; i < Keep+10; i++ {
		h.Pending("a", "one", "example.com", 443)
	}
	s := h.Subscribe(uint64(Keep + 5))
	if got := drain(s); s.Lagged || len(got) != 5 || got[0].Seq != uint64(Keep+6) {
		t.Fatalf("resume: lagged %v, %d events", s.Lagged, len(got))
	}
	s = h.Subscribe(3)
	if got := drain(s); !s.Lagged || len(got) != Keep || got[0].Seq != 11 {
		t.Fatalf("resume after a lost seq: lagged %v, %d events from %d", s.Lagged, len(got), got[0].Seq)
	}
	s = h.Subscribe(1 << 40)
	if got := drain(s); !s.Lagged || len(got) != Keep {
		t.Fatalf("resume from another Runner: lagged %v, %d events", s.Lagged, len(got))
	}
	s = h.Subscribe(h.Seq())
	if got := drain(s); s.Lagged || len(got) != 0 {
		t.Fatalf("resume at the end: %v %d", s.Lagged, len(got))
	}
}

// A subscriber that reads nothing is cut off, with ErrSlow, and never
// blocks Publish; the others go on.
func TestSlowSubscriber(t *testing.T) {
	h := New()
	slow := h.Subscribe(0)
	for i := 0; i < subBuffer+Keep+1; i++ {
		h.Pending("a", "one", "example.com", 443)
	}
	fast := h.Subscribe(h.Seq())
	h.Pending("a", "one", "example.com", 443)
	n := 0
	for range slow.C {
		n++
	}
	if !errors.Is(slow.Err(), ErrSlow) || n != subBuffer+Keep {
		t.Fatalf("slow subscriber: %d events, err %v", n, slow.Err())
	}
	if got := drain(fast); len(got) != 1 || fast.Err() != nil {
		t.Fatalf("the other subscriber: %d events, err %v", len(got), fast.Err())
	}
	fast.Close()
	fast.Close() // twice is fine
	if _, ok := <-fast.C; ok {
		t.Fatal("a closed subscription still delivers")
	}
}
