package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/session"
)

type fakePart struct {
	role string
	out  chan []byte
	mu   sync.Mutex
	keys []string
}

func (p *fakePart) Read(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.out:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (p *fakePart) Send(ctx context.Context, k []byte) error {
	if p.role == "observer" {
		return errdefs.ErrForbidden
	}
	p.mu.Lock()
	p.keys = append(p.keys, string(k))
	p.mu.Unlock()
	p.out <- []byte("echo:" + string(k))
	return nil
}
func (p *fakePart) Resize(context.Context, int, int) error { return nil }
func (p *fakePart) Leave()                                 {}

type fakeBackend struct {
	mu      sync.Mutex
	created []api.CreateRequest
	part    *fakePart
}

func (f *fakeBackend) Sessions(context.Context) ([]session.Session, error) {
	return []session.Session{{ID: "abc123abc123", Name: "demo", Observed: session.Running, Backend: "local", Egress: "offline"}}, nil
}
func (f *fakeBackend) Session(ctx context.Context, ref string) (session.Session, error) {
	return session.Session{ID: "abc123abc123", Name: "demo"}, nil
}
func (f *fakeBackend) CreateSession(_ context.Context, req api.CreateRequest) (session.Session, error) {
	f.mu.Lock()
	f.created = append(f.created, req)
	f.mu.Unlock()
	return session.Session{Name: req.Name}, nil
}
func (f *fakeBackend) Sleep(context.Context, string) (session.Session, error) {
	return session.Session{}, nil
}
func (f *fakeBackend) Wake(context.Context, string) (session.Session, error) {
	return session.Session{}, nil
}
func (f *fakeBackend) RemoveSession(context.Context, string, bool) (session.Session, error) {
	return session.Session{}, nil
}
func (f *fakeBackend) Logs(context.Context, string, int) ([]decisionlog.Entry, error) {
	return []decisionlog.Entry{{InputTokens: 30, OutputTokens: 12}}, nil
}
func (f *fakeBackend) Attach(_ context.Context, _ string, req api.AttachRequest) (api.Participant, error) {
	p := &fakePart{role: req.Role, out: make(chan []byte, 16)}
	p.out <- []byte("snapshot")
	f.mu.Lock()
	f.part = p
	f.mu.Unlock()
	return p, nil
}

const tok = "login-token-for-the-test"

func setup(t *testing.T) (*httptest.Server, *fakeBackend) {
	fb := &fakeBackend{}
	srv := httptest.NewServer(New(fb, secret.New(tok), nil).Handler())
	t.Cleanup(srv.Close)
	return srv, fb
}

func TestNothingWithoutLogin(t *testing.T) {
	srv, _ := setup(t)
	for _, p := range []string{"/", "/app.js", "/api/sessions", "/vendor/xterm.js", "/login", "/login?token=wrong"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s: %d without login", p, resp.StatusCode)
		}
	}
}

func loggedIn(t *testing.T, srv *httptest.Server) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(srv.URL + "/login?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "<title>paddock</title>") || resp.Request.URL.RawQuery != "" {
		t.Fatalf("login: %d %s (landed on %s)", resp.StatusCode, b, resp.Request.URL)
	}
	return c
}

func TestLoginCookieAndPages(t *testing.T) {
	srv, fb := setup(t)
	c := loggedIn(t, srv)
	u, _ := http.NewRequest("GET", srv.URL, nil)
	for _, ck := range c.Jar.Cookies(u.URL) {
		if ck.Name == CookieName && strings.Contains(ck.Value, tok) {
			t.Fatal("the cookie holds the login token")
		}
	}
	resp, _ := c.Get(srv.URL + "/vendor/xterm.js")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) < 100000 || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("xterm.js: %d %d bytes", resp.StatusCode, len(b))
	}
	resp, _ = c.Get(srv.URL + "/api/sessions")
	var rows []Row
	json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	if len(rows) != 1 || rows[0].Name != "demo" || rows[0].TokensUsed != 42 {
		t.Fatalf("%+v", rows)
	}
	// Changes need the X-Paddock header: a cross-site form cannot send it.
	resp, _ = c.Post(srv.URL+"/api/sessions", "application/json", strings.NewReader(`{"name":"x"}`))
	resp.Body.Close()
	if resp.StatusCode != 403 || len(fb.created) != 0 {
		t.Fatalf("POST without the header: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/api/sessions", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("X-Paddock", "1")
	resp, _ = c.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(fb.created) != 1 || fb.created[0].Name != "x" {
		t.Fatalf("POST: %d %+v", resp.StatusCode, fb.created)
	}
}

func TestTerminalSocket(t *testing.T) {
	srv, fb := setup(t)
	c := loggedIn(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/sessions/demo/terminal?role=driver&rows=24&cols=80"
	// Another origin is refused.
	if _, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {"http://evil.test"}}}); err == nil {
		t.Fatal("a cross-origin socket was accepted")
	}
	conn, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, first, err := conn.Read(ctx)
	if err != nil || string(first) != "snapshot" {
		t.Fatalf("%q %v", first, err)
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"t":"i","d":"ls\r"}`))
	_, echo, err := conn.Read(ctx)
	if err != nil || string(echo) != "echo:ls\r" {
		t.Fatalf("%q %v", echo, err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.part.keys) != 1 {
		t.Fatal(fb.part.keys)
	}
}
