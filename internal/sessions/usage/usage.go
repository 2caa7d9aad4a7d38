// Package usage turns the credential proxy's decisions into usage and an
// estimated cost: requests and tokens of each kind, summed by session,
// user, model, UTC day or UTC hour, and priced with a Table of per-model
// list prices. It is pure: no I/O, no clock (callers pass the time).
//
// A cost is an estimate: the price table is list prices as of a date (its
// AsOf), cache writes are priced at the 5-minute rate, and long-context or
// priority surcharges are not modelled. A request to a model the table has
// no price for makes its row's cost unknown (nil), never 0.
package usage

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Price is one model's list price in US dollars per million tokens.
type Price struct {
	Input      float64 `toml:"input" json:"input"`
	Output     float64 `toml:"output" json:"output"`
	CacheWrite float64 `toml:"cache_write" json:"cache_write"`
	CacheRead  float64 `toml:"cache_read" json:"cache_read"`
}

// Tokens counts a request's (or a row's) tokens by kind.
type Tokens struct {
	Input         int64 `json:"input_tokens"`
	Output        int64 `json:"output_tokens"`
	CacheRead     int64 `json:"cache_read_tokens"`
	CacheCreation int64 `json:"cache_creation_tokens"`
}

// Total is every kind of token together.
func (t Tokens) Total() int64 { return t.Input + t.Output + t.CacheRead + t.CacheCreation }

func (t *Tokens) add(u Tokens) {
	t.Input += u.Input
	t.Output += u.Output
	t.CacheRead += u.CacheRead
	t.CacheCreation += u.CacheCreation
}

// Cost is what t costs at p, in US dollars.
func (p Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.Output)*p.Output +
		float64(t.CacheRead)*p.CacheRead + float64(t.CacheCreation)*p.CacheWrite) / 1e6
}

// Table is a price list: prices by model key, and the date they are as of.
//
// A key matches a model id (compared in lower case, a trailing "[…]"
// variant such as "[1m]" ignored) when the id is the key itself, or the
// key followed by "-YYYYMMDD" (a dated id) or "-latest"; a key ending in
// "*" matches every id that starts with what precedes the "*". An exact
// or dated match wins over a "*" key, and a longer "*" key over a shorter.
// So "claude-opus-4-5" prices claude-opus-4-5-20251101 but not
// claude-opus-4-6: a new model is unknown until the table names it.
type Table struct {
	// AsOf is the date (YYYY-MM-DD) the prices were list prices.
	AsOf   string           `toml:"as_of" json:"as_of"`
	Models map[string]Price `toml:"models" json:"models,omitempty"`
}

// undated is m without a trailing "-YYYYMMDD" or "-latest" (what the
// regexp dated matches, without its cost on every request).
func undated(m string) string {
	if base, ok := strings.CutSuffix(m, "-latest"); ok {
		return base
	}
	if i := len(m) - 9; i >= 0 && m[i] == '-' {
		for _, c := range m[i+1:] {
			if c < '0' || c > '9' {
				return m
			}
		}
		return m[:i]
	}
	return m
}

// Lookup returns the price of model, and false when no key matches.
func (t Table) Lookup(model string) (Price, bool) {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '['); i > 0 && strings.HasSuffix(m, "]") {
		m = m[:i]
	}
	if m == "" {
		return Price{}, false
	}
	if p, ok := t.Models[m]; ok {
		return p, true
	}
	if base := undated(m); base != m {
		if p, ok := t.Models[base]; ok {
			return p, true
		}
	}
	best, found := -1, Price{}
	for k, p := range t.Models {
		pre, ok := strings.CutSuffix(k, "*")
		if ok && strings.HasPrefix(m, pre) && len(pre) > best {
			best, found = len(pre), p
		}
	}
	return found, best >= 0
}

// Ceiling is the dearest price of the table, kind by kind: what a budget
// in money charges for a model the table does not know, so that it is
// never under-counted.
func (t Table) Ceiling() Price {
	var c Price
	for _, p := range t.Models {
		c.Input = math.Max(c.Input, p.Input)
		c.Output = math.Max(c.Output, p.Output)
		c.CacheWrite = math.Max(c.CacheWrite, p.CacheWrite)
		c.CacheRead = math.Max(c.CacheRead, p.CacheRead)
	}
	return c
}

// Charge is what a budget in money counts for one request: its cost at
// the model's price, or at the Ceiling when the model has none.
func (t Table) Charge(model string, tk Tokens) float64 {
	p, _ := t.ChargedPrice(model)
	return p.Cost(tk)
}

// ChargedPrice is the price Charge counts model at: its own, or the
// table's ceiling when known is false.
func (t Table) ChargedPrice(model string) (p Price, known bool) {
	if p, ok := t.Lookup(model); ok {
		return p, true
	}
	return t.Ceiling(), false
}

// keyRE is what a Table key may be.
var keyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._:@/-]{0,127}\*?$|^\*$`)

// maxPrice bounds one price (US dollars per million tokens).
const maxPrice = 1e6

// Validate checks the table: AsOf a date, every key a lower-case model id
// (or prefix with "*"), every price finite, 0 or more, and at most 10⁶.
// The error names the key.
func (t Table) Validate() error {
	if _, err := time.Parse(time.DateOnly, t.AsOf); err != nil {
		return fmt.Errorf("as_of %q is not a date like 2026-12-01", t.AsOf)
	}
	for k, p := range t.Models {
		if !keyRE.MatchString(k) {
			return fmt.Errorf("models.%q is not a lower-case model id (or a prefix ending in *)", k)
		}
		for _, v := range []struct {
			name string
			v    float64
		}{{"input", p.Input}, {"output", p.Output}, {"cache_write", p.CacheWrite}, {"cache_read", p.CacheRead}} {
			if math.IsNaN(v.v) || v.v < 0 || v.v > maxPrice {
				return fmt.Errorf("models.%q.%s = %g: a price is 0 or more, at most %g dollars per million tokens", k, v.name, v.v, float64(maxPrice))
			}
		}
	}
	return nil
}

// Record is one forwarded request of the credential proxy, or, with
// Requests > 1, the sum of that many requests of one model (a rotated-away
// part of a log).
type Record struct {
	Time     time.Time
	Session  string // the session's name (or id)
	User     string // whose credential paid for it
	Model    string
	Requests int64 // 0 is 1
	Tokens
}

// Key is what a report's rows are summed by.
type Key string

// The keys a report can be summed by.
const (
	BySession Key = "session"
	ByUser    Key = "user"
	ByModel   Key = "model"
	ByDay     Key = "day"  // UTC, 2006-01-02
	ByHour    Key = "hour" // UTC, 2006-01-02T15:00Z
)

// ParseKey reads a --by value.
func ParseKey(s string) (Key, error) {
	switch k := Key(s); k {
	case BySession, ByUser, ByModel, ByDay, ByHour:
		return k, nil
	}
	return "", fmt.Errorf("%q is not one of session, user, model, day, hour", s)
}

// Row is the sum of the records that share a key.
type Row struct {
	Key      string `json:"key"`
	Requests int64  `json:"requests"`
	Tokens
	// CostUSD is the estimated cost; nil (unknown) when any of the row's
	// requests with tokens went to a model the table has no price for.
	CostUSD *float64 `json:"cost_usd"`
	// Unpriced counts those requests.
	Unpriced int64 `json:"unpriced_requests,omitempty"`
}

// Report is usage summed by one key. Rows are sorted by key (by time for
// day and hour); Total sums them all.
type Report struct {
	By         Key       `json:"by"`
	Since      time.Time `json:"since,omitzero"`
	PricesAsOf string    `json:"prices_as_of"`
	Rows       []Row     `json:"rows"`
	Total      Row       `json:"total"`
	// UnpricedModels are the models without a price, sorted.
	UnpricedModels []string `json:"unpriced_models,omitempty"`
}

// keyOf is r's key for by.
func keyOf(r *Record, by Key) string {
	switch by {
	case ByUser:
		return r.User
	case ByModel:
		return r.Model
	case ByDay:
		return r.Time.UTC().Format(time.DateOnly)
	case ByHour:
		return r.Time.UTC().Truncate(time.Hour).Format("2006-01-02T15:04Z")
	}
	return r.Session
}

// acc is a row being summed: the priced cost apart from the unknown.
type acc struct {
	row  Row
	cost float64
}

func (a *acc) add(r *Record, t Table, unpriced map[string]bool) {
	n := max(r.Requests, 1)
	a.row.Requests += n
	a.row.Tokens.add(r.Tokens)
	if p, ok := t.Lookup(r.Model); ok {
		a.cost += p.Cost(r.Tokens)
	} else if r.Tokens.Total() > 0 {
		a.row.Unpriced += n
		unpriced[r.Model] = true
	}
}

func (a *acc) done() Row {
	row := a.row
	if row.Unpriced == 0 {
		c := a.cost
		row.CostUSD = &c
	}
	return row
}

// Aggregate sums recs by the key by, pricing each with t; records before
// since (when not zero) are left out. A request without tokens (refused
// upstream, count_tokens) costs nothing whatever its model.
func Aggregate(recs []Record, by Key, since time.Time, t Table) Report {
	rows := map[string]*acc{}
	var total acc
	unpriced := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		if !since.IsZero() && r.Time.Before(since) {
			continue
		}
		k := keyOf(r, by)
		a := rows[k]
		if a == nil {
			a = &acc{row: Row{Key: k}}
			rows[k] = a
		}
		a.add(r, t, unpriced)
		total.add(r, t, unpriced)
	}
	rep := Report{By: by, Since: since, PricesAsOf: t.AsOf, Rows: make([]Row, 0, len(rows))}
	for _, a := range rows {
		rep.Rows = append(rep.Rows, a.done())
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Key < rep.Rows[j].Key })
	total.row.Key = "total"
	rep.Total = total.done()
	for m := range unpriced {
		rep.UnpricedModels = append(rep.UnpricedModels, m)
	}
	sort.Strings(rep.UnpricedModels)
	return rep
}

// ParseSince reads a --since value relative to now: a duration back from
// now ("90m", "24h", "7d", "2w"; d is 24 hours, w 7 days) or a date
// ("2026-11-30", midnight UTC) or an RFC 3339 time. The result is never
// after now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("--since %q is not a duration (24h, 7d, 2w) or a date (2026-11-30)", s)
	if s == "" || len(s) > 64 {
		return time.Time{}, bad
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		if t.After(now) {
			return time.Time{}, fmt.Errorf("--since %s is in the future", s)
		}
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.After(now) {
			return time.Time{}, fmt.Errorf("--since %s is in the future", s)
		}
		return t, nil
	}
	var d time.Duration
	if n, unit := s[:len(s)-1], s[len(s)-1]; unit == 'd' || unit == 'w' {
		days, err := strconv.ParseUint(n, 10, 16)
		if unit == 'w' {
			days *= 7
		}
		// At most a century, in days: weeks too (20000w overflowed the
		// duration into a time in the future).
		if err != nil {
			return time.Time{}, bad
		}
		if days > 100*366 {
			return time.Time{}, fmt.Errorf("--since %q reaches back more than a century; give at most 36600d, or a date", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return time.Time{}, bad
		}
	}
	return now.Add(-d), nil
}
