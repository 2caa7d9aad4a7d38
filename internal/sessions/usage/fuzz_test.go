package usage

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseSince: any --since value gives a time not after now, or an
// error; never a panic.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"24h", "7d", "2w", "90m", "2026-11-30", "2026-11-30T08:00:00Z", "", "-1d", "99999999999d", "1.5d", "d", "w"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSince(s, now)
		if err == nil && got.After(now) {
			t.Fatalf("ParseSince(%q) = %v, after now", s, got)
		}
	})
}

// TestParseSinceSaysWhy: a value too far back says so, and what to give;
// one that is no duration says what is.
func TestParseSinceSaysWhy(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for s, want := range map[string]string{"20000w": "more than a century", "36601d": "more than a century", "yesterday": "not a duration"} {
		if _, err := ParseSince(s, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSince(%q): %v, want %q", s, err, want)
		}
	}
	if got, err := ParseSince("5228w", now); err != nil || !got.Before(now) {
		t.Errorf("ParseSince(5228w): %v %v", got, err)
	}
}
