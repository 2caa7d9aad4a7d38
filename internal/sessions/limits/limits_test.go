package limits

import (
	"strings"
	"testing"
	"time"
)

func TestLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := New()
	tr.Now = func() time.Time { return now }
	tr.Set("s", Limits{RPM: 3, Concurrent: 2, TokenBudget: 100}, 0)
	r1, why := tr.Admit("s")
	r2, _ := tr.Admit("s")
	if why != "" || r1 == nil || r2 == nil {
		t.Fatal(why)
	}
	if _, why := tr.Admit("s"); !strings.Contains(why, "2 concurrent") {
		t.Fatalf("concurrency: %q", why)
	}
	r1()
	r1() // idempotent
	r3, why := tr.Admit("s")
	if why != "" {
		t.Fatal(why)
	}
	r2()
	r3()
	if _, why := tr.Admit("s"); !strings.Contains(why, "3 requests per minute") {
		t.Fatalf("rpm: %q", why)
	}
	now = now.Add(61 * time.Second)
	r, why := tr.Admit("s")
	if why != "" {
		t.Fatalf("after a minute: %q", why)
	}
	r()
	tr.Account("s", 60)
	tr.Account("s", 40)
	if _, why := tr.Admit("s"); !strings.Contains(why, "token budget (100 of 100") || !strings.Contains(why, "--budget") {
		t.Fatalf("budget: %q", why)
	}
	tr.Set("s", Limits{TokenBudget: 500}, -1) // raise the budget, keep what was used
	if _, why := tr.Admit("s"); why != "" || tr.Used("s") != 100 {
		t.Fatalf("raised budget: %q used %d", why, tr.Used("s"))
	}
	// Unlimited sessions are never refused.
	for i := 0; i < 1000; i++ {
		if _, why := tr.Admit("free"); why != "" {
			t.Fatal(why)
		}
	}
}
