package runner

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// TestUsageOfProxiedRequests: requests through the credential proxy to the
// fake upstream give usage totals (over the socket API, through the
// Guard) equal to what the fake reported, by session and by model, priced
// at the config's table; a model without a price makes the cost unknown.
// A budget in money refuses the next request once spent, in the API's
// error shape, and what was spent reads back from the log as counted.
func TestUsageOfProxiedRequests(t *testing.T) {
	const key = "sk-fake-owner-usage-0000000000"
	tr := startRunner(t, []string{"ANTHROPIC_API_KEY=" + key}, []string{key}, "127.0.0.1:0")
	r, ctx := tr.Runner, context.Background()
	<-r.adopted
	alpha := session.Session{ID: "a1b2c3d4e5f60718", Name: "alpha", Backend: "local", Owner: r.self, Desired: session.Asleep, Observed: session.Asleep}
	beta := session.Session{ID: "b1b2c3d4e5f60718", Name: "beta", Backend: "local", Owner: r.self, Desired: session.Asleep, Observed: session.Asleep}
	toks := map[string]string{}
	for _, s := range []*session.Session{&alpha, &beta} {
		if err := r.save(s); err != nil {
			t.Fatal(err)
		}
		r.trackLimits(s)
		tok, err := r.Tokens().Issue(s.ID, credential.KindAPIKey)
		if err != nil {
			t.Fatal(err)
		}
		toks[s.ID] = tok.Reveal()
	}
	// send posts one request of n messages; it returns the status and body.
	send := func(id, model string, n int, stream bool) (int, string) {
		t.Helper()
		var msgs []string
		for i := range n {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"turn %d"}`, role, i))
		}
		body := fmt.Sprintf(`{"model":%q,"max_tokens":50,"stream":%v,"messages":[%s]}`, model, stream, strings.Join(msgs, ","))
		req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", toks[id])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	type call struct {
		id, model string
		n         int
		stream    bool
	}
	calls := []call{
		{alpha.ID, "claude-opus-5-5", 1, true}, {alpha.ID, "claude-opus-5-5", 3, true}, {alpha.ID, "claude-opus-5-5", 5, false},
		{alpha.ID, "claude-haiku-4-5-20251001", 2, true}, {beta.ID, "claude-sonnet-5-5", 7, true},
	}
	for _, c := range calls {
		if code, body := send(c.id, c.model, c.n, c.stream); code != 200 {
			t.Fatalf("%+v: %d %s", c, code, body)
		}
	}
	// The proxy records each request when its handler ends, after the
	// client has the answer: wait for every line.
	waitLines := func(id string, n int) {
		t.Helper()
		for i := 0; ; i++ {
			es, _ := r.Logs(ctx, id, 0)
			if len(es) >= n {
				return
			}
			if i == 100 {
				t.Fatalf("%s has %d log lines, want %d", id, len(es), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLines(alpha.ID, 4)
	waitLines(beta.ID, 1)

	// What the fake reported, summed the ways the report sums it.
	reqs := tr.fake.Requests()
	if len(reqs) != len(calls) {
		t.Fatalf("the fake saw %d requests, want %d", len(reqs), len(calls))
	}
	want := map[string]usage.Tokens{}
	prices := r.prices()
	cost := map[string]float64{}
	for _, q := range reqs {
		key := "beta"
		if strings.Contains(q.Credential, key) { // never: the fake sees the owner's key
			t.Fatal("a session token reached the upstream")
		}
		if q.Model != "claude-sonnet-5-5" {
			key = "alpha"
		}
		u := q.Usage
		if u.InputTokens == 0 || u.OutputTokens == 0 || u.CacheCreationTokens == 0 {
			t.Fatalf("the fake reported no usage: %+v", q)
		}
		tk := want[key]
		tk.Input += u.InputTokens
		tk.Output += u.OutputTokens
		tk.CacheRead += u.CacheReadTokens
		tk.CacheCreation += u.CacheCreationTokens
		want[key] = tk
		p, ok := prices.Lookup(q.Model)
		if !ok {
			t.Fatalf("no default price for %s", q.Model)
		}
		cost[key] += p.Cost(usage.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheCreation: u.CacheCreationTokens})
	}
	c := tr.client()
	rep, err := c.Usage(ctx, api.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "alpha" || rep.Rows[1].Key != "beta" || rep.PricesAsOf == "" {
		t.Fatalf("report %+v", rep)
	}
	for _, row := range rep.Rows {
		if row.Tokens != want[row.Key] || row.CostUSD == nil || math.Abs(*row.CostUSD-cost[row.Key]) > 1e-9 {
			t.Errorf("%s: %+v cost %v; the fake reported %+v, cost %v", row.Key, row.Tokens, row.CostUSD, want[row.Key], cost[row.Key])
		}
	}
	if rep.Rows[0].Requests != 4 || rep.Rows[1].Requests != 1 || rep.Total.Requests != 5 {
		t.Errorf("requests: %+v", rep)
	}
	if rep.Rows[0].CacheRead == 0 {
		t.Error("multi-turn requests read no cache")
	}
	// One session, by model.
	one, err := c.Usage(ctx, api.UsageQuery{Session: "alpha", By: usage.ByModel})
	if err != nil || len(one.Rows) != 2 || one.Rows[0].Key != "claude-haiku-4-5-20251001" || one.Total.Tokens != want["alpha"] {
		t.Fatalf("alpha by model: %+v %v", one, err)
	}
	// Since: nothing after now.
	if later, err := c.Usage(ctx, api.UsageQuery{Since: time.Now().Add(time.Minute)}); err != nil || len(later.Rows) != 0 {
		t.Fatalf("since later: %+v %v", later, err)
	}
	if _, err := c.Usage(ctx, api.UsageQuery{Session: "nope"}); err == nil {
		t.Fatal("usage of no session")
	}

	// A model without a price: beta's cost is unknown, never 0.
	if code, body := send(beta.ID, "claude-unpriced-9", 1, true); code != 200 {
		t.Fatalf("unpriced model: %d %s", code, body)
	}
	waitLines(beta.ID, 2)
	rep, err = c.Usage(ctx, api.UsageQuery{Session: "beta"})
	if err != nil || rep.Total.CostUSD != nil || rep.Total.Unpriced != 1 || len(rep.UnpricedModels) != 1 || rep.UnpricedModels[0] != "claude-unpriced-9" {
		t.Fatalf("unpriced: %+v %v", rep, err)
	}

	// A budget in money: alpha has spent more than a tenth of a cent (the
	// fake's usage at opus prices); such a budget refuses the next request.
	spent := r.usage.Spent(alpha.ID)
	if math.Abs(spent-cost["alpha"]) > 1e-9 {
		t.Fatalf("the budget counts $%v, the report $%v", spent, cost["alpha"])
	}
	cent := 0.001
	if spent <= cent {
		t.Fatalf("alpha spent only $%v", spent)
	}
	s, err := c.Set(ctx, "alpha", api.SetRequest{BudgetUSD: &cent})
	if err != nil || s.Limits.BudgetUSD != cent {
		t.Fatalf("set --budget-usd: %+v %v", s.Limits, err)
	}
	n := len(tr.fake.Requests())
	code, body := send(alpha.ID, "claude-opus-5-5", 1, true)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"rate_limit_error"`) ||
		!strings.Contains(body, "budget of $0.001") || !strings.Contains(body, "--budget-usd") {
		t.Fatalf("over the money budget: %d %s", code, body)
	}
	if len(tr.fake.Requests()) != n {
		t.Fatal("a request over budget went upstream")
	}
	// A bad budget is refused; none lets requests in again.
	bad := -1.0
	if _, err := c.Set(ctx, "alpha", api.SetRequest{BudgetUSD: &bad}); err == nil || !strings.Contains(err.Error(), "0 (none) or more") {
		t.Fatalf("a negative budget: %v", err)
	}
	none := 0.0
	if _, err := c.Set(ctx, "alpha", api.SetRequest{BudgetUSD: &none}); err != nil {
		t.Fatal(err)
	}
	if code, body := send(alpha.ID, "claude-opus-5-5", 1, true); code != 200 {
		t.Fatalf("no budget: %d %s", code, body)
	}
	waitLines(alpha.ID, 6)

	// What a restart reads back is what was counted.
	l, err := r.decisions.ReadLog(alpha.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, counted := r.spentOf(&l), r.usage.Spent(alpha.ID); math.Abs(got-counted) > 1e-9 {
		t.Fatalf("read back $%v, counted $%v", got, counted)
	}
	saved, _ := r.Session(ctx, "alpha")
	saved.Limits.BudgetUSD = cent
	r.trackLimits(&saved)
	if _, why := r.usage.Admit(alpha.ID); !strings.Contains(why, "budget of $0.001") {
		t.Fatalf("after a read-back the budget holds: %q", why)
	}
}

// TestMoneyBudgetAcrossRotation: a session's spending read back at start
// (a Runner restart) is the same after its log was rotated and the oldest
// parts dropped: the carry keeps each model's tokens, which are priced as
// the lines were.
func TestMoneyBudgetAcrossRotation(t *testing.T) {
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen = "off", "off"
	cfg.Logs.MaxSize = 64 << 10
	dir := filepath.Join(t.TempDir(), "state")
	open := func() *Runner {
		t.Helper()
		r, err := New(Options{StateDir: dir, Config: cfg, Backends: map[string]sandbox.Backend{"local": proxyOnly{}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	s := session.Session{ID: "0123456789abcdef", Name: "spender", Backend: "local", Owner: r.self}
	if err := r.save(&s); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	now := time.Now().UTC()
	models := []string{"claude-opus-5-5", "claude-haiku-4-5", "claude-unpriced-1"}
	var want float64
	for i := range n {
		e := decisionlog.Entry{Time: now.Add(time.Duration(i-n) * time.Millisecond), Session: s.ID,
			RequestID: fmt.Sprintf("req_%05d", i), Method: "POST", Path: "/v1/messages", Decision: "forwarded",
			Status: 200, Model: models[i%3], InputTokens: 70, OutputTokens: 30, CacheReadTokens: 500, CacheCreationTokens: 20}
		r.decisions.Record(e)
		want += r.prices().Charge(e.Model, tokensOf(&e))
	}
	if err := r.decisions.Sweep(s.ID); err != nil {
		t.Fatal(err)
	}
	l, err := r.decisions.ReadLog(s.ID)
	if err != nil || l.Carried.Through == 0 || len(l.Carried.Models) != 3 {
		t.Fatalf("nothing rotated away, or no models carried: %+v %v", l.Carried, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open()
	defer r.Close()
	s.Limits.BudgetUSD = want
	r.trackLimits(&s)
	if got := r.usage.Spent(s.ID); math.Abs(got-want) > 1e-6 {
		t.Fatalf("after a restart the budget counts $%v, want $%v", got, want)
	}
	if _, why := r.usage.Admit(s.ID); !strings.Contains(why, "spent its budget") {
		t.Fatalf("a session at its money budget after a restart: %q", why)
	}
	// The report counts the carried requests too; the unpriced model's
	// make the cost unknown.
	rep, err := r.UsageOf(context.Background(), []session.Session{s}, api.UsageQuery{By: usage.ByModel})
	if err != nil || rep.Total.Requests != n || rep.Total.Input != 70*n || rep.Total.CostUSD != nil || len(rep.Rows) != 3 {
		t.Fatalf("report after rotation: %+v %v", rep, err)
	}
}
