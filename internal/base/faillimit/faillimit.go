// Package faillimit refuses a key (a client's address) that failed too
// often: after Max failures within Window, counted from its first, Blocked
// reports it until that window has passed. Logins and token checks use it
// against guessing.
//
// At most Track keys are counted at once. When that many are, the expired
// ones are forgotten first, then the one whose window began longest ago,
// so a flood of new addresses costs bounded memory.
package faillimit

import (
	"sync"
	"time"
)

// Limiter counts failures by key. Make one with New; it is safe for
// concurrent use.
type Limiter struct {
	max    int
	window time.Duration
	track  int

	mu sync.Mutex
	m  map[string]*count
}

type count struct {
	n     int
	since time.Time
}

// New returns a Limiter that blocks a key after max failures within
// window, counting at most track keys.
func New(max int, window time.Duration, track int) *Limiter {
	return &Limiter{max: max, window: window, track: track, m: map[string]*count{}}
}

// Blocked reports whether key failed Max times within the window that
// began with its first failure, as of now.
func (l *Limiter) Blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.m[key]
	if c == nil {
		return false
	}
	if now.Sub(c.since) > l.window {
		delete(l.m, key)
		return false
	}
	return c.n >= l.max
}

// Fail counts a failure of key at now.
func (l *Limiter) Fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.m[key]
	if c == nil || now.Sub(c.since) > l.window {
		if c == nil && len(l.m) >= l.track {
			l.makeRoom(now)
		}
		c = &count{since: now}
		l.m[key] = c
	}
	c.n++
}

// makeRoom forgets the expired keys, or else the oldest one.
func (l *Limiter) makeRoom(now time.Time) {
	var oldest string
	var at time.Time
	for k, c := range l.m {
		if now.Sub(c.since) > l.window {
			delete(l.m, k)
			continue
		}
		if oldest == "" || c.since.Before(at) {
			oldest, at = k, c.since
		}
	}
	if len(l.m) >= l.track {
		delete(l.m, oldest)
	}
}
