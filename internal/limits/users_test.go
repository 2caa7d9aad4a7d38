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
