// Package limits enforces per-session limits on the credential proxy:
// requests per minute, concurrent requests (streams), a token budget and
// a budget in money (US dollars, priced by the caller).
// It is pure bookkeeping with an injectable clock; the proxy asks Admit
// before it calls the upstream and reports usage with Account.
package limits

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Limits of one session; zero means no limit.
type Limits struct {
	RPM         int   `json:"rpm,omitempty"`
	Concurrent  int   `json:"concurrent,omitempty"`
	TokenBudget int64 `json:"token_budget,omitempty"`
	// BudgetUSD is a budget in US dollars, counted with AccountUSD.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
}

// Tracker holds every session's counters. Safe for concurrent use.
type Tracker struct {
	// Now is the clock (tests set it).
	Now func() time.Time

	mu       sync.Mutex
	sessions map[string]*state
}

type state struct {
	limits Limits
	recent []time.Time // request times within the last minute
	open   int
	used   int64
	spent  float64 // US dollars
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{Now: time.Now, sessions: map[string]*state{}} }

func (t *Tracker) get(session string) *state {
	s := t.sessions[session]
	if s == nil {
		s = &state{}
		t.sessions[session] = s
	}
	return s
}

// Set replaces a session's limits and, when used >= 0, the tokens it has
// already used (e.g. read back from its log at start).
func (t *Tracker) Set(session string, l Limits, used int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.get(session)
	s.limits = l
	if used >= 0 {
		s.used = used
	}
}

// Forget drops a session's counters.
func (t *Tracker) Forget(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, session)
}

// Len is how many sessions the tracker counts for (tests: a removed
// session must leave none).
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// Admit decides whether a request of session may go upstream now. When it
// may, release must be called when the request ends; when not, reason
// says which limit, in words for the agent's user.
func (t *Tracker) Admit(session string) (release func(), reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.get(session)
	now := t.Now()
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(s.recent) && !s.recent[i].After(cut) {
		i++
	}
	s.recent = s.recent[i:]
	l := s.limits
	switch {
	case l.TokenBudget > 0 && s.used >= l.TokenBudget:
		return nil, fmt.Sprintf("this session has used its token budget (%d of %d tokens); the owner can raise it with: paddock set <session> --budget N", s.used, l.TokenBudget)
	case l.BudgetUSD > 0 && s.spent >= l.BudgetUSD:
		return nil, fmt.Sprintf("this session has spent its budget of $%s (an estimated $%.4f at list prices); the owner can raise it with: paddock set <session> --budget-usd N",
			strconv.FormatFloat(l.BudgetUSD, 'f', -1, 64), s.spent)
	case l.RPM > 0 && len(s.recent) >= l.RPM:
		return nil, fmt.Sprintf("this session is limited to %d requests per minute; wait a little", l.RPM)
	case l.Concurrent > 0 && s.open >= l.Concurrent:
		return nil, fmt.Sprintf("this session is limited to %d concurrent requests", l.Concurrent)
	}
	s.recent = append(s.recent, now)
	s.open++
	done := false
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !done {
			done = true
			s.open--
		}
	}, ""
}

// Account adds tokens a session's request used.
func (t *Tracker) Account(session string, tokens int64) {
	if tokens <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(session).used += tokens
}

// SetSpent replaces the US dollars a session has spent (e.g. read back
// from its log at start).
func (t *Tracker) SetSpent(session string, usd float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(session).spent = usd
}

// AccountUSD adds what a session's request cost, in US dollars.
func (t *Tracker) AccountUSD(session string, usd float64) {
	if !(usd > 0) { // NaN too
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(session).spent += usd
}

// Spent is the US dollars a session has spent.
func (t *Tracker) Spent(session string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[session]; s != nil {
		return s.spent
	}
	return 0
}

// Used is the tokens a session has used.
func (t *Tracker) Used(session string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[session]; s != nil {
		return s.used
	}
	return 0
}
