package web

import (
	"net/http"
	"slices"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
)

// What a session may need of a person, most pressing first: a
// connection waiting for approval (refused when its deadline passes),
// claude waiting at its prompt, claude gone. Row.NeedsYou is one of these,
// or "" when the session needs nobody now.
const (
	NeedsApproval = "approval"
	NeedsAnswer   = "waiting"
	NeedsRestart  = "exited"
)

var needsRank = map[string]int{NeedsApproval: 0, NeedsAnswer: 1, NeedsRestart: 2, "": 3}

// needsYou is what row needs of a person, given how many of its
// connections wait for approval.
func needsYou(row Row, pending int) string {
	switch {
	case pending > 0:
		return NeedsApproval
	case row.Frozen || row.Observed != "running":
		return "" // asleep, frozen or failed: it waits for nothing
	case row.Activity.State == activity.Waiting:
		return NeedsAnswer
	case row.Activity.State == activity.Exited:
		return NeedsRestart
	}
	return ""
}

// sortByNeed orders the list as the page shows it: the sessions that need
// a person first, the most pressing kind first, within a kind the one
// that has waited longest first; then the rest, newest first.
func sortByNeed(rows []Row) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		if d := needsRank[a.NeedsYou] - needsRank[b.NeedsYou]; d != 0 {
			return d
		}
		if a.NeedsYou != "" {
			return since(a).Compare(since(b))
		}
		return b.Created.Compare(a.Created)
	})
}

func since(r Row) time.Time {
	if r.PendingSince.IsZero() {
		return r.Activity.Since
	}
	return r.PendingSince
}

// pendingBySession counts, per session id, the connections waiting for
// approval that the caller sees, with the oldest one's time.
func (s *Server) pendingBySession(r *http.Request) map[string]pendingCount {
	es, ok := s.b.(api.EgressSteering)
	if !ok {
		return nil
	}
	ps, err := es.EgressPending(r.Context())
	if err != nil {
		return nil // the list shows without it
	}
	m := map[string]pendingCount{}
	for _, p := range ps {
		c := m[p.Session]
		c.n++
		if c.since.IsZero() || p.Since.Before(c.since) {
			c.since = p.Since
		}
		m[p.Session] = c
	}
	return m
}

type pendingCount struct {
	n     int
	since time.Time
}

// liveRoutes are what keeps the page current without polling, and what
// a person reads on a phone instead of the terminal:
//
//	GET /api/events                  the event stream (api.ServeEvents) of every session the person sees
//	GET /api/sessions/{ref}/events   one session's
//	GET /api/sessions/{ref}/turn     api.TurnResult: the last turn, claude's words and tool calls
//
// A browser's EventSource can send no header, so the page reads the
// stream with fetch, which carries the page's key like every request.
func (s *Server) liveRoutes(mux *http.ServeMux) {
	if ev, ok := s.b.(api.Eventer); ok {
		mux.Handle("GET /api/events", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.stream(w, r, ev, "")
		})))
		mux.Handle("GET /api/sessions/{ref}/events", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.stream(w, r, ev, r.PathValue("ref"))
		})))
	}
	if t, ok := s.b.(api.TurnReader); ok {
		mux.Handle("GET /api/sessions/{ref}/turn", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			return t.LastTurn(r.Context(), r.PathValue("ref"))
		})))
	}
}

// stream serves an event stream for as long as the login that opened it
// holds: it is checked again every api.Recheck, so a logout, the cookie's
// end or a person taken out of the group ends it.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, ev api.Eventer, ref string) {
	every := s.recheck
	if every == 0 {
		every = api.Recheck
	}
	ctx, cancel := api.WhileAllowed(r.Context(), every, func() bool {
		uid, cookie, key := s.valid(r)
		if !cookie || !key {
			return false
		}
		_, err := s.who(uid)
		return err == nil
	})
	defer cancel()
	api.ServeEvents(w, r.WithContext(ctx), ev, ref)
}
