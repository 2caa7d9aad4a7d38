package limits

import (
	"fmt"
	"sync"
	"time"
)

// UserLimits are one person's limits over all their sessions; zero means
// none. MaxSessions is checked by the Runner when a session starts; the
// other two here, on every proxied request.
type UserLimits struct {
	TokensPerDay int64
	MaxStreams   int
}

// Users holds every person's counters: requests in flight and tokens used
// in the current UTC day. Safe for concurrent use.
type Users struct {
	// Now is the clock (tests set it).
	Now func() time.Time

	mu    sync.Mutex
	users map[string]*userState
}

type userState struct {
	open int
	day  int64 // the UTC day of used, in days since 1970-01-01
	used int64
}

// NewUsers returns an empty tracker.
func NewUsers() *Users { return &Users{Now: time.Now, users: map[string]*userState{}} }

// day is t's UTC day, in days since 1970-01-01 (a number, not a date
// string: it is asked twice on every proxied request).
func day(t time.Time) int64 {
	const secondsPerDay = 24 * 60 * 60
	s := t.Unix()
	d := s / secondsPerDay
	if s%secondsPerDay < 0 {
		d-- // floor, for a time before 1970
	}
	return d
}

// get returns user's state, its day's count reset when the day changed.
func (u *Users) get(user string) *userState {
	s := u.users[user]
	if s == nil {
		s = &userState{}
		u.users[user] = s
	}
	if d := day(u.Now()); s.day != d {
		s.day, s.used = d, 0
	}
	return s
}

// Admit decides whether a request of user may go upstream now under l.
// When it may, release must be called when the request ends; when not,
// reason names the limit, its key and when it lifts.
func (u *Users) Admit(user string, l UserLimits) (release func(), reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.get(user)
	switch {
	case l.TokensPerDay > 0 && s.used >= l.TokensPerDay:
		return nil, fmt.Sprintf("%s has used their daily token limit (users.tokens_per_day = %d; %d used today); it resets at 00:00 UTC", user, l.TokensPerDay, s.used)
	case l.MaxStreams > 0 && s.open >= l.MaxStreams:
		return nil, fmt.Sprintf("%s has %d requests in flight over their sessions, their limit (users.max_streams = %d); wait for one to finish", user, s.open, l.MaxStreams)
	}
	s.open++
	done := false
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !done {
			done = true
			s.open--
		}
	}, ""
}

// Account adds tokens a request of user used at the time of the clock.
func (u *Users) Account(user string, tokens int64) {
	if tokens <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.get(user).used += tokens
}

// AccountAt adds tokens used at t, counted only if t is in the current
// UTC day (reading a log back at start-up).
func (u *Users) AccountAt(user string, tokens int64, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.get(user)
	if tokens > 0 && day(t) == s.day {
		s.used += tokens
	}
}

// UsedToday is the tokens user has used in the current UTC day.
func (u *Users) UsedToday(user string) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.get(user).used
}
