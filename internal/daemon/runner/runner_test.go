package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

type testRunner struct {
	*Runner
	dir    string
	fake   *fakeapi.Server
	logs   *testenv.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startRunner runs a Runner in-process against a fake upstream.
func startRunner(t *testing.T, env []string, fakeCreds []string, listen string) *testRunner {
	t.Helper()
	fake := fakeapi.New(fakeCreds...)
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Anthropic.Upstream = up.URL
	cfg.Proxy.Listen = listen
	cfg.Web.Listen = "off"
	logs := &testenv.Buffer{}
	r, err := New(Options{StateDir: dir, Config: cfg, Env: env, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &testRunner{Runner: r, dir: dir, fake: fake, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { tr.done <- r.Serve(ctx) }()
	t.Cleanup(tr.stop)
	return tr
}

// serve runs r, listening first, until the test ends.
func serve(t testing.TB, r *Runner) {
	t.Helper()
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (tr *testRunner) stop() {
	tr.cancel()
	select {
	case <-tr.done:
	case <-time.After(10 * time.Second):
	}
}

func (tr *testRunner) client() *api.Client {
	return api.NewClient(filepath.Join(tr.dir, statedir.APISocket))
}

func TestSecondRunnerRefused(t *testing.T) {
	tr := startRunner(t, nil, nil, "off")
	_, err := New(Options{StateDir: tr.dir, Config: config.Default()})
	if !errors.Is(err, statedir.ErrLocked) || !strings.Contains(err.Error(), "another paddock serve") {
		t.Fatalf("second runner: %v", err)
	}
	// The first one still answers: the second touched nothing.
	if _, err := tr.client().Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSocketsOwnerOnly(t *testing.T) {
	tr := startRunner(t, nil, nil, "")
	for _, p := range []string{filepath.Join(tr.dir, statedir.APISocket), filepath.Join(tr.dir, statedir.ProxySocket),
		filepath.Join(tr.dir, statedir.DBFile), filepath.Join(tr.dir, statedir.LogsDir)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v", p, fi.Mode())
		}
	}
	// The directory itself: traversable, never listable or writable by others.
	if fi, _ := os.Stat(tr.dir); fi.Mode().Perm()&0o066 != 0 {
		t.Errorf("state dir mode %v", fi.Mode())
	}
	if tr.ProxyAddr() != "unix:"+filepath.Join(tr.dir, statedir.ProxySocket) {
		t.Fatal(tr.ProxyAddr())
	}
}

func TestAPI(t *testing.T) {
	tr := startRunner(t, []string{"ANTHROPIC_API_KEY=sk-fake-env-key"}, nil, "127.0.0.1:0")
	c := tr.client()
	ctx := context.Background()
	h, err := c.Health(ctx)
	if err != nil || h.PID != os.Getpid() || h.StateDir != tr.dir || !strings.HasPrefix(h.Proxy, "127.0.0.1:") {
		t.Fatalf("%+v %v", h, err)
	}
	st, err := c.CredentialStatus(ctx)
	if err != nil || st.Kind != credential.KindAPIKey || st.Source != "env:ANTHROPIC_API_KEY" {
		t.Fatalf("%+v %v", st, err)
	}
	// Logs are a session's: a name that is none is not found (and never
	// becomes a path).
	if _, err := c.Logs(ctx, "../etc", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("bad session id: %v", err)
	}
	if _, err := tr.Logs(ctx, "../etc", 0); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("bad session id, inside: %v", err)
	}
	if es, err := c.Logs(ctx, "nobody", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(es, err)
	}
	// The API never shows a secret.
	resp, err := (&http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", filepath.Join(tr.dir, statedir.APISocket))
	}}}).Get("http://x/v1/credential")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "sk-fake-env-key") {
		t.Fatal("API answer holds the credential")
	}
	// No credential at all: a clear error.
	tr2 := startRunner(t, nil, nil, "off")
	if _, err := tr2.client().CredentialStatus(ctx); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "paddock credential set") {
		t.Fatalf("missing credential: %v", err)
	}
}

func TestClientWithoutRunner(t *testing.T) {
	c := api.NewClient(filepath.Join(t.TempDir(), "none.sock"))
	_, err := c.Health(context.Background())
	if !errors.Is(err, api.ErrNoRunner) || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "paddock serve") {
		t.Fatalf("%v", err)
	}
}

// TestExpiredCredentialIsClearAtStart: an expired Claude Code login (read,
// never refreshed) stops a session at its start with a clear message, not
// a stream of 401s later.
func TestExpiredCredentialIsClearAtStart(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"),
		[]byte(`{"claudeAiOauth":{"accessToken":"sk-fake-old","refreshToken":"sk-fake-r","expiresAt":1000,"subscriptionType":"pro"}}`), 0o600)
	tr := startRunner(t, []string{"HOME=" + home}, nil, "off")
	st, err := tr.CredentialStatus(context.Background())
	if err != nil || st.Source != "claude-login:"+filepath.Join(home, ".claude", ".credentials.json") || st.Plan.SubscriptionType != "pro" || st.Expires == nil {
		t.Fatalf("status %+v %v", st, err)
	}
	_, err = tr.CreateSession(context.Background(), api.CreateRequest{Name: "late"})
	if !errors.Is(err, credential.ErrExpired) || !strings.Contains(err.Error(), "expired at") || !strings.Contains(err.Error(), "never refreshes") {
		t.Fatalf("%v", err)
	}
	if ss, _ := tr.Sessions(context.Background()); len(ss) != 0 {
		t.Fatal("a session was recorded")
	}
}

// TestMetricsAndHealth: /healthz answers and /metrics exposes the session
// and proxy metrics on the web listener, without a login.
func TestMetricsAndHealth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "127.0.0.1:0"
	fake := fakeapi.New("sk-fake-owner-metrics")
	up := httptest.NewServer(fake)
	defer up.Close()
	cfg.Anthropic.Upstream = up.URL
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"ANTHROPIC_API_KEY=sk-fake-owner-metrics"}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	tok, _ := r.Tokens().Issue("m1", credential.KindAPIKey)
	req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("X-Api-Key", tok.Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.Proxy().Drain()
	base := r.WebAddr()
	resp, err = http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// The client has the whole answer before the proxy's handler returns
	// and records it (Drain only waits for handlers that returned): poll.
	wants := []string{`paddock_proxy_requests_total{decision="forwarded",route="/v1/messages",status="200"} 1`, `paddock_sessions{state="running"}`, `paddock_tokens_total{kind="output"} 12`}
	var b []byte
	for i := 0; i < 50; i++ {
		resp, err = http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), wants[0]) && strings.Contains(string(b), wants[2]) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(b), tok.Reveal()) || strings.Contains(string(b), "sk-fake-owner-metrics") {
		t.Fatal("a secret in the metrics")
	}
	// The page itself still needs the login.
	resp, _ = http.Get(base + "/")
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("page without login: %d", resp.StatusCode)
	}
	// DNS rebinding: another name for this address gets nothing, on any
	// route; localhost on its port is the listener's own.
	login, err := r.WebLogin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/metrics", "/healthz", "/", strings.TrimPrefix(login, base)} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host: evil.example on %s: %d", path, resp.StatusCode)
		}
	}
	req, _ = http.NewRequest("GET", base+"/healthz", nil)
	req.Host = "localhost" + base[strings.LastIndex(base, ":"):]
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("Host: localhost: %v %v", resp, err)
	}
	// The login refused above on the wrong host is still good once here.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} { // the page with its key, then refused
		resp, err := noFollow.Get(login)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("login use %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
