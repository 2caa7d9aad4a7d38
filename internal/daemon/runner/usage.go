package runner

import (
	"context"
	"fmt"
	"sync"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// This file is usage and cost: the report behind paddock usage and the
// web page's chart (UsageOf), and the budget in money (AccountEntry, and
// spentOf when a session's limits are read back at start).

// prices is the Runner's price table ([prices]).
func (r *Runner) prices() usage.Table { return r.opts.Config.Prices.Table }

// tokensOf is what an entry of the credential proxy counted.
func tokensOf(e *decisionlog.Entry) usage.Tokens {
	return usage.Tokens{Input: e.InputTokens, Output: e.OutputTokens, CacheRead: e.CacheReadTokens, CacheCreation: e.CacheCreationTokens}
}

// AccountEntry implements credproxy.EntryAccounter: the tokens count as
// Account counts them, and the request's cost against the session's
// budget in money. A model the table has no price for is charged at the
// table's dearest price of each kind (usage.Table.Ceiling), so that such
// a budget is never under-counted; the Runner says so once per model.
func (l userLimiter) AccountEntry(e *decisionlog.Entry) {
	l.Account(e.Session, e.InputTokens+e.OutputTokens)
	tk := tokensOf(e)
	if e.Kind != "" || tk.Total() == 0 {
		return
	}
	p, known := l.r.chargedPrice(e.Model)
	if !known && l.r.unpriced.first(e.Model) {
		l.r.log.Warn("a model has no price in the config's [prices]; budgets in money charge it at the dearest price and paddock usage shows its cost as unknown; add it as [prices.models.\"ID\"]",
			logkey.Session, e.Session, "model", logkey.Clip(e.Model, 128))
	}
	l.r.usage.AccountUSD(e.Session, p.Cost(tk))
}

// chargedPrice is prices().ChargedPrice(model), remembered for up to
// priceCacheMax models (the config, and so the table, does not change
// while the Runner runs): it is asked on every request, and a model the
// table does not know walks the table twice.
func (r *Runner) chargedPrice(model string) (usage.Price, bool) {
	if c, ok := r.priceCache.Load(model); ok {
		cp := c.(chargedPrice)
		return cp.p, cp.known
	}
	p, known := r.prices().ChargedPrice(model)
	if r.priceCached.Load() < priceCacheMax && r.priceCached.Add(1) <= priceCacheMax {
		r.priceCache.Store(model, chargedPrice{p, known})
	}
	return p, known
}

type chargedPrice struct {
	p     usage.Price
	known bool
}

// priceCacheMax bounds chargedPrice's memory: the model ids come from the
// upstream's answers and the boxes' requests.
const priceCacheMax = 256

// onceEach says yes to the first time of each of up to onceEachMax keys
// (the model ids the upstream answered with), then no to every key.
type onceEach struct {
	mu   sync.Mutex
	seen map[string]bool
}

const onceEachMax = 64

func (o *onceEach) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[key] || len(o.seen) >= onceEachMax {
		return false
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[key] = true
	return true
}

// spentOf is what a session's log has cost, as a budget in money counts
// it (see AccountEntry): the kept lines, and the parts rotated away
// through their carry (what a carry holds without a model, e.g. one
// written before carries kept models, at the dearest price).
func (r *Runner) spentOf(l *decisionlog.Log) float64 {
	t := r.prices()
	var usd float64
	var carried usage.Tokens
	for m, tot := range l.Carried.Models {
		tk := carriedTokens(tot)
		usd += t.Charge(m, tk)
		carried.Input += tk.Input
		carried.Output += tk.Output
		carried.CacheRead += tk.CacheRead
		carried.CacheCreation += tk.CacheCreation
	}
	all := carriedTokens(l.Carried.Totals)
	rest := usage.Tokens{Input: all.Input - carried.Input, Output: all.Output - carried.Output,
		CacheRead: all.CacheRead - carried.CacheRead, CacheCreation: all.CacheCreation - carried.CacheCreation}
	if rest.Input > 0 || rest.Output > 0 || rest.CacheRead > 0 || rest.CacheCreation > 0 {
		usd += t.Ceiling().Cost(usage.Tokens{Input: max(rest.Input, 0), Output: max(rest.Output, 0),
			CacheRead: max(rest.CacheRead, 0), CacheCreation: max(rest.CacheCreation, 0)})
	}
	for i := range l.Entries {
		e := &l.Entries[i]
		if e.Kind == "" {
			usd += t.Charge(e.Model, tokensOf(e))
		}
	}
	return usd
}

func carriedTokens(t decisionlog.Totals) usage.Tokens {
	return usage.Tokens{Input: t.InputTokens, Output: t.OutputTokens, CacheRead: t.CacheReadTokens, CacheCreation: t.CacheCreationTokens}
}

// UsageOf is the usage report of sessions ss (the access.Guard has chosen
// those the caller may see): each one's forwarded requests of the
// credential proxy from its decision log, priced with [prices]. A request
// is the user's whose credential it went out with (else the session
// owner's). The parts of a log rotated away count as one record per model
// at the time of the last line they held.
func (r *Runner) UsageOf(ctx context.Context, ss []session.Session, q api.UsageQuery) (usage.Report, error) {
	var recs []usage.Record
	for _, s := range ss {
		if err := ctx.Err(); err != nil {
			return usage.Report{}, err
		}
		l, err := r.decisions.ReadLog(s.ID)
		if err != nil {
			return usage.Report{}, err
		}
		for m, tot := range l.Carried.Models {
			recs = append(recs, usage.Record{Time: l.Carried.Until, Session: s.Name, User: s.Owner.Name, Model: m,
				Requests: tot.Requests, Tokens: carriedTokens(tot)})
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Kind != "" || e.Decision != decisionlog.Forwarded {
				continue
			}
			user := e.CredentialUser
			if user == "" {
				user = s.Owner.Name
			}
			recs = append(recs, usage.Record{Time: e.Time, Session: s.Name, User: user, Model: e.Model, Tokens: tokensOf(e)})
		}
	}
	by := q.By
	if by == "" {
		by = usage.BySession
	}
	return usage.Aggregate(recs, by, q.Since, r.prices()), nil
}

// budgetUSD is a session's budget in money: want when it is given (more
// than 0), else def. want must be 0 or more, at most config.MaxBudgetUSD.
func budgetUSD(def, want float64) (float64, error) {
	if !(want >= 0 && want <= config.MaxBudgetUSD) { // NaN too
		return 0, fmt.Errorf("budget of $%g: must be 0 (none) or more, at most $%g: %w", want, float64(config.MaxBudgetUSD), errdefs.ErrInvalid)
	}
	if want > 0 {
		return want, nil
	}
	return def, nil
}
