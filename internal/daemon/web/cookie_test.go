package web

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// everyRoute is a Backend with every optional feature the page serves
// (freeze, egress approval, paddock's own login, usage), which counts what
// it is asked to do.
type everyRoute struct {
	*fakeBackend
	mu    sync.Mutex
	calls []string
}

func (e *everyRoute) did(what string) {
	e.mu.Lock()
	e.calls = append(e.calls, what)
	e.mu.Unlock()
}

func (e *everyRoute) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.calls)
}

func (e *everyRoute) Sessions(ctx context.Context) ([]session.Session, error) {
	e.did("sessions")
	return e.fakeBackend.Sessions(ctx)
}
func (e *everyRoute) Session(ctx context.Context, ref string) (session.Session, error) {
	e.did("session")
	return e.fakeBackend.Session(ctx, ref)
}
func (e *everyRoute) CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	e.did("create")
	return e.fakeBackend.CreateSession(ctx, req)
}
func (e *everyRoute) Sleep(ctx context.Context, ref string) (session.Session, error) {
	e.did("sleep")
	return session.Session{}, nil
}
func (e *everyRoute) Wake(ctx context.Context, ref string) (session.Session, error) {
	e.did("wake")
	return session.Session{}, nil
}
func (e *everyRoute) RemoveSession(ctx context.Context, ref string, keep bool) (session.Session, error) {
	e.did("remove")
	return session.Session{}, nil
}
func (e *everyRoute) Logs(ctx context.Context, ref string, n int) ([]decisionlog.Entry, error) {
	e.did("logs")
	return nil, nil
}
func (e *everyRoute) Attach(ctx context.Context, ref string, req api.AttachRequest) (api.Participant, error) {
	e.did("attach")
	return e.fakeBackend.Attach(ctx, ref, req)
}
func (e *everyRoute) Freeze(ctx context.Context, ref string) (session.Session, error) {
	e.did("freeze")
	return session.Session{}, nil
}
func (e *everyRoute) EgressPending(ctx context.Context) ([]api.PendingView, error) {
	e.did("pending")
	return []api.PendingView{}, nil
}
func (e *everyRoute) ApproveEgress(ctx context.Context, ref string, req api.ApproveRequest) (api.ApproveResult, error) {
	e.did("approve")
	return api.ApproveResult{}, nil
}
func (e *everyRoute) StartLogin(ctx context.Context) (string, error) {
	e.did("start-login")
	return "https://claude.example/oauth", nil
}
func (e *everyRoute) FinishLogin(ctx context.Context, pasted string) (oauth.Status, error) {
	e.did("finish-login")
	return oauth.Status{}, nil
}
func (e *everyRoute) LoginStatus(ctx context.Context) (oauth.Status, error) {
	e.did("login-status")
	return oauth.Status{}, nil
}
func (e *everyRoute) Logout(ctx context.Context) error { e.did("logout"); return nil }
func (e *everyRoute) Usage(ctx context.Context, q api.UsageQuery) (usage.Report, error) {
	e.did("usage")
	return usage.Report{}, nil
}

// keyIn is the page's key in the login's answer (the page, with the key in
// a meta tag), or "".
func keyIn(page string) string {
	_, after, ok := strings.Cut(page, `<meta name="paddock-key" content="`)
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(after, `"`)
	return k
}

// TestCookieAloneIsNothing: the browser sends the page's cookie to every
// page on 127.0.0.1, whatever its port (cookies are not port-scoped), so a
// local user's page on another port gets root's cookie and replays it,
// with X-Paddock: 1 and whatever Origin it likes (the page's own, even).
// Every API route, each state-changing one, logout and the terminal socket
// refuse the cookie alone (401, and the Backend is asked nothing, the
// terminal never joined), refuse it with a made-up key or with another
// login's key, and serve it with the key issued with that cookie: a
// header for fetch, a subprotocol for the socket, as the page sends it.
func TestCookieAloneIsNothing(t *testing.T) {
	b := &everyRoute{fakeBackend: &fakeBackend{}}
	st := siteWith(t, b)
	hs := st.Server

	// Log in as a browser does; the key is in the login's answer only.
	login := func(uid uint32) (http.CookieJar, string) {
		jar, _ := cookiejar.New(nil)
		resp, err := (&http.Client{Jar: jar}).Get(st.newLoginFor(t, uid))
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("login: %d %s", resp.StatusCode, page)
		}
		return jar, keyIn(string(page))
	}
	rootJar, rootKey := login(0)
	_, otherKey := login(1000) // another login's key: bound to its own cookie only
	cookieOnly := &http.Client{Jar: rootJar}
	// The page's files are served for the cookie alone, but hold no key:
	// only the login's answer does.
	for _, p := range []string{"/", "/index.html", "/app.js"} {
		resp, err := cookieOnly.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (rootKey != "" && strings.Contains(string(page), rootKey)) {
			t.Fatalf("%s for the cookie alone: %d, holds the key: %v", p, resp.StatusCode, strings.Contains(string(page), rootKey))
		}
	}

	type route struct{ method, path, body string }
	routes := []route{
		{"POST", "/api/sessions", `{"name":"pwned","workspace":"/home/ann"}`},
		{"POST", "/api/sessions/demo/sleep", ""},
		{"POST", "/api/sessions/demo/freeze", ""},
		{"POST", "/api/sessions/demo/wake", ""},
		{"DELETE", "/api/sessions/demo", ""},
		{"POST", "/api/sessions/demo/egress/approve", `{"rule":"evil.example:443","scope":"session"}`},
		{"POST", "/api/login", ""},
		{"POST", "/api/login/finish", `{"code":"c#s"}`},
		{"GET", "/api/sessions", ""},
		{"GET", "/api/sessions?all_users=1", ""},
		{"GET", "/api/whoami", ""},
		{"GET", "/api/sessions/demo", ""},
		{"GET", "/api/sessions/demo/logs", ""},
		{"GET", "/api/egress/pending", ""},
		{"GET", "/api/login", ""},
		{"GET", "/api/usage", ""},
		{"POST", "/logout", ""}, // last: with the key it ends the login
	}
	// The attacker's Origins: its own page's, and the page's own forged.
	origins := []string{"http://127.0.0.1:1", hs.URL}
	do := func(rt route, origin string, key *string) (int, string) {
		req, _ := http.NewRequest(rt.method, hs.URL+rt.path, strings.NewReader(rt.body))
		req.Header.Set("X-Paddock", "1")
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		if key != nil {
			req.Header.Set("X-Paddock-Key", *key)
		}
		resp, err := cookieOnly.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	made, empty := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""

	// The terminal first (logout, below, would end the cookie): the cookie
	// alone, with the page's own Origin forged, joins nothing; a wrong key
	// neither.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(hs.URL, "http") + "/api/sessions/demo/terminal?role=driver&rows=24&cols=80"
	dial := func(protos ...string) (*websocket.Conn, int, error) {
		c, resp, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPClient: cookieOnly,
			HTTPHeader: http.Header{"Origin": {hs.URL}, "X-Paddock": {"1"}}, Subprotocols: protos})
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		return c, code, err
	}
	for _, protos := range [][]string{nil, {"paddock"}, {"paddock", "paddock.key."}, {"paddock", "paddock.key." + made}, {"paddock", "paddock.key." + otherKey}} {
		before := b.count()
		c, code, err := dial(protos...)
		if err == nil {
			c.CloseNow()
		}
		if err == nil || code != 401 || b.count() != before {
			t.Errorf("the terminal with the cookie and subprotocols %q: %d %v, the Backend was asked %d thing(s)", protos, code, err, b.count()-before)
		}
	}
	for _, rt := range routes {
		for _, o := range origins {
			for what, k := range map[string]*string{"the cookie alone": nil, "an empty key": &empty, "a made-up key": &made, "another login's key": &otherKey} {
				before := b.count()
				code, body := do(rt, o, k)
				if code != 401 || b.count() != before {
					t.Errorf("%s %s with %s (Origin %s): %d %.60q, the Backend was asked %d thing(s)", rt.method, rt.path, what, o, code, body, b.count()-before)
				} else if k == nil && !strings.Contains(body, "the cookie alone is nothing") {
					t.Errorf("%s %s: the refusal does not say why: %q", rt.method, rt.path, body)
				}
			}
		}
	}

	if t.Failed() {
		return
	}

	// With the key issued with the cookie, each is the page's own request.
	for _, rt := range routes {
		before := b.count()
		code, body := do(rt, hs.URL, &rootKey)
		asked := b.count() > before || rt.path == "/logout" || (rt.path == "/api/whoami" && strings.Contains(body, `"name":"u0"`))
		if code != 200 || !asked {
			t.Errorf("%s %s with the key: %d %q", rt.method, rt.path, code, body)
		}
	}
	// Logged out: the key is dead with its cookie.
	if code, _ := do(route{"GET", "/api/sessions", ""}, hs.URL, &rootKey); code != 401 {
		t.Errorf("after logout, the cookie and key: %d", code)
	}

	jar, key := login(0)
	cookieOnly.Jar = jar
	c, code, err := dial("paddock", "paddock.key."+key)
	if err != nil {
		t.Fatalf("the terminal with the key: %d %v", code, err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "paddock" {
		t.Fatalf("the server picked %q", c.Subprotocol())
	}
	if _, first, err := c.Read(ctx); err != nil || string(first) != "snapshot" {
		t.Fatalf("%q %v", first, err)
	}
}
