// Package events is the Runner's stream of what happens to its sessions,
// for programs that watch (the API's server-sent events, paddock mcp):
// claude's activity changing, turns starting and ending with what they
// used, proxy and egress decisions, egress requests waiting for approval,
// and sessions being created, going to sleep, waking and being removed.
//
// A Hub numbers events in order (Seq, from 1 for each Runner start) and
// keeps the last Keep of them, so a client that lost its connection asks
// for what came after the last one it saw (Subscribe's after) and misses
// nothing that is still kept; Lagged says when it did. Publishing never
// blocks: a subscriber that does not keep up is cut off (its channel is
// closed with Err set to ErrSlow) and comes back with after.
//
// Events carry what `paddock ls`, `paddock logs` and `paddock usage`
// already show their reader: no credential, no session token, no prompt.
// Who may see which session's events is the caller's business (package
// access filters them by the session's visibility).
package events

import (
	"errors"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// Type names an event's kind.
type Type string

// The kinds of events.
const (
	// Activity: claude's activity changed (Activity).
	Activity Type = "activity"
	// TurnStarted: claude began working on a prompt.
	TurnStarted Type = "turn.started"
	// TurnEnded: claude stopped working (Activity says how: waiting, or
	// exited); Usage is what the turn's upstream requests used.
	TurnEnded Type = "turn.ended"
	// Decision: the credential or egress proxy decided a request
	// (Decision, as paddock logs shows it).
	Decision Type = "decision"
	// EgressPending: a connection waits for a person's approval (Host,
	// Port).
	EgressPending Type = "egress.pending"
	// Lifecycle: the session was created, or its state changed (State:
	// created, running, asleep, frozen, failed… or removed).
	Lifecycle Type = "session"
)

// Removed is the State of a Lifecycle event for a removed session.
const Removed = "removed"

// Event is one thing that happened to a session.
type Event struct {
	// Seq orders events; it starts at 1 when the Runner starts.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Type Type      `json:"type"`
	// Session is the session's id, Name its name.
	Session string `json:"session"`
	Name    string `json:"name,omitempty"`

	Activity *activity.Activity `json:"activity,omitempty"`
	Usage    *usage.Tokens      `json:"usage,omitempty"`
	Decision *decisionlog.Entry `json:"decision,omitempty"`
	State    string             `json:"state,omitempty"`
	Host     string             `json:"host,omitempty"`
	Port     int                `json:"port,omitempty"`
	// Requests is, for TurnEnded, how many upstream requests the turn made.
	Requests int `json:"requests,omitempty"`
}

// Keep is how many events a Hub keeps for clients that come back.
const Keep = 4096

// subBuffer is how many events a subscriber may fall behind before it is
// cut off.
const subBuffer = 1024

// ErrSlow is a subscription's Err when it fell more than its buffer
// behind and was cut off; resubscribe with the last Seq seen.
var ErrSlow = errors.New("the event stream fell too far behind and was cut off; reconnect with the last event id seen")

// Hub holds the stream. The zero Hub is not usable; use New.
type Hub struct {
	now func() time.Time

	mu   sync.Mutex
	seq  uint64
	ring []Event // the last Keep events, oldest first
	subs map[*Sub]struct{}
	// turns are the open turns' usage by session id, and state each
	// session's last published lifecycle state.
	turns map[string]*turn
	state map[string]string
}

type turn struct {
	tokens   usage.Tokens
	requests int
}

// New makes an empty hub.
func New() *Hub {
	return &Hub{now: time.Now, subs: map[*Sub]struct{}{}, turns: map[string]*turn{}, state: map[string]string{}}
}

// Sub is one subscriber. C carries its events in order; it is closed when
// the subscription ends (Close, or cut off: Err says why).
type Sub struct {
	C <-chan Event
	// Lagged is true when events after the one asked for were no longer
	// kept: the client missed some.
	Lagged bool

	c   chan Event
	h   *Hub
	err error
}

// Err is why C was closed by the hub (ErrSlow), or nil.
func (s *Sub) Err() error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.err
}

// Close ends the subscription; C is closed.
func (s *Sub) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.subs[s]; ok {
		delete(s.h.subs, s)
		close(s.c)
	}
}

// Subscribe starts a subscription. With after > 0 the kept events after
// that Seq come first (Lagged if some were no longer kept); with 0 only
// new events come.
func (h *Hub) Subscribe(after uint64) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan Event, subBuffer+Keep)
	s := &Sub{C: c, c: c, h: h}
	if after > 0 && after < h.seq {
		if len(h.ring) > 0 && h.ring[0].Seq > after+1 {
			s.Lagged = true
		}
		for _, e := range h.ring {
			if e.Seq > after {
				c <- e
			}
		}
	} else if after > h.seq {
		// A Seq from an earlier Runner (they start at 1 again): all kept.
		s.Lagged = true
		for _, e := range h.ring {
			c <- e
		}
	}
	h.subs[s] = struct{}{}
	return s
}

// Seq is the last event's number.
func (h *Hub) Seq() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Publish stamps e (Seq, and Time when zero), keeps it and sends it to
// every subscriber; it never blocks.
func (h *Hub) Publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked(e)
}

func (h *Hub) publishLocked(e Event) {
	h.seq++
	e.Seq = h.seq
	if e.Time.IsZero() {
		e.Time = h.now().UTC()
	}
	if len(h.ring) == Keep {
		copy(h.ring, h.ring[1:])
		h.ring = h.ring[:Keep-1]
	}
	h.ring = append(h.ring, e)
	for s := range h.subs {
		select {
		case s.c <- e:
		default:
			s.err = ErrSlow
			delete(h.subs, s)
			close(s.c)
		}
	}
}

// ActivityChanged publishes an Activity event and, when claude starts or
// stops working, TurnStarted or TurnEnded (with the turn's usage, which
// Record counted meanwhile).
func (h *Hub) ActivityChanged(id, name string, prev, a activity.Activity) {
	if prev.State == a.State {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cp := a
	h.publishLocked(Event{Type: Activity, Session: id, Name: name, Activity: &cp})
	switch {
	case a.State == activity.Working:
		h.turns[id] = &turn{}
		h.publishLocked(Event{Type: TurnStarted, Session: id, Name: name})
	case prev.State == activity.Working:
		t := h.turns[id]
		delete(h.turns, id)
		if t == nil {
			t = &turn{}
		}
		tk := t.tokens
		h.publishLocked(Event{Type: TurnEnded, Session: id, Name: name, Activity: &cp, Usage: &tk, Requests: t.requests})
	}
}

// Record implements decisionlog.Sink: a Decision event, and the
// request's tokens counted into its session's open turn.
func (h *Hub) Record(e decisionlog.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.turns[e.Session]; t != nil && e.Kind == "" {
		t.requests++
		t.tokens.Input += e.InputTokens
		t.tokens.Output += e.OutputTokens
		t.tokens.CacheRead += e.CacheReadTokens
		t.tokens.CacheCreation += e.CacheCreationTokens
	}
	cp := e
	h.publishLocked(Event{Type: Decision, Session: e.Session, Decision: &cp})
}

// StateChanged publishes a Lifecycle event when the session's state is not
// the one last published for it (Removed forgets the session).
func (h *Hub) StateChanged(id, name, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state[id] == state {
		return
	}
	if state == Removed {
		delete(h.state, id)
		delete(h.turns, id)
	} else {
		h.state[id] = state
	}
	h.publishLocked(Event{Type: Lifecycle, Session: id, Name: name, State: state})
}

// Pending publishes an EgressPending event.
func (h *Hub) Pending(id, name, host string, port int) {
	h.Publish(Event{Type: EgressPending, Session: id, Name: name, Host: host, Port: port})
}
