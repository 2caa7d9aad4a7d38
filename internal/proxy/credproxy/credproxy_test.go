package credproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

func TestRoutesOnlyWithTheirMethod(t *testing.T) {
	fake := fakeapi.New(realAPIKey)
	h := newHarness(t, credential.KindAPIKey, fake, nil)
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"}
	paths := []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/models", "/v1/messages/batches",
		"/v1/complete", "/v1/files", "/api/oauth/profile", "/", "/v1/models/claude-opus-5-5", "/api/hello"}
	allowed := map[string]bool{"POST /v1/messages": true, "POST /v1/messages/count_tokens": true, "GET /v1/models": true}
	for _, p := range paths {
		for _, m := range methods {
			before := len(fake.Requests())
			body := ""
			if m == "POST" || m == "PUT" || m == "PATCH" {
				body = smallBody
			}
			resp := h.do(m, p, body, h.authed())
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			forwarded := len(fake.Requests()) > before
			key := m + " " + p
			switch {
			case allowed[key]:
				if !forwarded || resp.StatusCode != 200 {
					t.Errorf("%s: status %d forwarded=%v", key, resp.StatusCode, forwarded)
				}
			case p == "/api/hello" && (m == "HEAD" || m == "GET"):
				if forwarded || resp.StatusCode != 200 {
					t.Errorf("%s: should be answered locally, got %d forwarded=%v", key, resp.StatusCode, forwarded)
				}
			default:
				if forwarded {
					t.Errorf("%s was forwarded", key)
				}
				want := 404
				if p == "/v1/messages" || p == "/v1/messages/count_tokens" || p == "/v1/models" {
					want = 405
				}
				if resp.StatusCode != want {
					t.Errorf("%s: status %d, want %d", key, resp.StatusCode, want)
				}
				if want == 405 && resp.Header.Get("Allow") == "" {
					t.Errorf("%s: 405 without Allow", key)
				}
			}
		}
	}
}

func TestErrorShape(t *testing.T) {
	h := newHarness(t, credential.KindAPIKey, fakeapi.New(), nil)
	resp := h.do("POST", "/v1/files", smallBody, h.authed())
	defer resp.Body.Close()
	var b anthropic.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	if b.Type != "error" || b.Error.Type != anthropic.NotFound || b.Error.Message == "" || !strings.HasPrefix(b.RequestID, "req_") {
		t.Fatalf("%+v", b)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatal(resp.Header)
	}
}

// TestServerRefusalShape: a request the server refuses before the proxy
// sees it (here a head too large, and HTTP/1.0) is answered in the API's
// error shape too, which Claude Code shows.
func TestServerRefusalShape(t *testing.T) {
	h := newHarness(t, credential.KindAPIKey, fakeapi.New(), nil)
	for req, want := range map[string]string{
		"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n": anthropic.RequestTooLarge,
		"GET / HTTP/1.0\r\nHost: x\r\n\r\n":                                               anthropic.InvalidRequest,
	} {
		resp, body := h.raw(req)
		var b anthropic.ErrorBody
		if resp == nil || json.Unmarshal([]byte(body), &b) != nil || b.Type != "error" || b.Error.Type != want {
			t.Errorf("%.40q: %v %s", req, resp, body)
		}
	}
}

func TestPathTricksRefused(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindAPIKey, fake, nil)
	k, v := h.cred()
	for _, target := range []string{
		"/v1/messages/", "/v1//messages", "//v1/messages", "/V1/messages", "/v1/Messages",
		"/v1/%6Dessages", "/v1%2Fmessages", "/v1/messages%00", "/v1/./messages", "/v1/x/../messages",
		"/v1/messages;x=1", "/v1/messages/.", "/./v1/messages", "/v1/messages%2F", "/v1/messages%23x",
		"/v1/messages/count_tokens/", "/v1/models/", "/v1/messages/count_tokens/../../models",
	} {
		resp, body := h.raw("POST " + target + " HTTP/1.1\r\nHost: x\r\n" + k + ": " + v + "\r\nContent-Length: 2\r\n\r\n{}")
		if resp == nil {
			continue // refused by the server's parser: also fine
		}
		if resp.StatusCode != 404 && resp.StatusCode != 400 {
			t.Errorf("%s: status %d %s", target, resp.StatusCode, body)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d requests forwarded", n)
	}
}

func TestQueryPolicy(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindAPIKey, fake, nil)
	for _, tc := range []struct {
		method, target string
		ok             bool
		fwd            string
	}{
		{"POST", "/v1/messages?beta=true", true, "beta=true"},
		{"POST", "/v1/messages", true, ""},
		{"POST", "/v1/messages?", true, ""},
		{"POST", "/v1/messages/count_tokens?beta=true", true, "beta=true"},
		{"GET", "/v1/models?limit=20&after_id=claude-opus-5-5", true, "after_id=claude-opus-5-5&limit=20"},
		{"GET", "/v1/models?beta=true", true, "beta=true"},
		{"POST", "/v1/messages?beta=false", false, ""},
		{"POST", "/v1/messages?beta=true&beta=true", false, ""},
		{"POST", "/v1/messages?beta=true&x=1", false, ""},
		{"POST", "/v1/messages?beta=true;x=1", false, ""},
		{"POST", "/v1/messages?%zz", false, ""},
		{"POST", "/v1/messages?beta=%74rue", true, "beta=true"},
		{"GET", "/v1/models?limit=0", false, ""},
		{"GET", "/v1/models?limit=01", false, ""},
		{"GET", "/v1/models?after_id=../../x", false, ""},
		{"GET", "/v1/models?limit=5000", false, ""},
	} {
		fake.Reset()
		body := ""
		if tc.method == "POST" {
			body = smallBody
		}
		resp := h.do(tc.method, tc.target, body, h.authed())
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		reqs := fake.Requests()
		if tc.ok {
			if resp.StatusCode != 200 || len(reqs) != 1 || reqs[0].RawQuery != tc.fwd {
				t.Errorf("%s: %d %v", tc.target, resp.StatusCode, reqs)
			}
		} else if resp.StatusCode != 400 || len(reqs) != 0 {
			t.Errorf("%s: want refusal, got %d and %d upstream", tc.target, resp.StatusCode, len(reqs))
		}
	}
}

func TestTokensRefused(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindOAuth, fake, nil)
	other, _ := h.reg.Issue("s2", credential.KindAPIKey)
	revoked, _ := h.reg.Issue("s3", credential.KindOAuth)
	h.reg.Revoke("s3")
	for name, hdr := range map[string]http.Header{
		"none":                    {},
		"unknown":                 {"Authorization": {"Bearer " + secret.TokenPrefix + strings.Repeat("A", 43)}},
		"revoked":                 {"Authorization": {"Bearer " + revoked.Reveal()}},
		"real credential":         {"Authorization": {"Bearer " + realOAuth}},
		"not bearer":              {"Authorization": {h.token.Reveal()}},
		"basic":                   {"Authorization": {"Basic " + h.token.Reveal()}},
		"wrong header":            {"X-Api-Key": {h.token.Reveal()}},
		"api-key token in bearer": {"Authorization": {"Bearer " + other.Reveal()}},
		"prefix of token":         {"Authorization": {"Bearer " + h.token.Reveal()[:40]}},
		"token plus junk":         {"Authorization": {"Bearer " + h.token.Reveal() + "x"}},
	} {
		resp := h.do("POST", "/v1/messages", smallBody, hdr)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), anthropic.Authentication) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
	// Revocation takes effect at once for a token that just worked.
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	h.reg.Revoke("s1")
	resp = h.do("POST", "/v1/messages", smallBody, h.authed())
	resp.Body.Close()
	if resp.StatusCode != 401 || len(fake.Requests()) != 1 {
		t.Fatalf("revoked token: %d", resp.StatusCode)
	}
}

func TestChannelSessionMismatch(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindOAuth, fake, nil)
	for session, want := range map[string]int{"s1": 200, "s2": 403} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(smallBody))
		req.Header = h.authed()
		req = req.WithContext(WithChannelSession(req.Context(), session))
		h.proxy.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("channel %s: %d, want %d", session, rec.Code, want)
		}
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d forwarded", n)
	}
}

func TestRefusedForms(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindAPIKey, fake, nil)
	k, v := h.cred()
	auth := k + ": " + v + "\r\n"
	for name, req := range map[string]string{
		"connect":          "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n" + auth + "\r\n",
		"absolute-form":    "POST http://api.anthropic.com/v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
		"absolute https":   "GET https://evil.test/v1/models HTTP/1.1\r\nHost: evil.test\r\n" + auth + "\r\n",
		"h2c upgrade":      "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n" + auth + "\r\n",
		"websocket":        "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + auth + "\r\n",
		"upgrade alone":    "GET /v1/models HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n" + auth + "\r\n",
		"asterisk-form":    "OPTIONS * HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"get with body":    "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
		"http/1.0 connect": "CONNECT 127.0.0.1:22 HTTP/1.0\r\n" + auth + "\r\n",
	} {
		resp, body := h.raw(req)
		if resp != nil && resp.StatusCode < 400 {
			t.Errorf("%s: accepted with %d %s", name, resp.StatusCode, body)
		}
	}
	// The HTTP/2 preface is not HTTP/1.1 and gets nothing.
	resp, _ := h.raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	if resp != nil && resp.StatusCode < 400 {
		t.Errorf("h2 preface accepted: %d", resp.StatusCode)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d forwarded", n)
	}
}

func TestBodyLimit(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindAPIKey, fake, func(o *Options) { o.MaxRequestBytes = 4096 })
	big := `{"model":"m","x":"` + strings.Repeat("a", 5000) + `"}`
	resp := h.do("POST", "/v1/messages", big, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), anthropic.RequestTooLarge) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// Chunked, so the limit is hit while reading, not from Content-Length.
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/messages", io.MultiReader(strings.NewReader(big)))
	req.Header = h.authed()
	req.ContentLength = -1
	resp2, err := http.DefaultClient.Do(req)
	if err == nil {
		resp2.Body.Close()
		if resp2.StatusCode != 413 {
			t.Fatalf("chunked: %d", resp2.StatusCode)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d forwarded", n)
	}
}

func TestNoCredentialIsClear(t *testing.T) {
	fake := fakeapi.New()
	h := newHarness(t, credential.KindOAuth, fake, func(o *Options) { o.Credential = credential.Static{} })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "paddock credential set") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("forwarded without a credential")
	}
}

// waitEntries waits until the proxy has recorded n decisions: recording
// happens after the handler returns, which can be after the client saw the end.
func waitEntries(t *testing.T, h *harness, n int) []decisionlog.Entry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.proxy.Drain()
		es := h.sink.all()
		if len(es) >= n {
			return es
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d decisions recorded, want %d", len(es), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDecisionEntries(t *testing.T) {
	fake := fakeapi.New(realAPIKey)
	h := newHarness(t, credential.KindAPIKey, fake, nil)
	resp := h.do("POST", "/v1/messages?beta=true", smallBody, h.authed())
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = h.do("POST", "/v1/files", "{}", h.authed())
	resp.Body.Close()
	es := waitEntries(t, h, 2)
	if len(es) != 2 {
		t.Fatalf("%d entries", len(es))
	}
	// Entries are recorded after each response, in any order.
	f, r := es[0], es[1]
	if f.Decision != "forwarded" {
		f, r = r, f
	}
	if f.Decision != "forwarded" || f.Status != 200 || f.Model != "claude-opus-5-5" || !f.Stream ||
		f.InputTokens != 25 || f.OutputTokens != 12 || f.BytesIn != int64(len(smallBody)) || f.BytesOut == 0 ||
		f.Session != "s1" || f.UpstreamRequestID == "" || f.Path != "/v1/messages?beta=true" {
		t.Fatalf("forwarded entry %+v", f)
	}
	if r.Decision != "refused" || r.Status != 404 || r.Session != "" || r.Reason == "" {
		t.Fatalf("refused entry %+v", r)
	}
	if !strings.Contains(h.logs.String(), `"decision":"forwarded"`) {
		t.Fatal("no log line")
	}
}

func TestNewRequiresOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("no error")
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	if _, err := New(Options{Upstream: u, Credential: credential.Static{}, Tokens: nil}); err == nil {
		t.Fatal("nil tokens accepted")
	}
}

func TestLimitsRefuseWith429(t *testing.T) {
	fake := fakeapi.New()
	tr := limits.New()
	h := newHarness(t, credential.KindOAuth, fake, func(o *Options) { o.Limits = tr })
	tr.Set("s1", limits.Limits{TokenBudget: 30}, 0)
	resp := h.do("POST", "/v1/messages", smallBody, h.authed()) // 25 in + 12 out
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitEntries(t, h, 1)
	resp = h.do("POST", "/v1/messages", smallBody, h.authed()) // 37 used ≥ 30
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(b), anthropic.RateLimit) || !strings.Contains(string(b), "token budget") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d upstream requests", n)
	}
}

func TestRelayRoutes(t *testing.T) {
	echo := &headerEcho{}
	relayUp := httptest.NewServer(echo)
	defer relayUp.Close()
	const hubSecret = "fake-hub-secret-of-s1"
	rl, err := NewRelay("mod", "/mod/", relayUp.URL+"/base", "X-Hub-Secret")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeapi.New()
	h := newHarness(t, credential.KindOAuth, fake, func(o *Options) {
		o.Relays = []Relay{rl}
		o.RelaySecret = func(session, relay string) (secret.Value, bool) {
			if session == "s1" && relay == "mod" {
				return secret.New(hubSecret), true
			}
			return secret.Value{}, false
		}
	})
	hdr := h.authed()
	hdr.Set("X-Hub-Secret", "client-forged")
	hdr.Set("X-Api-Key", "junk")
	resp := h.do("POST", "/mod/items/42?x=1&y=2", `{"a":1}`, hdr)
	resp.Body.Close()
	got, _, n := echo.last()
	if resp.StatusCode != 200 || n != 1 || echo.uri != "/base/items/42?x=1&y=2" || string(echo.body) != `{"a":1}` {
		t.Fatalf("%d %s %q", resp.StatusCode, echo.uri, echo.body)
	}
	if vs := got.Values("X-Hub-Secret"); len(vs) != 1 || vs[0] != hubSecret {
		t.Fatalf("relay secret %v", vs)
	}
	for k, vs := range got {
		for _, v := range vs {
			if strings.Contains(v, h.token.Reveal()) || strings.Contains(v, h.real) || v == "junk" || v == "client-forged" {
				t.Fatalf("%s: %q reached the relay", k, v)
			}
		}
	}
	// Path tricks, methods, and no token are refused before the relay.
	for _, target := range []string{"/mod/../v1/x", "/mod//x", "/mod/a/./b", "/mod/a%2f..%2fb", "/mod/a%2e%2e/b", "/mod/a%00"} {
		resp := h.do("GET", target, "", h.authed())
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d", target, resp.StatusCode)
		}
	}
	resp = h.do("OPTIONS", "/mod/x", "", h.authed())
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("OPTIONS: %d", resp.StatusCode)
	}
	resp = h.do("GET", "/mod/x", "", http.Header{})
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	other, _ := h.reg.Issue("s2", credential.KindOAuth)
	resp = h.do("GET", "/mod/x", "", http.Header{"Authorization": {"Bearer " + other.Reveal()}})
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a session without a secret: %d", resp.StatusCode)
	}
	if _, _, n := echo.last(); n != 1 {
		t.Fatalf("%d requests reached the relay", n)
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("a relay request went to the API")
	}
}

// TestBoxChosenFieldsClipped: the model a box names in its request body
// goes into the decision record and the Runner's log line cut to size, not
// whole (a megabyte of it would fill both).
func TestBoxChosenFieldsClipped(t *testing.T) {
	h := newHarness(t, credential.KindOAuth, fakeapi.New(), nil)
	model := strings.Repeat("m", 1<<20)
	resp := h.do("POST", "/v1/messages", `{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, h.authed())
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	e := waitEntries(t, h, 1)[0]
	if len(e.Model) == 0 || len(e.Model) > 256 {
		t.Fatalf("recorded model of %d bytes", len(e.Model))
	}
	if strings.Contains(h.logs.String(), strings.Repeat("m", 1000)) {
		t.Fatal("the Runner's log holds the box's model whole")
	}
}
