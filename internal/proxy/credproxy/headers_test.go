package credproxy

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

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
