package credproxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
)

// TestUsageViewGatesOAuthUsage: GET /api/oauth/usage, on the direct path
// (TLS the Runner terminated for the API host), is forwarded only with
// anthropic.usage_view on (Options.UsageView), as docs/CONFIG.md says.
// Off, the default, it is refused with 403 and a message naming the
// option, and nothing goes upstream; the other direct routes are not
// affected, and off the direct path the route does not exist either way.
func TestUsageViewGatesOAuthUsage(t *testing.T) {
	for _, on := range []bool{false, true} {
		var mu sync.Mutex
		var seen []string
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"five_hour":{"utilization":37.0}}`)
		})
		h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.UsageView = on })
		direct := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.proxy.ServeHTTP(w, r.WithContext(WithDirect(r.Context())))
		}), 5*time.Second)
		t.Cleanup(direct.Close)
		get := func(base, path string) (int, string) {
			t.Helper()
			req, _ := http.NewRequest("GET", base+path, nil)
			for k, vs := range h.authed() {
				req.Header[k] = vs
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		hits := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }

		for _, q := range []string{"", "?skip_spend=1", "?starry_waterfall=cli_menu&skip_spend=1"} {
			code, body := get(direct.URL, "/api/oauth/usage"+q)
			switch {
			case on && code != 200:
				t.Fatalf("usage_view on: usage%s answered %d: %s", q, code, body)
			case !on && (code != 403 || !strings.Contains(body, "anthropic.usage_view") || !strings.Contains(body, "permission_error")):
				t.Fatalf("usage_view off: usage%s answered %d, want 403 naming the option: %s", q, code, body)
			}
		}
		want := 0
		if on {
			want = 3
		}
		if got := hits(); len(got) != want {
			t.Fatalf("usage_view %v: the upstream saw %d requests, want %d: %q", on, len(got), want, got)
		}
		for _, s := range hits() {
			if s != "GET /api/oauth/usage Bearer "+realOAuth {
				t.Fatalf("the upstream saw %q", s)
			}
		}
		// Off, even a query paddock would refuse is refused for the option
		// first; on, the query policy still applies.
		if code, _ := get(direct.URL, "/api/oauth/usage?org=x"); !on && code != 403 || on && code != 400 {
			t.Fatalf("usage_view %v: a query with another key answered %d", on, code)
		}
		// The other direct routes do not depend on it.
		if code, body := get(direct.URL, "/api/claude_code/settings"); code != 200 {
			t.Fatalf("usage_view %v: settings answered %d: %s", on, code, body)
		}
		// Off the direct path there is no such route, either way.
		if code, _ := get(h.srv.URL, "/api/oauth/usage"); code != 404 {
			t.Fatalf("usage_view %v: usage off the direct path answered %d", on, code)
		}
		if got := hits(); len(got) != want+1 {
			t.Fatalf("usage_view %v: the upstream saw %q", on, got)
		}
		// The refusals are decisions in the session's log.
		if !on {
			waitUntil(t, "the decisions", func() bool { return len(h.sink.all()) >= 6 })
			refused := 0
			for _, e := range h.sink.all() {
				if e.Decision == "refused" && strings.Contains(e.Reason, "anthropic.usage_view") && e.Status == 403 {
					refused++
				}
			}
			if refused != 4 {
				t.Fatalf("%d refusals for usage_view in the decision log, want 4: %+v", refused, h.sink.all())
			}
		}
	}
}
