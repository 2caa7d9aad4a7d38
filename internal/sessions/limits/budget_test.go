package limits

import (
	"math"
	"strings"
	"testing"
)

func TestBudgetUSD(t *testing.T) {
	tr := New()
	tr.Set("s", Limits{BudgetUSD: 1}, 0)
	admit := func() string {
		rel, why := tr.Admit("s")
		if rel != nil {
			rel()
		}
		return why
	}
	if why := admit(); why != "" {
		t.Fatalf("refused before spending: %s", why)
	}
	tr.AccountUSD("s", 0.6)
	tr.AccountUSD("s", -5)         // ignored
	tr.AccountUSD("s", math.NaN()) // ignored
	if why := admit(); why != "" || tr.Spent("s") != 0.6 {
		t.Fatalf("refused at $%v of $1: %s", tr.Spent("s"), why)
	}
	tr.AccountUSD("s", 0.5) // the request that crosses it is not cut
	why := admit()
	if !strings.Contains(why, "budget of $1 ") || !strings.Contains(why, "$1.1000") || !strings.Contains(why, "--budget-usd") {
		t.Fatalf("over budget: %q", why)
	}
	// Raising it (Set keeps what was spent with used < 0) lets requests in.
	tr.Set("s", Limits{BudgetUSD: 2}, -1)
	if why := admit(); why != "" || tr.Spent("s") != 1.1 {
		t.Fatalf("raised budget: %q, spent %v", why, tr.Spent("s"))
	}
	// No budget: no refusal whatever was spent; a restart reads it back.
	tr.Set("s", Limits{}, -1)
	tr.AccountUSD("s", 100)
	if why := admit(); why != "" {
		t.Fatalf("no budget: %q", why)
	}
	tr.Forget("s")
	tr.Set("s", Limits{BudgetUSD: 2}, 0)
	tr.SetSpent("s", 3)
	if why := admit(); why == "" {
		t.Fatal("spent read back is not counted")
	}
	if tr.Spent("nobody") != 0 {
		t.Fatal("an unknown session has spent")
	}
}
