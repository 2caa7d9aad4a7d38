package limits

import (
	"strings"
	"testing"
	"time"
)

func TestUsersDailyTokens(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	u := NewUsers()
	u.Now = func() time.Time { return now }
	l := UserLimits{TokensPerDay: 100}
	rel, why := u.Admit("ann", l)
	if why != "" {
		t.Fatal(why)
	}
	rel()
	u.Account("ann", 100)
	if _, why := u.Admit("ann", l); !strings.Contains(why, "users.tokens_per_day = 100") || !strings.Contains(why, "ann") {
		t.Fatalf("over the daily limit: %q", why)
	}
	if _, why := u.Admit("ben", l); why != "" {
		t.Fatalf("another user is not limited by ann's use: %q", why)
	}
	// A log read back: yesterday's tokens do not count.
	u.AccountAt("ben", 1000, now.Add(-24*time.Hour))
	if got := u.UsedToday("ben"); got != 0 {
		t.Fatalf("yesterday counted: %d", got)
	}
	now = now.Add(2 * time.Hour) // the next UTC day
	if _, why := u.Admit("ann", l); why != "" {
		t.Fatalf("a new day: %q", why)
	}
}

func TestUsersStreams(t *testing.T) {
	u := NewUsers()
	l := UserLimits{MaxStreams: 2}
	r1, _ := u.Admit("ann", l)
	r2, _ := u.Admit("ann", l)
	if _, why := u.Admit("ann", l); !strings.Contains(why, "users.max_streams = 2") {
		t.Fatalf("third stream: %q", why)
	}
	r1()
	r1() // twice is once
	if _, why := u.Admit("ann", l); why != "" {
		t.Fatalf("after a release: %q", why)
	}
	r2()
}

// TestDay: day changes exactly at 00:00 UTC, whatever the time's zone.
func TestDay(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	for _, c := range []struct {
		a, b time.Time
		same bool
	}{
		{time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 23, 59, 59, 999, time.UTC), true},
		{time.Date(2026, 12, 1, 23, 59, 59, 999999999, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), false},
		{time.Date(2026, 12, 2, 8, 59, 0, 0, tokyo), time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC), true},
		{time.Date(2026, 12, 2, 9, 0, 0, 0, tokyo), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), true},
		{time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(1970, 1, 1, 1, 0, 0, 0, time.UTC), false},
	} {
		if got := day(c.a) == day(c.b); got != c.same {
			t.Errorf("%v and %v: same day %v, want %v", c.a, c.b, got, c.same)
		}
		if (c.a.UTC().Format(time.DateOnly) == c.b.UTC().Format(time.DateOnly)) != c.same {
			t.Fatalf("the case %v / %v is wrong", c.a, c.b)
		}
	}
}
