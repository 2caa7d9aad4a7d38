package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/usage"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestUsageTotals: the real Claude Code's multi-turn session (two chat
// turns and a tool turn) gives `paddock usage NAME --json` totals equal to
// the sum of the usage the fake upstream reported over its requests, every
// kind of token, and the cost of the default price table; the table
// output has a total row. A budget in money below what was spent refuses
// the next request at once; none lets it through again.
func TestUsageTotals(t *testing.T) {
	e := newEnv(t)
	name := "usage"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
	e.typeLine(name, "TOOLTEST")
	e.waitScreen(name, "The tool ran. Done.", 60*time.Second)
	e.typeLine(name, "and once more")
	e.waitScreen(name, "hi from the fake server (turn 3)", 30*time.Second)

	// What the fake reported, and what it costs at the default prices.
	prices := config.DefaultPrices()
	reported := func() (usage.Tokens, float64, bool, int) {
		var tk usage.Tokens
		var cost float64
		priced, n := true, 0
		for _, r := range e.fake.Requests() {
			u := r.Usage
			if u == (fakeapi.Usage{}) { // not a message answered
				continue
			}
			n++
			one := usage.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheCreation: u.CacheCreationTokens}
			tk.Input += one.Input
			tk.Output += one.Output
			tk.CacheRead += one.CacheRead
			tk.CacheCreation += one.CacheCreation
			if p, ok := prices.Lookup(r.Model); ok {
				cost += p.Cost(one)
			} else {
				priced = false
			}
		}
		return tk, cost, priced, n
	}
	// The proxy writes a request's line when its handler ends, after the
	// client has the answer: wait until the report catches up.
	var rep usage.Report
	var want usage.Tokens
	var cost float64
	var priced bool
	var answered int
	deadline := time.Now().Add(15 * time.Second)
	for {
		want, cost, priced, answered = reported()
		rep = usage.Report{}
		if err := json.Unmarshal([]byte(e.pd("usage", name, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Total.Tokens == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if answered < 4 || want.CacheRead == 0 || want.CacheCreation == 0 {
		t.Fatalf("the fake answered %d messages, usage %+v: not a multi-turn session", answered, want)
	}
	if rep.Total.Tokens != want {
		t.Fatalf("paddock usage totals %+v, the fake reported %+v", rep.Total.Tokens, want)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Key != name || rep.Total.Requests < int64(answered) {
		t.Fatalf("rows %+v, total requests %d for %d answered", rep.Rows, rep.Total.Requests, answered)
	}
	switch {
	case priced && (rep.Total.CostUSD == nil || math.Abs(*rep.Total.CostUSD-cost) > 1e-9):
		t.Fatalf("cost %v, want %v at the default prices", rep.Total.CostUSD, cost)
	case !priced && (rep.Total.CostUSD != nil || len(rep.UnpricedModels) == 0):
		t.Fatalf("a model without a price, yet cost %v", rep.Total.CostUSD)
	}
	if rep.PricesAsOf != config.PricesAsOf {
		t.Fatalf("prices as of %q", rep.PricesAsOf)
	}

	// The table: a header, the session, a total row; by model and since.
	table, errs, code := e.pdRun("usage", name, "--by", "model", "--since", "1h")
	if code != 0 || !strings.Contains(table, "MODEL") || !strings.Contains(table, "TOTAL") || !strings.Contains(errs, "list prices of "+config.PricesAsOf) {
		t.Fatalf("usage --by model: %d\n%s%s", code, table, errs)
	}
	if all := e.pd("usage"); !strings.Contains(all, name) || !strings.Contains(all, "TOTAL") {
		t.Fatalf("usage of every session:\n%s", all)
	}
	if out, code := e.pdCode("usage", name, "--since", "yesterday"); code != 2 || !strings.Contains(out, "not a duration") {
		t.Fatalf("a bad --since: %d %s", code, out)
	}

	// A budget in money below what was spent: the next request is refused.
	tok := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
	if out := e.pd("set", name, "--budget-usd", "0.000001"); !strings.Contains(out, "budget $0.000001") {
		t.Fatalf("set --budget-usd: %s", out)
	}
	if st := proxyStatus(t, e.dir, tok); st != 429 {
		t.Fatalf("over the money budget: %d", st)
	}
	e.pd("set", name, "--budget-usd", "0")
	if st := proxyStatus(t, e.dir, tok); st != 200 {
		t.Fatalf("money budget lifted: %d", st)
	}
	e.pd("rm", "-f", name)
}

// TestUsageInChromium: the web page shows a session's usage under the
// list and on its page, with the tokens-per-hour chart drawn as SVG bars.
func TestUsageInChromium(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	e := newEnv(t)
	name := "webusage"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
	login := strings.TrimSpace(e.pd("web"))
	base := login[:strings.Index(login, "/login")]
	ctx := newBrowser(t, chromium)

	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`#usageAll svg.usageChart rect.bar`))); err != nil {
		t.Fatalf("the list's usage chart: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#usageAll")))
	if err != nil || !strings.Contains(text, name) || !strings.Contains(text, "est. cost") || !strings.Contains(text, "$") ||
		!strings.Contains(text, "list prices of "+config.PricesAsOf) {
		t.Fatalf("the list's usage: %v %q", err, text)
	}
	screenshot(t, ctx, "web-usage.png")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+name), chromedp.WaitVisible(chromedp.CSS(`#usageOne svg.usageChart rect.bar`))); err != nil {
		t.Fatalf("the session's usage chart: %v", err)
	}
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#usageOne"))); err != nil || !strings.Contains(text, name) {
		t.Fatalf("the session's usage: %v %q", err, text)
	}
	e.pd("rm", "-f", name)
}
