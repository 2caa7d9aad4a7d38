package usage

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

var table = Table{AsOf: "2026-12-01", Models: map[string]Price{
	"claude-opus-5-5":   {Input: 4, Output: 20, CacheWrite: 5, CacheRead: 0.2},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1},
	"claude-opus-4":     {Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.5},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.5},
	"gateway-*":         {Input: 2, Output: 2, CacheWrite: 2, CacheRead: 2},
	"gateway-special-*": {Input: 3, Output: 3, CacheWrite: 3, CacheRead: 3},
}}

func TestLookup(t *testing.T) {
	for model, want := range map[string]float64{ // the input price, -1: unknown
		"claude-opus-5-5":           4,
		"Claude-Opus-5-5":           4,
		"claude-opus-5-5[1m]":       4,
		"claude-opus-5-5-20261001":  4,
		"claude-opus-5-5-latest":    4,
		"claude-opus-4-20250514":    15,
		"claude-opus-4-5-20251101":  5,
		"claude-opus-4-6":           -1, // a new model is unknown, not opus-4's
		"claude-opus-4-6-20260101":  -1,
		"claude-opus-5-5-2026":      -1, // not a date
		"claude-opus-5":             -1,
		"claude-sonnet-5-5":         -1,
		"":                          -1,
		"[1m]":                      -1,
		"gateway-x":                 2,
		"gateway-special-x":         3, // the longer prefix
		"gateway":                   -1,
		"claude-haiku-4-5-20251001": 1,
	} {
		p, ok := table.Lookup(model)
		got := p.Input
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("Lookup(%q) input = %v, want %v", model, got, want)
		}
	}
}

func TestCostAndCharge(t *testing.T) {
	tk := Tokens{Input: 1_000_000, Output: 2_000_000, CacheRead: 10_000_000, CacheCreation: 4_000_000}
	p, _ := table.Lookup("claude-opus-5-5")
	if got, want := p.Cost(tk), 4+40+2+20.0; math.Abs(got-want) > 1e-9 {
		t.Fatalf("Cost = %v, want %v", got, want)
	}
	// Unknown models are charged at the dearest price of each kind
	// (cache reads: gateway-special-*'s).
	if got, want := table.Charge("mystery", tk), 15+150+30+75.0; math.Abs(got-want) > 1e-9 {
		t.Fatalf("Charge(unknown) = %v, want %v", got, want)
	}
	if got := table.Charge("claude-haiku-4-5", Tokens{}); got != 0 {
		t.Fatalf("no tokens cost %v", got)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		t   Table
		bad string
	}{
		{table, ""},
		{Table{AsOf: "2026-12-01"}, ""},
		{Table{AsOf: ""}, "as_of"},
		{Table{AsOf: "1 Dec 2026"}, "as_of"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"Claude-Opus": {}}}, "lower-case"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"a b": {}}}, "lower-case"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"*": {Input: 1}}}, ""},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"x": {Input: -1}}}, "input"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"x": {Output: math.NaN()}}}, "output"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"x": {CacheRead: math.Inf(1)}}}, "cache_read"},
		{Table{AsOf: "2026-12-01", Models: map[string]Price{"x": {CacheWrite: 2e6}}}, "cache_write"},
	} {
		err := c.t.Validate()
		if (err != nil) != (c.bad != "") || err != nil && !strings.Contains(err.Error(), c.bad) {
			t.Errorf("Validate(%+v) = %v, want an error about %q", c.t, err, c.bad)
		}
	}
}

func TestAggregate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	recs := []Record{
		{Time: t0, Session: "a", User: "ann", Model: "claude-opus-5-5", Tokens: Tokens{Input: 100, Output: 10, CacheRead: 1000, CacheCreation: 50}},
		{Time: t0.Add(time.Hour), Session: "a", User: "ann", Model: "claude-haiku-4-5-20251001", Tokens: Tokens{Input: 200, Output: 20}},
		{Time: t0.Add(25 * time.Hour), Session: "b", User: "bob", Model: "claude-opus-5-5", Tokens: Tokens{Input: 1, Output: 1}},
		{Time: t0.Add(26 * time.Hour), Session: "b", User: "bob", Model: "mystery-1", Tokens: Tokens{Input: 5}},
		{Time: t0.Add(27 * time.Hour), Session: "b", User: "bob", Model: "mystery-2"}, // no tokens: costs nothing
		{Time: t0.Add(-48 * time.Hour), Session: "c", User: "cy", Model: "claude-opus-5-5", Tokens: Tokens{Input: 7}},
	}
	opus := func(t Tokens) float64 { p, _ := table.Lookup("claude-opus-5-5"); return p.Cost(t) }
	haiku := func(t Tokens) float64 { p, _ := table.Lookup("claude-haiku-4-5"); return p.Cost(t) }
	aCost := opus(recs[0].Tokens) + haiku(recs[1].Tokens)

	since := t0.Add(-time.Hour)
	for _, c := range []struct {
		by   Key
		keys []string
		cost []float64 // -1: unknown
	}{
		{BySession, []string{"a", "b"}, []float64{aCost, -1}},
		{ByUser, []string{"ann", "bob"}, []float64{aCost, -1}},
		{ByModel, []string{"claude-haiku-4-5-20251001", "claude-opus-5-5", "mystery-1", "mystery-2"},
			[]float64{haiku(recs[1].Tokens), opus(recs[0].Tokens) + opus(recs[2].Tokens), -1, 0}},
		{ByDay, []string{"2026-12-01", "2026-12-02"}, []float64{aCost, -1}},
		{ByHour, []string{"2026-12-01T10:00Z", "2026-12-01T11:00Z", "2026-12-02T11:00Z", "2026-12-02T12:00Z", "2026-12-02T13:00Z"},
			[]float64{opus(recs[0].Tokens), haiku(recs[1].Tokens), opus(recs[2].Tokens), -1, 0}},
	} {
		rep := Aggregate(recs, c.by, since, table)
		if len(rep.Rows) != len(c.keys) {
			t.Fatalf("by %s: rows %+v, want keys %v", c.by, rep.Rows, c.keys)
		}
		for i, r := range rep.Rows {
			if r.Key != c.keys[i] {
				t.Errorf("by %s: row %d key %q, want %q", c.by, i, r.Key, c.keys[i])
			}
			switch {
			case c.cost[i] < 0 && r.CostUSD != nil:
				t.Errorf("by %s: row %q cost %v, want unknown", c.by, r.Key, *r.CostUSD)
			case c.cost[i] >= 0 && (r.CostUSD == nil || math.Abs(*r.CostUSD-c.cost[i]) > 1e-12):
				t.Errorf("by %s: row %q cost %v, want %v", c.by, r.Key, r.CostUSD, c.cost[i])
			}
		}
		tot := rep.Total
		if tot.Requests != 5 || tot.Input != 306 || tot.Output != 31 || tot.CacheRead != 1000 || tot.CacheCreation != 50 {
			t.Errorf("by %s: total %+v", c.by, tot)
		}
		if tot.CostUSD != nil || tot.Unpriced != 1 {
			t.Errorf("by %s: total cost %v unpriced %d, want unknown and 1", c.by, tot.CostUSD, tot.Unpriced)
		}
		if strings.Join(rep.UnpricedModels, ",") != "mystery-1" || rep.PricesAsOf != "2026-12-01" {
			t.Errorf("by %s: unpriced %v as of %q", c.by, rep.UnpricedModels, rep.PricesAsOf)
		}
	}

	// Everything priced: the total has a cost; nothing: an empty report.
	rep := Aggregate(recs[:2], BySession, time.Time{}, table)
	if rep.Total.CostUSD == nil || math.Abs(*rep.Total.CostUSD-aCost) > 1e-12 {
		t.Fatalf("total cost %v, want %v", rep.Total.CostUSD, aCost)
	}
	// A record of many requests (a log's rotated-away part) counts as many.
	many := Aggregate([]Record{{Time: t0, Session: "a", Model: "mystery-3", Requests: 40, Tokens: Tokens{Input: 9}}, recs[0]}, BySession, time.Time{}, table)
	if many.Total.Requests != 41 || many.Total.Unpriced != 40 || many.Total.CostUSD != nil {
		t.Fatalf("many: %+v", many.Total)
	}
	empty := Aggregate(nil, ByDay, time.Time{}, table)
	if len(empty.Rows) != 0 || empty.Total.CostUSD == nil || *empty.Total.CostUSD != 0 {
		t.Fatalf("empty report %+v", empty)
	}
	// JSON: rows is [] not null; an unknown cost is null, not 0.
	b, _ := json.Marshal(empty)
	if !strings.Contains(string(b), `"rows":[]`) {
		t.Fatalf("empty report JSON %s", b)
	}
	b, _ = json.Marshal(Aggregate(recs[3:4], BySession, time.Time{}, table))
	if !strings.Contains(string(b), `"cost_usd":null`) {
		t.Fatalf("unknown cost JSON %s", b)
	}
}

func TestParseKey(t *testing.T) {
	for _, s := range []string{"session", "user", "model", "day", "hour"} {
		if k, err := ParseKey(s); err != nil || string(k) != s {
			t.Errorf("ParseKey(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", "Session", "week"} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for s, want := range map[string]time.Time{
		"24h":                  now.Add(-24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2w":                   now.Add(-14 * 24 * time.Hour),
		"0d":                   now,
		" 1h ":                 now.Add(-time.Hour),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-30T08:00:00Z": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	} {
		got, err := ParseSince(s, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "-1h", "-1d", "+1d", "1.5d", "7 d", "yesterday", "2026-12-02", "2026-13-01",
		"99999999999d", "1y", strings.Repeat("9", 100) + "h", "2027-01-01T00:00:00Z"} {
		if got, err := ParseSince(s, now); err == nil {
			t.Errorf("ParseSince(%q) = %v, want an error", s, got)
		}
	}
}

// TestUndated holds the hand-written suffix strip to the regexp it
// replaced, on the edges of both forms.
func TestUndated(t *testing.T) {
	dated := regexp.MustCompile(`-(\d{8}|latest)$`)
	for _, m := range []string{"", "-", "claude-x", "claude-opus-4-5-20251101", "claude-opus-4-5-2025110", "claude-opus-4-5-202511011",
		"claude-opus-4-5-latest", "latest", "-latest", "x-latest-latest", "-12345678", "12345678", "x-1234567a", "x_12345678",
		"claude-3-5-sonnet-20241022[1m]", "x-١٢٣٤٥٦٧٨", "x--20250101"} {
		if got, want := undated(m), dated.ReplaceAllString(m, ""); got != want {
			t.Errorf("undated(%q) = %q, the regexp gives %q", m, got, want)
		}
	}
}
