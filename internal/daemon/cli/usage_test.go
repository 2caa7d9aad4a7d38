package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// TestWriteUsage: an aligned table with a total row; an unknown cost says
// so, and what to do is on stderr.
func TestWriteUsage(t *testing.T) {
	c := 1.5
	rep := usage.Report{By: usage.BySession, PricesAsOf: "2026-12-01", UnpricedModels: []string{"mystery"},
		Rows: []usage.Row{
			{Key: "alpha", Requests: 3, Tokens: usage.Tokens{Input: 100, Output: 20, CacheRead: 3000, CacheCreation: 64}, CostUSD: &c},
			{Key: "a-much-longer-name", Requests: 1, Tokens: usage.Tokens{Input: 5}, Unpriced: 1},
		},
		Total: usage.Row{Requests: 4, Tokens: usage.Tokens{Input: 105, Output: 20, CacheRead: 3000, CacheCreation: 64}, Unpriced: 1}}
	var out, errs bytes.Buffer
	if err := writeUsage(IO{Stdout: &out, Stderr: &errs}, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SESSION ") || !strings.HasPrefix(lines[3], "TOTAL ") {
		t.Fatalf("table:\n%s", out.String())
	}
	col := strings.Index(lines[0], "REQUESTS")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("columns are not aligned:\n%s", out.String())
		}
	}
	if !strings.Contains(lines[1], "1.5000") || !strings.Contains(lines[2], "unknown") || !strings.Contains(lines[3], "unknown") {
		t.Fatalf("costs:\n%s", out.String())
	}
	if !strings.Contains(errs.String(), "list prices of 2026-12-01") || !strings.Contains(errs.String(), "mystery") ||
		!strings.Contains(errs.String(), `[prices.models."ID"]`) {
		t.Fatalf("notes: %s", errs.String())
	}
}

func TestUsageFlags(t *testing.T) {
	for _, args := range [][]string{{"usage", "--by", "week"}, {"usage", "--since", "soon"}, {"usage", "x", "--all-users"}, {"usage", "a", "b"}} {
		var out, errs bytes.Buffer
		if code := Main(t.Context(), append([]string{"--state-dir", t.TempDir()}, args...), IO{Stdout: &out, Stderr: &errs}); code != 2 {
			t.Errorf("%v: exit %d: %s", args, code, errs.String())
		}
	}
}
