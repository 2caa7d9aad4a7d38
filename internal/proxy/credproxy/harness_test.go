package credproxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// Fake credentials: obviously not real.
const (
	realAPIKey = "sk-fake-owner-api-key-0123456789abcdef"
	realOAuth  = "sk-fake-owner-oauth-token-0123456789"
)

type memSink struct {
	mu sync.Mutex
	e  []decisionlog.Entry
}

func (m *memSink) Record(e decisionlog.Entry) { m.mu.Lock(); m.e = append(m.e, e); m.mu.Unlock() }
func (m *memSink) all() []decisionlog.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]decisionlog.Entry(nil), m.e...)
}

type harness struct {
	t        *testing.T
	up       *httptest.Server
	upstream http.Handler
	proxy    *Proxy
	srv      *testenv.Served
	reg      *sessiontoken.Registry
	sink     *memSink
	logs     *testenv.Buffer
	token    secret.Value // live token of session "s1"
	kind     credential.Kind
	real     string
	hits     func() int
}

type countingHandler struct {
	h  http.Handler
	mu sync.Mutex
	n  int
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	c.h.ServeHTTP(w, r)
}

func newHarness(t *testing.T, kind credential.Kind, upstream http.Handler, tweak func(*Options)) *harness {
	t.Helper()
	return newHarnessConnState(t, kind, upstream, tweak, nil)
}

// newHarnessConnState also watches the upstream's connections.
func newHarnessConnState(t *testing.T, kind credential.Kind, upstream http.Handler, tweak func(*Options), cs func(net.Conn, http.ConnState)) *harness {
	t.Helper()
	real := realAPIKey
	if kind != credential.KindAPIKey {
		real = realOAuth
	}
	ch := &countingHandler{h: upstream}
	up := httptest.NewUnstartedServer(ch)
	up.Config.ConnState = cs
	up.Start()
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	reg, err := sessiontoken.New(store.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := reg.Issue("s1", kind)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, up: up, upstream: upstream, reg: reg, sink: &memSink{}, logs: &testenv.Buffer{}, token: tok, kind: kind, real: real}
	h.hits = func() int { ch.mu.Lock(); defer ch.mu.Unlock(); return ch.n }
	opts := Options{
		Upstream:   u,
		Credential: credential.Static{Kind: kind, Secret: secret.New(real), Source: "test"},
		Tokens:     reg,
		Log:        slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Decisions:  h.sink,
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	h.srv = startTestServer(t, p, 5*time.Second)
	t.Cleanup(func() {
		h.srv.Close()
		p.Drain()
		// Invariant 2: no credential or token in any log line or decision.
		logs := h.logs.String()
		for _, e := range h.sink.all() {
			logs += "\n" + e.Path + e.Reason
		}
		if strings.Contains(logs, real) || strings.Contains(logs, tok.Reveal()) {
			t.Errorf("a secret appears in the logs:\n%s", logs)
		}
	})
	return h
}

// cred returns the header carrying h's token.
func (h *harness) cred() (string, string) {
	return h.kind.Header(), h.kind.HeaderValue(h.token)
}

func (h *harness) do(method, target string, body string, hdr http.Header) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+target, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// authed is a header set with the token in its right header.
func (h *harness) authed() http.Header {
	k, v := h.cred()
	return http.Header{k: {v}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
}

// raw sends bytes on a fresh connection and returns the first response.
func (h *harness) raw(req string) (*http.Response, string) {
	h.t.Helper()
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		h.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const smallBody = `{"model":"claude-opus-5-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"say hi"}]}`

// startTestServer serves h with the proxy's server on a loopback port.
func startTestServer(tb testing.TB, h http.Handler, readHeaderTimeout time.Duration) *testenv.Served {
	tb.Helper()
	return testenv.ServeLoopback(tb, NewServer(h, readHeaderTimeout))
}
