package config

import (
	"fmt"
	"sort"

	"github.com/BurntSushi/toml"

	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// Prices is the price table ([prices]) that paddock usage and budgets in
// money (paddock run --budget-usd) estimate costs with: US dollars per
// million tokens of each kind, by model (usage.Table says how a key
// matches a model id). The file's [prices.models."ID"] entries are added
// to the defaults, replacing an entry of the same key; each must give all
// four prices.
type Prices struct {
	usage.Table
}

// PricesAsOf is the date of the default prices: Anthropic's list prices as
// the model catalog of the pinned Claude Code (2.1.328) states them.
const PricesAsOf = "2026-12-01"

// DefaultPrices returns the shipped price table (a new map each call).
func DefaultPrices() Prices {
	tier := func(in, out, write, read float64) usage.Price {
		return usage.Price{Input: in, Output: out, CacheWrite: write, CacheRead: read}
	}
	var (
		t2x10   = tier(2, 10, 2.5, 0.2)
		t2x10r  = tier(2, 10, 2.5, 0.1)
		t3x15   = tier(3, 15, 3.75, 0.3)
		t5x25   = tier(5, 25, 6.25, 0.5)
		t15x75  = tier(15, 75, 18.75, 1.5)
		t10x50  = tier(10, 50, 12.5, 1)
		t10x50r = tier(10, 50, 12.5, 0.25)
		t4x20   = tier(4, 20, 5, 0.2)
		t8x40   = tier(8, 40, 10, 0.2)
	)
	return Prices{usage.Table{AsOf: PricesAsOf, Models: map[string]usage.Price{
		// Haiku (5.5 costs more above 100k prompt tokens; not modelled).
		"claude-3-5-haiku": tier(0.8, 4, 1, 0.08),
		"claude-haiku-4-5": tier(1, 5, 1.25, 0.1),
		"claude-haiku-5-5": tier(0.1, 0.5, 0.125, 0.01),
		// Sonnet. claude-sonnet-4 is the dated id claude-sonnet-4-20250514.
		"claude-3-5-sonnet": t3x15,
		"claude-3-7-sonnet": t3x15,
		"claude-sonnet-4":   t3x15,
		"claude-sonnet-4-0": t3x15,
		"claude-sonnet-4-5": t3x15,
		"claude-sonnet-4-6": t3x15,
		"claude-sonnet-5":   t2x10,
		"claude-sonnet-5-5": t2x10r,
		// Opus. claude-opus-4 is the dated id claude-opus-4-20250514.
		"claude-opus-4":   t15x75,
		"claude-opus-4-0": t15x75,
		"claude-opus-4-1": t15x75,
		"claude-opus-4-5": t5x25,
		"claude-opus-4-6": t5x25,
		"claude-opus-4-7": t5x25,
		"claude-opus-4-8": t5x25,
		"claude-opus-5":   t5x25,
		"claude-opus-5-5": t4x20,
		// Fable and Mythos.
		"claude-fable-5":    t10x50,
		"claude-fable-5-1":  t10x50r,
		"claude-fable-5-2":  t8x40,
		"claude-mythos-5":   t10x50,
		"claude-mythos-5-1": t10x50r,
		"claude-mythos-5-2": t8x40,
	}}}
}

func (p Prices) validate() error {
	if err := p.Table.Validate(); err != nil {
		return &Error{Key: "prices", Msg: err.Error()}
	}
	return nil
}

// pricesComplete checks that each [prices.models."ID"] the file defines
// gives all four prices: one left out would otherwise count as free.
func pricesComplete(md toml.MetaData, cfg *Config) *Error {
	names := make([]string, 0, len(cfg.Prices.Models))
	for name := range cfg.Prices.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !md.IsDefined("prices", "models", name) {
			continue // a default entry
		}
		for _, f := range []string{"input", "output", "cache_write", "cache_read"} {
			if !md.IsDefined("prices", "models", name, f) {
				return &Error{Key: fmt.Sprintf("prices.models.%q", name),
					Msg: fmt.Sprintf("%s is missing: give all four of input, output, cache_write, cache_read (US dollars per million tokens)", f)}
			}
		}
	}
	return nil
}

// MaxBudgetUSD bounds a session's budget in money (sessions.budget_usd,
// paddock run --budget-usd).
const MaxBudgetUSD = 1e6
