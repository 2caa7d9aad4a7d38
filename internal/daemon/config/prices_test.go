package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultPrices(t *testing.T) {
	d := Default()
	if err := d.Prices.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Prices.AsOf != PricesAsOf || d.Sessions.BudgetUSD != 0 {
		t.Fatalf("as of %q, budget %v", d.Prices.AsOf, d.Sessions.BudgetUSD)
	}
	// The models the fake upstream and the pinned CLI use, dated ids too.
	for model, in := range map[string]float64{
		"claude-opus-5-5": 4, "claude-sonnet-5-5": 2, "claude-haiku-4-5": 1, "claude-haiku-4-5-20251001": 1,
		"claude-opus-4-20250514": 15, "claude-opus-4-1-20250805": 15, "claude-sonnet-4-5-20250929": 3, "claude-opus-4-6": 5,
	} {
		if p, ok := d.Prices.Lookup(model); !ok || p.Input != in {
			t.Errorf("default price of %s: %+v %v, want input %v", model, p, ok, in)
		}
	}
	if _, ok := d.Prices.Lookup("gpt-5"); ok {
		t.Error("a model of no family is priced")
	}
	// Each call is a new map: a caller's change does not leak.
	d.Prices.Models["x"] = d.Prices.Models["claude-opus-5-5"]
	if _, ok := DefaultPrices().Models["x"]; ok {
		t.Fatal("DefaultPrices shares its map")
	}
}

func TestPricesFile(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "good_prices.toml"), true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Prices.AsOf != "2026-11-15" || c.Sessions.BudgetUSD != 2.5 {
		t.Fatalf("as of %q, budget %v", c.Prices.AsOf, c.Sessions.BudgetUSD)
	}
	if p, _ := c.Prices.Lookup("claude-opus-5-5"); p.Input != 3.2 || p.CacheRead != 0.16 {
		t.Fatalf("override not applied: %+v", p)
	}
	if p, ok := c.Prices.Lookup("gw-anything"); !ok || p.Output != 2 {
		t.Fatalf("wildcard: %+v %v", p, ok)
	}
	if p, ok := c.Prices.Lookup("claude-haiku-4-5"); !ok || p.Input != 1 {
		t.Fatalf("the defaults the file leaves are kept: %+v %v", p, ok)
	}

	for _, tc := range []struct{ file, key, msg string }{
		{"bad_prices_missing.toml", `prices.models."claude-opus-5-5"`, "cache_write is missing"},
		{"bad_prices_negative.toml", "prices", "input = -4: a price is 0 or more"},
		{"bad_prices_as_of.toml", "prices", `as_of "December 2026" is not a date`},
		{"bad_prices_key.toml", "prices", "not a lower-case model id"},
		{"bad_budget_usd.toml", "sessions.budget_usd", "-1 is outside 0"},
	} {
		path := filepath.Join("testdata", tc.file)
		_, err := Load(path, true)
		var ce *Error
		if !errors.As(err, &ce) || ce.File != path || ce.Key != tc.key || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%s: got %v, want key %s and %q", tc.file, err, tc.key, tc.msg)
		}
	}
	if _, err := Parse("t.toml", []byte("version = 1\n[prices]\nas_of = \"2026-12-01\"\ncurrency = \"EUR\"\n")); err == nil ||
		!strings.Contains(err.Error(), "prices.currency: unknown key") {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := Parse("t.toml", []byte("version = 1\n[prices.models.x]\ninput = nan\noutput = 1\ncache_write = 1\ncache_read = 1\n")); err == nil {
		t.Fatal("a NaN price is accepted")
	}
}
