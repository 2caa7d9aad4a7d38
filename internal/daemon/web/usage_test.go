package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// usageBackend reports usage, and what it was asked, by whom.
type usageBackend struct {
	*fakeBackend
	q   api.UsageQuery
	who string
}

func (u *usageBackend) Usage(ctx context.Context, q api.UsageQuery) (usage.Report, error) {
	p, _ := people.From(ctx)
	u.q, u.who = q, p.Name
	c := 0.5
	return usage.Report{By: q.By, PricesAsOf: "2026-12-01", Rows: []usage.Row{{Key: "2026-12-01T10:00Z", Requests: 2, CostUSD: &c}}}, nil
}

// TestUsageRoute: the page's usage JSON goes to the Backend (the Guard)
// as the logged-in person, with the socket API's query; only logged in.
func TestUsageRoute(t *testing.T) {
	ub := &usageBackend{fakeBackend: &fakeBackend{}}
	st := siteWith(t, ub)
	hs := st.Server

	resp, err := http.Get(hs.URL + "/api/usage")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without login: %d", resp.StatusCode)
	}

	c := loggedInAs(t, st, 1234)
	get := func(path string) (int, string) {
		resp, err := c.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/api/usage?session=work&by=hour&since=2026-11-29T10:00:00Z")
	if code != 200 || ub.who != "u1234" || ub.q.Session != "work" || ub.q.By != usage.ByHour || ub.q.Since.IsZero() {
		t.Fatalf("%d %s; asked %+v by %q", code, body, ub.q, ub.who)
	}
	var rep usage.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil || len(rep.Rows) != 1 || rep.Rows[0].Requests != 2 {
		t.Fatalf("report %s: %v", body, err)
	}
	if code, body := get("/api/usage"); code != 200 || ub.q.By != usage.BySession || ub.q.Session != "" {
		t.Fatalf("defaults: %d %s %+v", code, body, ub.q)
	}
	for _, bad := range []string{"/api/usage?by=week", "/api/usage?since=yesterday"} {
		if code, body := get(bad); code != 400 {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	// The page loads its chart's script.
	if code, body := get("/usage.js"); code != 200 || !strings.Contains(body, "createElementNS") {
		t.Fatalf("usage.js: %d", code)
	}
	if _, body := get("/"); !strings.Contains(body, `<script src="/usage.js">`) || !strings.Contains(body, `id="usageAll"`) {
		t.Fatal("index.html does not load usage.js")
	}
}
