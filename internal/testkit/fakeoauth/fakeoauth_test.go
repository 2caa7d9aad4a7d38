package fakeoauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testClient   = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
	testRedirect = "https://console.anthropic.com/oauth/code/callback"
	testScope    = "org:create_api_key user:profile user:inference"
	// testVerifier is a valid RFC 7636 verifier (43 characters).
	testVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeURL builds the URL Claude Code opens, with changes applied
// (a "" value deletes the parameter).
func authorizeURL(base string, changes map[string]string) string {
	q := url.Values{
		"code":                  {"true"},
		"client_id":             {testClient},
		"response_type":         {"code"},
		"redirect_uri":          {testRedirect},
		"scope":                 {testScope},
		"code_challenge":        {challenge(testVerifier)},
		"code_challenge_method": {"S256"},
		"state":                 {"st4te-xyz"},
	}
	for k, v := range changes {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return base + AuthorizePath + "?" + q.Encode()
}

// harness is a server with a test clock, served over HTTP.
type harness struct {
	s     *Server
	clock *clock
	srv   *httptest.Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{s: New(testClient, testRedirect), clock: newClock()}
	h.s.Now = h.clock.Now
	h.srv = httptest.NewServer(h.s)
	t.Cleanup(h.srv.Close)
	return h
}

// answer is a decoded token endpoint answer of either kind.
type answer struct {
	status int
	tokenResponse
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// post sends body to the token endpoint with the given Content-Type.
func (h *harness) post(t *testing.T, contentType, body string) answer {
	t.Helper()
	resp, err := h.srv.Client().Post(h.srv.URL+TokenPath, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	defer resp.Body.Close()
	var a answer
	a.status = resp.StatusCode
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("token answer %d is not JSON: %q", resp.StatusCode, b)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("token answer Cache-Control = %q, want no-store", cc)
	}
	return a
}

// postJSON sends params as Claude Code does: a JSON object.
func (h *harness) postJSON(t *testing.T, params map[string]any) answer {
	t.Helper()
	b, _ := json.Marshal(params)
	return h.post(t, "application/json", string(b))
}

// exchangeParams are the parameters of the exchange of shown
// ("CODE#STATE"), with changes applied (nil deletes).
func exchangeParams(shown string, changes map[string]any) map[string]any {
	code, state, _ := strings.Cut(shown, "#")
	p := map[string]any{
		"grant_type": "authorization_code", "code": code, "redirect_uri": testRedirect,
		"client_id": testClient, "code_verifier": testVerifier, "state": state,
	}
	for k, v := range changes {
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	return p
}

func refreshParams(refresh string) map[string]any {
	return map[string]any{"grant_type": "refresh_token", "refresh_token": refresh, "client_id": testClient, "scope": testScope}
}

// login runs the whole PKCE login and returns the tokens.
func (h *harness) login(t *testing.T) answer {
	t.Helper()
	shown, err := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	a := h.postJSON(t, exchangeParams(shown, nil))
	if a.status != 200 {
		t.Fatalf("exchange: %d %s: %s", a.status, a.Error, a.Description)
	}
	return a
}

func TestLoginPKCE(t *testing.T) {
	h := newHarness(t)
	shown, err := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	code, state, ok := strings.Cut(shown, "#")
	if !ok || code == "" || state != "st4te-xyz" {
		t.Fatalf("Authorize shows %q, want CODE#st4te-xyz", shown)
	}
	a := h.postJSON(t, exchangeParams(shown, nil))
	if a.status != 200 || a.TokenType != "Bearer" || a.ExpiresIn != int64(DefaultAccessTTL/time.Second) || a.Scope != testScope {
		t.Fatalf("exchange answer: %+v", a)
	}
	if !strings.HasPrefix(a.AccessToken, AccessPrefix) || !strings.HasPrefix(a.RefreshToken, RefreshPrefix) {
		t.Fatalf("token prefixes: %q %q", a.AccessToken, a.RefreshToken)
	}
	if !strings.HasPrefix(a.AccessToken, "sk-ant-oat") {
		t.Fatal("access token would not be detected as an OAuth token")
	}
	if known, expired := h.s.Validate(a.AccessToken); !known || expired {
		t.Fatalf("Validate(new access) = %v, %v", known, expired)
	}
	if h.s.Exchanges() != 1 || h.s.Refreshes() != 0 {
		t.Fatalf("Exchanges %d Refreshes %d", h.s.Exchanges(), h.s.Refreshes())
	}
	reqs := h.s.Requests()
	if len(reqs) != 1 || reqs[0].Grant != "authorization_code" || reqs[0].Status != 200 || reqs[0].Error != "" || !reqs[0].Time.Equal(h.clock.Now()) {
		t.Fatalf("Requests: %+v", reqs)
	}
}

func TestAuthorizeOverHTTP(t *testing.T) {
	h := newHarness(t)
	resp, err := h.srv.Client().Get(authorizeURL(h.srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, rest, ok := strings.Cut(string(page), `id="code">`)
	shown, _, _ := strings.Cut(rest, "<")
	if resp.StatusCode != 200 || !ok || !strings.HasSuffix(shown, "#st4te-xyz") {
		t.Fatalf("authorize page %d: %s", resp.StatusCode, page)
	}
	if a := h.postJSON(t, exchangeParams(shown, nil)); a.status != 200 {
		t.Fatalf("exchange of the page's code: %+v", a)
	}

	resp, err = h.srv.Client().Get(authorizeURL(h.srv.URL, map[string]string{"state": ""}))
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(page), `id="error"`) || !strings.Contains(string(page), "no state") {
		t.Fatalf("authorize page without state %d: %s", resp.StatusCode, page)
	}
}

func TestAuthorizeRefuses(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name    string
		changes map[string]string
		want    string
	}{
		{"no client", map[string]string{"client_id": ""}, "no client_id"},
		{"wrong client", map[string]string{"client_id": "someone-else"}, "not this server's client"},
		{"implicit flow", map[string]string{"response_type": "token"}, "response_type"},
		{"no redirect", map[string]string{"redirect_uri": ""}, "no redirect_uri"},
		{"wrong redirect", map[string]string{"redirect_uri": "http://localhost:1/callback"}, "not registered"},
		{"plain method", map[string]string{"code_challenge_method": "plain"}, "S256"},
		{"no challenge", map[string]string{"code_challenge": ""}, "code_challenge"},
		{"padded challenge", map[string]string{"code_challenge": challenge(testVerifier) + "="}, "code_challenge"},
		{"no state", map[string]string{"state": ""}, "no state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.s.Authorize(authorizeURL(h.srv.URL, tc.changes))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Authorize: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := h.s.Authorize(h.srv.URL + "/authorize?" + strings.SplitN(authorizeURL("", nil), "?", 2)[1]); err == nil {
		t.Error("Authorize accepted a wrong path")
	}
	if _, err := h.s.Authorize(authorizeURL(h.srv.URL, nil) + "&state=again"); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("Authorize with state twice: %v", err)
	}
}

func TestExchangeRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		changes   map[string]any
		status    int
		errorCode string
		desc      string
	}{
		{"wrong verifier", map[string]any{"code_verifier": strings.Repeat("a", 43)}, 400, "invalid_grant", "code_verifier does not match"},
		{"no verifier", map[string]any{"code_verifier": nil}, 400, "invalid_request", "code_verifier is required"},
		{"short verifier", map[string]any{"code_verifier": "abc"}, 400, "invalid_request", "43 to 128"},
		{"wrong state", map[string]any{"state": "other"}, 400, "invalid_grant", "state differs"},
		{"no state", map[string]any{"state": nil}, 400, "invalid_grant", "state differs"},
		{"wrong client", map[string]any{"client_id": "someone-else"}, 401, "invalid_client", "not a client"},
		{"no client", map[string]any{"client_id": nil}, 401, "invalid_client", "client_id is required"},
		{"wrong redirect", map[string]any{"redirect_uri": "http://localhost:1/cb"}, 400, "invalid_grant", "redirect_uri"},
		{"unknown code", map[string]any{"code": "nope"}, 400, "invalid_grant", "unknown authorization code"},
		{"unsplit paste", map[string]any{"code": "nope#st4te-xyz"}, 400, "invalid_grant", "must be split"},
		{"unknown grant", map[string]any{"grant_type": "password"}, 400, "unsupported_grant_type", "password"},
		{"no grant", map[string]any{"grant_type": nil}, 400, "invalid_request", "grant_type is required"},
		{"bad expires_in", map[string]any{"expires_in": -5}, 400, "invalid_request", "expires_in"},
		{"code not a string", map[string]any{"code": 7}, 400, "invalid_request", "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			shown, err := h.s.Authorize(authorizeURL(h.srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			a := h.postJSON(t, exchangeParams(shown, tc.changes))
			if a.status != tc.status || a.Error != tc.errorCode || !strings.Contains(a.Description, tc.desc) {
				t.Fatalf("got %d %s %q, want %d %s %q", a.status, a.Error, a.Description, tc.status, tc.errorCode, tc.desc)
			}
			// A refused attempt leaves the code usable.
			if a := h.postJSON(t, exchangeParams(shown, nil)); a.status != 200 {
				t.Fatalf("exchange after a refused one: %+v", a)
			}
		})
	}
}

func TestCodeSingleUse(t *testing.T) {
	h := newHarness(t)
	shown, _ := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	first := h.postJSON(t, exchangeParams(shown, nil))
	if first.status != 200 {
		t.Fatalf("first exchange: %+v", first)
	}
	a := h.postJSON(t, exchangeParams(shown, nil))
	if a.status != 400 || a.Error != "invalid_grant" || !strings.Contains(a.Description, "already used") {
		t.Fatalf("second exchange: %+v", a)
	}
	// Tokens of the first exchange are not revoked by the reuse.
	if known, _ := h.s.Validate(first.AccessToken); !known {
		t.Fatal("reuse of a code revoked the tokens issued from it")
	}
	if h.s.Exchanges() != 1 {
		t.Fatalf("Exchanges = %d, want 1", h.s.Exchanges())
	}
}

func TestCodeExpires(t *testing.T) {
	h := newHarness(t)
	shown, _ := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	h.clock.Advance(DefaultCodeTTL)
	a := h.postJSON(t, exchangeParams(shown, nil))
	if a.status != 400 || a.Error != "invalid_grant" || a.Description != "code expired" {
		t.Fatalf("exchange of an expired code: %+v", a)
	}

	h.s.CodeTTL = time.Minute
	shown, _ = h.s.Authorize(authorizeURL(h.srv.URL, nil))
	h.clock.Advance(59 * time.Second)
	if a := h.postJSON(t, exchangeParams(shown, nil)); a.status != 200 {
		t.Fatalf("exchange within CodeTTL: %+v", a)
	}
}

func TestFormBody(t *testing.T) {
	h := newHarness(t)
	shown, _ := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	form := url.Values{}
	for k, v := range exchangeParams(shown, nil) {
		form.Set(k, fmt.Sprint(v))
	}
	if a := h.post(t, "application/x-www-form-urlencoded", form.Encode()); a.status != 200 || a.AccessToken == "" {
		t.Fatalf("form exchange: %+v", a)
	}
	form.Add("code", "again")
	if a := h.post(t, "application/x-www-form-urlencoded", form.Encode()); a.Error != "invalid_request" {
		t.Fatalf("form with code twice: %+v", a)
	}
}

func TestBadBodies(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ contentType, body string }{
		{"application/json", "grant_type=refresh_token"},
		{"application/json", `["grant_type"]`},
		{"application/json", `{"grant_type":"refresh_token"} trailing`},
		{"text/plain", `{"grant_type":"refresh_token"}`},
		{"", `{"grant_type":"refresh_token"}`},
	} {
		if a := h.post(t, tc.contentType, tc.body); a.status != 400 || a.Error != "invalid_request" {
			t.Errorf("%q %q: %+v", tc.contentType, tc.body, a)
		}
	}
	a := h.post(t, "application/json", `{"grant_type":"`+strings.Repeat("x", maxBody)+`"}`)
	if a.status != http.StatusRequestEntityTooLarge || a.Error != "invalid_request" {
		t.Errorf("oversized body: %+v", a)
	}
	resp, err := h.srv.Client().Get(h.srv.URL + TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET token endpoint: %d", resp.StatusCode)
	}
}

func TestRefreshRotates(t *testing.T) {
	h := newHarness(t)
	first := h.login(t)
	h.clock.Advance(time.Hour)
	second := h.postJSON(t, refreshParams(first.RefreshToken))
	if second.status != 200 || second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken ||
		!strings.HasPrefix(second.RefreshToken, RefreshPrefix) || second.Scope != testScope {
		t.Fatalf("refresh: %+v", second)
	}
	a := h.postJSON(t, refreshParams(first.RefreshToken))
	if a.status != 400 || a.Error != "invalid_grant" || !strings.Contains(a.Description, "rotate") {
		t.Fatalf("refresh with the rotated token: %+v", a)
	}
	third := h.postJSON(t, refreshParams(second.RefreshToken))
	if third.status != 200 {
		t.Fatalf("refresh with the new token: %+v", third)
	}
	if h.s.Refreshes() != 2 {
		t.Fatalf("Refreshes = %d, want 2", h.s.Refreshes())
	}
	// The access token issued with the rotated refresh token lives on
	// until it expires.
	if known, expired := h.s.Validate(first.AccessToken); !known || expired {
		t.Fatalf("Validate(first access) = %v, %v", known, expired)
	}
	p := refreshParams(third.RefreshToken)
	p["client_id"] = "someone-else"
	if a := h.postJSON(t, p); a.status != 401 || a.Error != "invalid_client" {
		t.Fatalf("refresh by another client: %+v", a)
	}
	if a := h.postJSON(t, refreshParams("sk-ant-ort01-fake-never-issued")); a.Error != "invalid_grant" {
		t.Fatalf("refresh with an unknown token: %+v", a)
	}
}

func TestRefreshScope(t *testing.T) {
	h := newHarness(t)
	rt := h.login(t).RefreshToken
	p := refreshParams(rt)
	p["scope"] = "user:inference"
	a := h.postJSON(t, p)
	if a.status != 200 || a.Scope != "user:inference" {
		t.Fatalf("narrowing refresh: %+v", a)
	}
	p = refreshParams(a.RefreshToken)
	p["scope"] = "user:inference user:admin"
	if a := h.postJSON(t, p); a.status != 400 || a.Error != "invalid_scope" {
		t.Fatalf("widening refresh: %+v", a)
	}
	// The rotated token keeps the login's scope, not the narrowed one.
	if a := h.postJSON(t, refreshParams(a.RefreshToken)); a.status != 200 || a.Scope != testScope {
		t.Fatalf("refresh after narrowing: %+v", a)
	}
}

func TestValidate(t *testing.T) {
	h := newHarness(t)
	h.s.AccessTTL = time.Hour
	a := h.login(t)
	if a.ExpiresIn != 3600 {
		t.Fatalf("expires_in = %d, want 3600", a.ExpiresIn)
	}
	for _, step := range []struct {
		advance        time.Duration
		known, expired bool
	}{
		{0, true, false},
		{59 * time.Minute, true, false},
		{time.Minute, true, true},
		{24 * time.Hour, true, true},
	} {
		h.clock.Advance(step.advance)
		if known, expired := h.s.Validate(a.AccessToken); known != step.known || expired != step.expired {
			t.Fatalf("after +%v: Validate = %v, %v, want %v, %v", step.advance, known, expired, step.known, step.expired)
		}
	}
	if known, expired := h.s.Validate("sk-ant-oat01-fake-never-issued"); known || expired {
		t.Fatalf("Validate(unknown) = %v, %v", known, expired)
	}
	// A refresh after expiry gives a fresh access token.
	b := h.postJSON(t, refreshParams(a.RefreshToken))
	if known, expired := h.s.Validate(b.AccessToken); !known || expired {
		t.Fatalf("Validate(refreshed) = %v, %v", known, expired)
	}

	// An exchange that asks for expires_in gets it (setup-token's
	// long-lived tokens).
	shown, _ := h.s.Authorize(authorizeURL(h.srv.URL, nil))
	c := h.postJSON(t, exchangeParams(shown, map[string]any{"expires_in": 31536000}))
	if c.status != 200 || c.ExpiresIn != 31536000 {
		t.Fatalf("exchange with expires_in: %+v", c)
	}
	h.clock.Advance(300 * 24 * time.Hour)
	if known, expired := h.s.Validate(c.AccessToken); !known || expired {
		t.Fatalf("Validate(long-lived) = %v, %v", known, expired)
	}
}

func TestRevoke(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	b := h.postJSON(t, refreshParams(a.RefreshToken))
	other := h.login(t)

	h.s.Revoke(b.RefreshToken)
	if r := h.postJSON(t, refreshParams(b.RefreshToken)); r.status != 400 || r.Error != "invalid_grant" || !strings.Contains(r.Description, "revoked") {
		t.Fatalf("refresh with a revoked token: %+v", r)
	}
	for _, at := range []string{a.AccessToken, b.AccessToken} {
		if known, _ := h.s.Validate(at); known {
			t.Fatalf("access token of a revoked login still known")
		}
	}
	if known, _ := h.s.Validate(other.AccessToken); !known {
		t.Fatal("Revoke killed another login")
	}
	h.s.Revoke("sk-ant-ort01-fake-never-issued") // does nothing

	h.s.RevokeAll()
	if r := h.postJSON(t, refreshParams(other.RefreshToken)); r.Error != "invalid_grant" {
		t.Fatalf("refresh after RevokeAll: %+v", r)
	}
	// A login after RevokeAll works.
	c := h.login(t)
	if r := h.postJSON(t, refreshParams(c.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh of a login after RevokeAll: %+v", r)
	}
}

func TestFaultStatus(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	h.s.InjectFault(FaultStatus, 2, 503, 0)
	h.s.InjectFault(FaultStatus, 1, 0, 0)
	for _, want := range []struct {
		status int
		code   string
	}{{503, "temporarily_unavailable"}, {503, "temporarily_unavailable"}, {500, "server_error"}} {
		r := h.postJSON(t, refreshParams(a.RefreshToken))
		if r.status != want.status || r.Error != want.code {
			t.Fatalf("faulted refresh: %+v, want %d %s", r, want.status, want.code)
		}
	}
	// The faults consumed nothing: the refresh token still works.
	if r := h.postJSON(t, refreshParams(a.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh after the faults: %+v", r)
	}
	reqs := h.s.Requests()
	if len(reqs) != 5 || reqs[1].Status != 503 || reqs[1].Grant != "refresh_token" || reqs[3].Error != "server_error" || reqs[4].Status != 200 {
		t.Fatalf("Requests: %+v", reqs)
	}
	if h.s.Refreshes() != 1 {
		t.Fatalf("Refreshes = %d, want 1", h.s.Refreshes())
	}

	h.s.InjectFault(FaultStatus, 5, 500, 0)
	h.s.InjectFault(FaultNone, 0, 0, 0)
	if r := h.postJSON(t, refreshParams(h.login(t).RefreshToken)); r.status != 200 {
		t.Fatalf("FaultNone did not clear the faults: %+v", r)
	}
}

func TestFaultDelay(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	h.s.InjectFault(FaultDelay, 1, 0, 50*time.Millisecond)
	start := time.Now()
	r := h.postJSON(t, refreshParams(a.RefreshToken))
	if r.status != 200 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("delayed refresh after %v: %+v", time.Since(start), r)
	}

	// A client that gives up during the delay is let go, and its refresh
	// token is not consumed.
	h.s.InjectFault(FaultDelay, 1, 0, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b, _ := json.Marshal(refreshParams(r.RefreshToken))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+TokenPath, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	start = time.Now()
	if resp, err := h.srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request with a 50ms deadline answered %d during a one-minute delay", resp.StatusCode)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request during the delay: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("delay did not honour the request's context: %v", d)
	}
	reqs := waitRequests(t, h.s, 3)
	if last := reqs[2]; last.Status != 0 || !strings.Contains(last.Error, "went away") {
		t.Fatalf("record of the abandoned request: %+v", last)
	}
	if r := h.postJSON(t, refreshParams(r.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh after the abandoned one: %+v", r)
	}
}

// TestFaultLateAnswer: the refresh is granted (the refresh token rotates)
// before the answer is held; a client that waits gets the new tokens, one
// that hangs up meanwhile loses them, and its old refresh token is dead.
func TestFaultLateAnswer(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	h.s.InjectFault(FaultLateAnswer, 1, 0, 50*time.Millisecond)
	start := time.Now()
	r := h.postJSON(t, refreshParams(a.RefreshToken))
	if r.status != 200 || r.RefreshToken == "" || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("late refresh after %v: %+v", time.Since(start), r)
	}

	h.s.InjectFault(FaultLateAnswer, 1, 0, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, _ := json.Marshal(refreshParams(r.RefreshToken))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+TokenPath, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := h.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	// Refreshes counts the grant before the answer goes.
	for deadline := time.Now().Add(10 * time.Second); h.s.Refreshes() != 2; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Refreshes = %d during the late answer, want 2", h.s.Refreshes())
		}
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the client that hung up got an answer")
	}
	reqs := waitRequests(t, h.s, 3)
	if last := reqs[2]; last.Status != 0 || !strings.Contains(last.Error, "lost") {
		t.Fatalf("record of the lost answer: %+v", last)
	}
	// The server rotated: the refresh token the client still holds is dead.
	if r := h.postJSON(t, refreshParams(r.RefreshToken)); r.status != 400 || r.Error != ErrInvalidGrant {
		t.Fatalf("refresh with the token whose rotation was lost: %+v", r)
	}
}

// TestFaultStatusDelayed: FaultStatus with a duration answers its error
// after it.
func TestFaultStatusDelayed(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	h.s.InjectFault(FaultStatus, 1, 503, 50*time.Millisecond)
	start := time.Now()
	if r := h.postJSON(t, refreshParams(a.RefreshToken)); r.status != 503 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("delayed 503 after %v: %+v", time.Since(start), r)
	}
	if r := h.postJSON(t, refreshParams(a.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh after the fault: %+v", r)
	}
}

// waitRequests waits until n token requests are recorded: a handler may
// finish after its client has given up.
func waitRequests(t *testing.T, s *Server, n int) []TokenRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		reqs := s.Requests()
		if len(reqs) >= n {
			return reqs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d token requests recorded, want %d: %+v", len(reqs), n, reqs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFaultDrop(t *testing.T) {
	h := newHarness(t)
	a := h.login(t)
	h.s.InjectFault(FaultDrop, 1, 0, 0)
	b, _ := json.Marshal(refreshParams(a.RefreshToken))
	resp, err := h.srv.Client().Post(h.srv.URL+TokenPath, "application/json", strings.NewReader(string(b)))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("dropped request answered %d", resp.StatusCode)
	}
	reqs := waitRequests(t, h.s, 2)
	if last := reqs[1]; last.Status != 0 || last.Grant != "refresh_token" || !strings.Contains(last.Error, "dropped") {
		t.Fatalf("record of the dropped request: %+v", last)
	}
	if r := h.postJSON(t, refreshParams(a.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh after the drop: %+v", r)
	}
}

func TestFaultDropHTTP2(t *testing.T) {
	s := New(testClient, testRedirect)
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	s.InjectFault(FaultDrop, 1, 0, 0)
	resp, err := srv.Client().Post(srv.URL+TokenPath, "application/json", strings.NewReader(`{}`))
	if err == nil {
		proto := resp.Proto
		resp.Body.Close()
		t.Fatalf("dropped request over %s answered %d", proto, resp.StatusCode)
	}
	if reqs := waitRequests(t, s, 1); reqs[0].Status != 0 {
		t.Fatalf("record of the dropped request: %+v", reqs[0])
	}
}

func TestConcurrentRefreshes(t *testing.T) {
	h := newHarness(t)
	const logins, rounds = 8, 5
	tokens := make([]string, logins)
	for i := range tokens {
		tokens[i] = h.login(t).RefreshToken
	}
	var wg sync.WaitGroup
	errs := make(chan error, logins)
	for i := range tokens {
		wg.Add(1)
		go func(rt string) {
			defer wg.Done()
			for range rounds {
				b, _ := json.Marshal(refreshParams(rt))
				resp, err := h.srv.Client().Post(h.srv.URL+TokenPath, "application/json", strings.NewReader(string(b)))
				if err != nil {
					errs <- err
					return
				}
				var a tokenResponse
				err = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					errs <- fmt.Errorf("refresh: %d %v", resp.StatusCode, err)
					return
				}
				if known, _ := h.s.Validate(a.AccessToken); !known {
					errs <- errors.New("fresh access token unknown")
					return
				}
				rt = a.RefreshToken
			}
		}(tokens[i])
	}
	// Readers run alongside the refreshes.
	for range rounds {
		_ = h.s.Requests()
		_ = h.s.Refreshes()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := h.s.Refreshes(); got != logins*rounds {
		t.Fatalf("Refreshes = %d, want %d", got, logins*rounds)
	}
}

// TestConcurrentSameToken races refreshes of one token: exactly one wins,
// as with real rotation.
func TestConcurrentSameToken(t *testing.T) {
	h := newHarness(t)
	rt := h.login(t).RefreshToken
	const n = 8
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(refreshParams(rt))
			resp, err := h.srv.Client().Post(h.srv.URL+TokenPath, "application/json", strings.NewReader(string(b)))
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	won := 0
	for st := range statuses {
		switch st {
		case 200:
			won++
		case 400:
		default:
			t.Errorf("status %d", st)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing refreshes of one token won, want 1", won, n)
	}
}

func TestZeroServer(t *testing.T) {
	var s Server
	shown, err := s.Authorize(authorizeURL("http://fake", map[string]string{"client_id": "any", "redirect_uri": "http://localhost:5/cb"}))
	if err != nil {
		t.Fatal(err)
	}
	code, state, _ := strings.Cut(shown, "#")
	body, _ := json.Marshal(map[string]string{"grant_type": "authorization_code", "code": code, "state": state,
		"client_id": "any", "redirect_uri": "http://localhost:5/cb", "code_verifier": testVerifier})
	req := httptest.NewRequest(http.MethodPost, TokenPath, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("zero Server exchange: %d %s", w.Code, w.Body)
	}
	if known, expired := s.Validate(""); known || expired {
		t.Fatal("Validate of the empty token")
	}
}

// FuzzTokenRequest feeds arbitrary bodies to the token endpoint: it must
// answer an OAuth error or tokens, never panic or answer anything else.
func FuzzTokenRequest(f *testing.F) {
	f.Add("application/json", `{"grant_type":"authorization_code","code":"x","client_id":"c"}`)
	f.Add("application/json", `{"grant_type":"refresh_token","refresh_token":"r","client_id":"c","scope":"a b"}`)
	f.Add("application/json", `{"expires_in":"12","grant_type":"authorization_code"}`)
	f.Add("application/x-www-form-urlencoded", "grant_type=refresh_token&refresh_token=%zz")
	f.Add("text/plain", "")
	f.Fuzz(func(t *testing.T, contentType, body string) {
		s := New("", "")
		req := httptest.NewRequest(http.MethodPost, TokenPath, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		var a answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %d is not JSON: %q", w.Code, w.Body)
		}
		if w.Code != 200 && a.Error == "" {
			t.Fatalf("refusal %d without an error code: %q", w.Code, w.Body)
		}
		if w.Code == 200 {
			t.Fatalf("tokens issued for a code never authorized: %q", body)
		}
	})
}
