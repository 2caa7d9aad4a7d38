package credproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/anthropic"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/fakeapi"
	"github.com/paddockhq/paddock/internal/limits"
	"github.com/paddockhq/paddock/internal/secret"
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

// headerEcho records the last request it saw.
type headerEcho struct {
	mu      sync.Mutex
	header  http.Header
	trailer http.Header
	host    string
	uri     string
	body    []byte
	n       int
}

func (e *headerEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.header, e.trailer, e.host, e.uri, e.body = r.Header.Clone(), r.Trailer.Clone(), r.Host, r.RequestURI, b
	e.n++
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"m","model":"echo","usage":{"input_tokens":1,"output_tokens":2}}`)
}

func (e *headerEcho) last() (http.Header, http.Header, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.header, e.trailer, e.n
}

// cliHeaders are the headers the real CLI sends (claude-code-client.md §4.1).
func cliHeaders() [][2]string {
	return [][2]string{
		{"Accept", "application/json"},
		{"Content-Type", "application/json"},
		{"User-Agent", "claude-cli/2.1.328 (external, cli)"},
		{"X-Claude-Code-Session-Id", "f82547b4-211e-48cb-8108-4ae919b899f3"},
		{"X-Stainless-Arch", "x64"}, {"X-Stainless-Lang", "js"}, {"X-Stainless-Os", "Linux"},
		{"X-Stainless-Package-Version", "0.128.0"}, {"X-Stainless-Retry-Count", "0"},
		{"X-Stainless-Runtime", "node"}, {"X-Stainless-Runtime-Version", "v26.12.1"},
		{"X-Stainless-Timeout", "600"},
		{"Anthropic-Beta", "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14"},
		{"Anthropic-Dangerous-Direct-Browser-Access", "true"},
		{"Anthropic-Version", "2023-06-01"},
		{"X-App", "cli"},
		{"Accept-Encoding", "gzip, deflate, br, zstd"},
	}
}

func TestExactHeaderSetUpstream(t *testing.T) {
	for _, kind := range credential.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			echo := &headerEcho{}
			h := newHarness(t, kind, echo, nil)
			var b strings.Builder
			fmt.Fprintf(&b, "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: keep-alive\r\n")
			for _, kv := range cliHeaders() {
				fmt.Fprintf(&b, "%s: %s\r\n", kv[0], kv[1])
			}
			k, v := h.cred()
			fmt.Fprintf(&b, "%s: %s\r\nContent-Length: %d\r\n\r\n%s", k, v, len(smallBody), smallBody)
			resp, body := h.raw(b.String())
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("%v %s", resp, body)
			}
			got, _, _ := echo.last()
			want := http.Header{}
			for _, kv := range cliHeaders() {
				want.Add(kv[0], kv[1])
			}
			want.Set(kind.Header(), kind.HeaderValue(secret.New(h.real)))
			want.Set("Content-Length", fmt.Sprint(len(smallBody)))
			if !sameHeaders(got, want) {
				t.Fatalf("upstream headers differ:\n got  %v\n want %v", keys(got), keys(want))
			}
			if echo.host != h.up.Listener.Addr().String() || echo.uri != "/v1/messages?beta=true" {
				t.Fatalf("host %q uri %q", echo.host, echo.uri)
			}
			if string(echo.body) != smallBody {
				t.Fatal("body changed")
			}
		})
	}
}

func keys(h http.Header) []string {
	var out []string
	for k, v := range h {
		out = append(out, k+"="+strings.Join(v, "|"))
	}
	sort.Strings(out)
	return out
}

func sameHeaders(a, b http.Header) bool {
	return strings.Join(keys(a), "\n") == strings.Join(keys(b), "\n")
}

func TestCredentialTricksStripped(t *testing.T) {
	const junk = "sk-junk-credential-from-the-box"
	for _, kind := range credential.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			echo := &headerEcho{}
			h := newHarness(t, kind, echo, nil)
			k, v := h.cred()
			other := "X-Api-Key: " + junk
			if kind == credential.KindAPIKey {
				other = "Authorization: Bearer " + junk
			}
			tricks := map[string]string{
				"other kind header":              other + "\r\n",
				"lower case other header":        strings.ToLower(other) + "\r\n",
				"underscore x_api_key":           "x_api_key: " + junk + "\r\n",
				"underscore Proxy_Authorization": "Proxy_Authorization: Basic " + junk + "\r\n",
				"proxy-authorization":            "Proxy-Authorization: Basic " + junk + "\r\n",
				"cookie":                         "Cookie: session=" + junk + "\r\n",
				"api-key":                        "Api-Key: " + junk + "\r\n",
				"x-auth-token":                   "X-Auth-Token: " + junk + "\r\n",
				"anthropic-auth-token":           "Anthropic-Auth-Token: " + junk + "\r\n",
				"x-forwarded-for":                "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: http\r\nForwarded: for=1.2.3.4\r\nX-Real-Ip: 1.2.3.4\r\n",
				"connection nominated":           "Connection: keep-alive, X-Secret-Thing\r\nX-Secret-Thing: " + junk + "\r\n",
				"token copied in custom header":  "X-Custom: prefix " + h.token.Reveal() + "\r\n",
				"via and te":                     "Via: 1.1 evil\r\nTE: trailers\r\nKeep-Alive: 5\r\nProxy-Connection: keep-alive\r\n",
			}
			for name, extra := range tricks {
				t.Run(name, func(t *testing.T) {
					req := "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + k + ": " + v + "\r\n" + extra +
						fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(smallBody), smallBody)
					resp, body := h.raw(req)
					if resp == nil || resp.StatusCode != 200 {
						t.Fatalf("%v %s", resp, body)
					}
					checkOneCredential(t, echo, kind, h.real, junk, h.token.Reveal())
				})
			}
			// Trailers, with chunked encoding.
			t.Run("trailers", func(t *testing.T) {
				req := "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + k + ": " + v + "\r\nTrailer: X-Api-Key, Authorization\r\nTransfer-Encoding: chunked\r\n\r\n" +
					fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Api-Key: %s\r\nAuthorization: Bearer %s\r\n\r\n", len(smallBody), smallBody, junk, junk)
				resp, body := h.raw(req)
				if resp == nil || resp.StatusCode != 200 {
					t.Fatalf("%v %s", resp, body)
				}
				checkOneCredential(t, echo, kind, h.real, junk, h.token.Reveal())
				_, tr, _ := echo.last()
				if len(tr) != 0 {
					t.Fatalf("trailers reached the upstream: %v", tr)
				}
			})
			// The token's own header repeated: refused, nothing forwarded.
			t.Run("duplicate token header", func(t *testing.T) {
				_, _, before := echo.last()
				resp, _ := h.raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + k + ": " + v + "\r\n" + k + ": " + v + "\r\nContent-Length: 2\r\n\r\n{}")
				_, _, after := echo.last()
				if resp == nil || resp.StatusCode != 401 || after != before {
					t.Fatalf("duplicate accepted: %v", resp)
				}
			})
		})
	}
}

func checkOneCredential(t *testing.T, echo *headerEcho, kind credential.Kind, real, junk, token string) {
	t.Helper()
	got, _, _ := echo.last()
	n := 0
	for name, vs := range got {
		for _, v := range vs {
			if strings.Contains(v, junk) || strings.Contains(v, token) {
				t.Errorf("header %s carries a client secret: %q", name, v)
			}
			if strings.Contains(v, real) {
				n++
				if name != kind.Header() {
					t.Errorf("real credential in %s", name)
				}
			}
		}
		ln := strings.ToLower(name)
		if strings.HasPrefix(ln, "x-forwarded") || ln == "forwarded" || ln == "via" || ln == "x-real-ip" ||
			ln == "cookie" || ln == "te" || ln == "keep-alive" || ln == "proxy-connection" || ln == "x-secret-thing" || ln == "trailer" {
			t.Errorf("header %s reached the upstream", name)
		}
	}
	if n != 1 {
		t.Errorf("the real credential appears %d times upstream, want exactly 1: %v", n, keys(got))
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

func TestUpstreamDownAndRedirect(t *testing.T) {
	// Upstream that redirects to a second server: the proxy must pass the
	// 307 back and never call the second server itself.
	var second atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second.Add(1) }))
	defer target.Close()
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v1/messages", http.StatusTemporaryRedirect)
	})
	h := newHarness(t, credential.KindAPIKey, redirect, nil)
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	resp.Body.Close()
	if resp.StatusCode != 307 || second.Load() != 0 {
		t.Fatalf("redirect: %d, followed %d times", resp.StatusCode, second.Load())
	}

	h.up.Close() // now the upstream is gone
	resp = h.do("POST", "/v1/messages", smallBody, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), anthropic.APIError) {
		t.Fatalf("down: %d %s", resp.StatusCode, b)
	}
}

// sseUpstream writes a random SSE-like stream in random chunks with pauses.
func sseUpstream(seed uint64, payload []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rng := rand.New(rand.NewPCG(seed, 1))
		fl := w.(http.Flusher)
		for i := 0; i < len(payload); {
			n := 1 + rng.IntN(300)
			if i+n > len(payload) {
				n = len(payload) - i
			}
			w.Write(payload[i : i+n])
			fl.Flush()
			i += n
			if rng.IntN(10) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
}

func ssePayload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
	for i := 0; i < n; i++ {
		txt := make([]byte, rng.IntN(200))
		for j := range txt {
			txt[j] = byte(0x20 + rng.IntN(0x5e))
			if txt[j] == '"' || txt[j] == '\\' {
				txt[j] = 'q'
			}
		}
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n", txt)
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

func TestSSEByteIdentical(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		payload := ssePayload(seed, 300)
		h := newHarness(t, credential.KindOAuth, sseUpstream(seed, payload), nil)
		resp := h.do("POST", "/v1/messages?beta=true", smallBody, h.authed())
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("seed %d: stream differs (%d vs %d bytes, %v)", seed, len(got), len(payload), err)
		}
		es := waitEntries(t, h, 1)
		e := es[len(es)-1]
		if e.InputTokens != 7 || e.OutputTokens != 99 || e.Model != "claude-x" || e.BytesOut != int64(len(payload)) || e.Session != "s1" {
			t.Fatalf("decision %+v", e)
		}
	}
}

// TestSSEEventsFlushedOneByOne: each event reaches the client before the
// upstream sends the next one.
func TestSSEEventsFlushedOneByOne(t *testing.T) {
	next := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 5; i++ {
			fmt.Fprintf(w, "event: ping\ndata: {\"type\":\"ping\",\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(10 * time.Second):
				return
			}
		}
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 5; i++ {
		var got []byte
		for !bytes.HasSuffix(got, []byte("\n\n")) {
			n, err := resp.Body.Read(buf)
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Contains(got, []byte(fmt.Sprintf(`"i":%d`, i))) {
			t.Fatalf("event %d: %q", i, got)
		}
		next <- struct{}{}
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	canceled := make(chan time.Time, 1)
	started := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: ping\ndata: {}\n\n"))
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		canceled <- time.Now()
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/messages", strings.NewReader(smallBody))
	req.Header = h.authed()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	gone := time.Now()
	cancel()
	resp.Body.Close()
	select {
	case at := <-canceled:
		// Timings are not pass/fail on noisy machines: the bound is
		// generous, the measured time is logged (target: 100 ms).
		t.Logf("upstream cancelled %v after the client went away", at.Sub(gone))
		if at.Sub(gone) > time.Second {
			t.Errorf("upstream cancelled %v after the client went away", at.Sub(gone))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	es := waitEntries(t, h, 1)
	if r := es[len(es)-1].Reason; r != "client went away" {
		t.Fatalf("reason %q", r)
	}
}

// TestUpstreamAnswersBeforeBody is golang/go#40747: an upstream that answers
// before reading the request body. A plain ReverseProxy cuts some of those
// streams and churns connections; paddock, reading the body first, does not.
func TestUpstreamAnswersBeforeBody(t *testing.T) {
	fake := fakeapi.New()
	fake.AnswerEarly = true
	fake.TextDeltas = 20
	var conns atomic.Int32
	h := newHarnessConnState(t, credential.KindOAuth, fake, nil, func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	const workers, each = 8, 25
	var failures atomic.Int32
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest("POST", h.srv.URL+"/v1/messages", strings.NewReader(body))
				req.Header = h.authed()
				resp, err := tr.RoundTrip(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.HasSuffix(b, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d streams cut", f, workers*each)
	}
	// Connections are reused: a handful per worker at most, not one per request.
	if c := conns.Load(); c > 2*workers {
		t.Fatalf("%d upstream connections for %d requests: the pool churns", c, workers*each)
	}
}

// TestUpstreamRefusesLargeBodyEarly: an upstream that refuses a large body
// as soon as it sees its length (413, as the API does past its size limit)
// and reads no more of it. The client gets that refusal, not a gateway
// error (which Claude Code would retry, sending the body again), and the
// decision log records it. The upstream is Go's own server: it discards
// 256 KiB of what is left, answers with Connection: close and resets the
// connection half a second later.
func TestUpstreamRefusesLargeBodyEarly(t *testing.T) {
	const refusal = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, refusal)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 8<<20) + `"}]}`
	for i := 0; i < 2; i++ { // and again, on a fresh upstream connection
		resp := h.do("POST", "/v1/messages", body, h.authed())
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != refusal {
			t.Fatalf("request %d: %d %s; want the upstream's 413", i, resp.StatusCode, b)
		}
	}
	for _, e := range waitEntries(t, h, 2) {
		if e.Decision != "forwarded" || e.Status != http.StatusRequestEntityTooLarge || e.Reason != "" {
			t.Errorf("decision %+v; want forwarded, 413, no reason", e)
		}
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: ping\ndata: {}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // stalls until paddock gives up
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a stalled stream ended as if complete")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled stream was not ended")
	}
	resp.Body.Close()
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "sent nothing for 200ms") {
		t.Fatalf("reason %q", r)
	}
}

// TestStalledClientConnectionEnds: a client that stops reading a stream
// (the box's Claude Code frozen, or a hostile process in the box holding
// connections) has its connection closed after the stream-idle timeout,
// the upstream request is cancelled, and the decision log says why. Before,
// the proxy's write blocked for as long as the client liked.
func TestStalledClientConnectionEnds(t *testing.T) {
	upDone := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(upDone)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte("event: content_block_delta\ndata: {\"pad\":\"" + strings.Repeat("x", 16<<10) + "\"}\n\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(ev); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, v := h.cred()
	io.WriteString(c, "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\n"+k+": "+v+
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(smallBody))+"\r\n\r\n"+smallBody)
	// Read nothing until the proxy has given up.
	select {
	case <-upDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "the client read nothing for 300ms") {
		t.Fatalf("reason %q", r)
	}
	// The connection is closed: draining what was buffered ends in EOF or
	// a reset, never in a wait.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the stalled client's connection stayed open")
	}
}

// TestIdleUpstreamAndStalledClientConnectionEnds: an upstream that goes
// silent mid-way through an answer of known length, to a client that reads
// nothing: the idle timeout cuts the answer, and what the proxy had
// buffered for the client must not hold the connection either (found by
// review: the aborted response's flush had no deadline, and the decision
// was never recorded).
func TestIdleUpstreamAndStalledClientConnectionEnds(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		io.WriteString(w, `{"pad":"`+strings.Repeat("x", 100))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 300 * time.Millisecond })
	// The proxy's server with a short WriteTimeout, on one in-memory pipe
	// whose writes block until the client reads (it never does).
	srv := NewServer(h.proxy, time.Second)
	srv.WriteTimeout = 200 * time.Millisecond
	client, server := net.Pipe()
	ended := make(chan struct{})
	go func() { srv.ServeConn(server); close(ended) }()
	t.Cleanup(func() { client.Close(); srv.Close() })
	k, v := h.cred()
	io.WriteString(client, "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"+k+": "+v+
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(smallBody))+"\r\n\r\n"+smallBody)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("connection still held (decisions recorded: %d)", len(h.sink.all()))
	}
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "sent nothing for 300ms") {
		t.Fatalf("reason %q", r)
	}
}

// TestSlowUpstreamHeaders: an upstream that does not begin its answer
// within ResponseHeaderTimeout gets the client a 504 in the API's error
// shape, and the upstream request is cancelled.
func TestSlowUpstreamHeaders(t *testing.T) {
	canceled := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices a closed connection
		<-r.Context().Done()
		close(canceled)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ResponseHeaderTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), `"api_error"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	if es := waitEntries(t, h, 1); es[0].Status != 504 || es[0].Reason != "the upstream API did not answer in time" {
		t.Fatalf("entry %+v", es[0])
	}
}

// TestLongStreamOutlivesReadTimeout: the body read deadline must not cut a
// response that streams for longer than it.
func TestLongStreamOutlivesReadTimeout(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 8; i++ {
			fmt.Fprintf(w, "event: ping\ndata: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ReadTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Contains(b, []byte(`"i":7`)) {
		t.Fatalf("stream cut: %v %q", err, b)
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

func TestRealCredentialInjectedPerKind(t *testing.T) {
	for _, kind := range credential.Kinds {
		real := realOAuth
		if kind == credential.KindAPIKey {
			real = realAPIKey
		}
		fake := fakeapi.New(real)
		h := newHarness(t, kind, fake, nil)
		resp := h.do("POST", "/v1/messages", smallBody, h.authed())
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		reqs := fake.Requests()
		if resp.StatusCode != 200 || len(reqs) != 1 || reqs[0].Credential != real {
			t.Fatalf("%s: %d %+v", kind, resp.StatusCode, reqs)
		}
	}
}

func TestUpstreamPathPrefix(t *testing.T) {
	echo := &headerEcho{}
	h := newHarness(t, credential.KindOAuth, echo, func(o *Options) {
		u := *o.Upstream
		u.Path = "/gw/anthropic"
		o.Upstream = &u
	})
	resp := h.do("GET", "/v1/models?limit=2", "", h.authed())
	resp.Body.Close()
	if echo.uri != "/gw/anthropic/v1/models?limit=2" {
		t.Fatalf("uri %q", echo.uri)
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
