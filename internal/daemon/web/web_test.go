package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
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

func (f *fakeBackend) Sessions(ctx context.Context) ([]session.Session, error) {
	// Each person sees a session named after them: the page asks as the
	// cookie's user.
	p, ok := people.From(ctx)
	if !ok {
		return nil, errdefs.ErrForbidden
	}
	return []session.Session{{ID: "abc123abc123", Name: "demo-" + p.Name, Observed: session.Running, Backend: "local", Egress: "offline"}}, nil
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

// site is the page served for a test, with its Server to mint logins.
type site struct {
	*httptest.Server
	s *Server
}

// gone lists uids taken out of the Runner's group (who refuses them).
var gone sync.Map

func who(uid uint32) (people.Person, error) {
	if _, out := gone.Load(uid); out {
		return people.Person{}, fmt.Errorf("uid %d is not in group \"team\": %w", uid, errdefs.ErrForbidden)
	}
	return people.Person{UID: uid, Name: fmt.Sprintf("u%d", uid)}, nil
}

func setup(t *testing.T) (*site, *fakeBackend) {
	fb := &fakeBackend{}
	return siteWith(t, fb), fb
}

// siteWith serves the page of b for the test.
func siteWith(t *testing.T, b Backend) *site {
	s := New(b, who, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &site{srv, s}
}

// newLogin mints a login URL, as `paddock web` asks the Runner to.
func (st *site) newLogin(t *testing.T) string {
	return st.newLoginFor(t, 1000)
}

// newLoginFor mints a login URL bound to uid.
func (st *site) newLoginFor(t *testing.T, uid uint32) string {
	t.Helper()
	tok, err := st.s.NewLogin(uid)
	if err != nil {
		t.Fatal(err)
	}
	return st.URL + "/login?token=" + tok.Reveal()
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

func loggedIn(t *testing.T, srv *site) *http.Client { return loggedInAs(t, srv, 1000) }

// loggedInAs logs a client in as uid, as a browser does, and has it send
// the page's key on every request, as the page's script does (pageKey).
func loggedInAs(t *testing.T, srv *site, uid uint32) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(srv.newLoginFor(t, uid))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	k := keyIn(string(b))
	if resp.StatusCode != 200 || !strings.Contains(string(b), "<title>paddock</title>") || k == "" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("login: %d %s", resp.StatusCode, b)
	}
	c.Transport = keyed{k}
	return c
}

// keyed sends the page's key on every request.
type keyed struct{ key string }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(KeyHeader, k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// pageKey is the key a loggedIn client sends.
func pageKey(c *http.Client) string { return c.Transport.(keyed).key }

// cookieOnly is c's cookie without its key: what a page on another
// loopback port is sent.
func cookieOnly(c *http.Client) *http.Client { return &http.Client{Jar: c.Jar} }

// socketWith dials the terminal as the page does: the cookie, and the key
// as a subprotocol.
func socketWith(c *http.Client, origin string) *websocket.DialOptions {
	return &websocket.DialOptions{HTTPClient: cookieOnly(c), HTTPHeader: http.Header{"Origin": {origin}},
		Subprotocols: []string{"paddock", "paddock.key." + pageKey(c)}}
}

func TestLoginCookieAndPages(t *testing.T) {
	srv, fb := setup(t)
	c := loggedIn(t, srv)
	u, _ := http.NewRequest("GET", srv.URL, nil)
	for _, ck := range c.Jar.Cookies(u.URL) {
		if ck.Name == CookieName && ck.Value == "" {
			t.Fatalf("cookie %+v", ck)
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
	if len(rows) != 1 || rows[0].Name != "demo-u1000" || rows[0].TokensUsed != 42 {
		t.Fatalf("%+v", rows)
	}
	// Changes need the X-Paddock header: a cross-site form cannot send it.
	resp, _ = c.Post(srv.URL+"/api/sessions", "application/json", strings.NewReader(`{"name":"x"}`))
	resp.Body.Close()
	if resp.StatusCode != 403 || len(fb.created) != 0 {
		t.Fatalf("POST without the header: %d", resp.StatusCode)
	}
	// A cross-site form's rm (or anything else that changes): refused too.
	for _, m := range [][2]string{{"DELETE", "/api/sessions/x"}, {"POST", "/api/sessions/x/sleep"}, {"POST", "/logout"}} {
		r, _ := http.NewRequest(m[0], srv.URL+m[1], nil)
		resp, _ = c.Do(r)
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("%s %s without the header: %d", m[0], m[1], resp.StatusCode)
		}
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
	if _, _, err := websocket.Dial(ctx, ws, socketWith(c, "http://evil.test")); err == nil {
		t.Fatal("a cross-origin socket was accepted")
	}
	conn, _, err := websocket.Dial(ctx, ws, socketWith(c, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != "paddock" {
		t.Fatalf("subprotocol %q: the server must pick \"paddock\", never echo the key", conn.Subprotocol())
	}
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

// TestLoginOnce: a login URL logs one browser in, once, within LoginTTL;
// a second use, an expired one and a made-up one get 401 and no cookie.
func TestLoginOnce(t *testing.T) {
	srv, _ := setup(t)
	noFollow := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	get := func(c *http.Client, u string) int {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 401 && !strings.Contains(string(b), "paddock web") {
			t.Errorf("a refused login does not say what to do: %s", b)
		}
		return resp.StatusCode
	}
	login := srv.newLogin(t)
	if st := get(noFollow(), login); st != http.StatusOK {
		t.Fatalf("first use: %d", st)
	}
	if st := get(noFollow(), login); st != 401 {
		t.Fatalf("second use: %d", st)
	}
	late := srv.newLogin(t)
	srv.s.mu.Lock()
	srv.s.now = func() time.Time { return time.Now().Add(LoginTTL + time.Second) }
	srv.s.mu.Unlock()
	if st := get(noFollow(), late); st != 401 {
		t.Fatalf("an expired login: %d", st)
	}
	if st := get(noFollow(), srv.URL+"/login?token="); st != 401 {
		t.Fatalf("an empty token: %d", st)
	}
}

// TestCookieLifetimeAndLogout: the cookie ends after CookieTTL, and at
// logout, for good (the server forgets it, not only the browser).
func TestCookieLifetimeAndLogout(t *testing.T) {
	srv, _ := setup(t)
	status := func(c *http.Client) int {
		resp, err := c.Get(srv.URL + "/api/sessions")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	c := loggedIn(t, srv)
	if st := status(c); st != 200 {
		t.Fatalf("logged in: %d", st)
	}
	u, _ := url.Parse(srv.URL)
	cookies := c.Jar.Cookies(u)
	// Logout needs the X-Paddock header like every change.
	resp, _ := c.Post(srv.URL+"/logout", "", nil)
	resp.Body.Close()
	if resp.StatusCode != 403 || status(c) != 200 {
		t.Fatalf("logout without the header: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/logout", nil)
	req.Header.Set("X-Paddock", "1")
	resp, _ = c.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 200 || status(c) != 401 {
		t.Fatalf("after logout: %d, then %d", resp.StatusCode, status(c))
	}
	// The old cookie, kept by a copy of the browser with its key, is dead too.
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, cookies)
	if st := status(&http.Client{Jar: jar, Transport: c.Transport}); st != 401 {
		t.Fatalf("the logged-out cookie still works: %d", st)
	}
	c = loggedIn(t, srv)
	srv.s.mu.Lock()
	srv.s.now = func() time.Time { return time.Now().Add(CookieTTL + time.Second) }
	srv.s.mu.Unlock()
	if st := status(c); st != 401 {
		t.Fatalf("a cookie past its lifetime: %d", st)
	}
}

// TestCheckHost: only the listener's own names are served.
func TestCheckHost(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	srv := httptest.NewServer(nil)
	defer srv.Close()
	srv.Config.Handler = CheckHost(srv.Listener.Addr(), ok)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	for host, want := range map[string]int{
		srv.Listener.Addr().String(): 204,
		"localhost" + port:           204,
		"LOCALHOST" + port:           204,
		"evil.example":               http.StatusMisdirectedRequest,
		"evil.example" + port:        http.StatusMisdirectedRequest,
		"127.0.0.1:1":                http.StatusMisdirectedRequest,
		"localhost":                  http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
	// On every address (web.listen 0.0.0.0:PORT, over TLS): its names
	// (web.hosts) and this host's loopback, nothing else.
	h := CheckHost(&net.TCPAddr{IP: net.IPv4zero, Port: 7777}, ok, "paddock.example.com")
	for host, want := range map[string]int{
		"paddock.example.com:7777": 204, "PADDOCK.example.com:7777": 204, "localhost:7777": 204, "127.0.0.1:7777": 204,
		"paddock.example.com": http.StatusMisdirectedRequest, "evil.example:7777": http.StatusMisdirectedRequest,
		"paddock.example.com:7778": http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest("GET", "/healthz", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("on 0.0.0.0, Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

// TestOriginBeforeAttach: a cross-origin terminal socket is refused before
// anyone joins the session's terminal.
func TestOriginBeforeAttach(t *testing.T) {
	srv, fb := setup(t)
	c := loggedIn(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/sessions/demo/terminal?role=driver"
	if _, _, err := websocket.Dial(ctx, ws, socketWith(c, "http://evil.test")); err == nil {
		t.Fatal("a cross-origin socket was accepted")
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.part != nil {
		t.Fatal("a cross-origin request joined the terminal before it was refused")
	}
}

// TestCookieIsTheUsers: each login is bound to the user `paddock web` was
// asked by; the page asks the Runner as that user, and a user taken out
// of the group is refused at their next request.
func TestCookieIsTheUsers(t *testing.T) {
	srv, _ := setup(t)
	ann, ben := loggedInAs(t, srv, 2001), loggedInAs(t, srv, 2002)
	list := func(c *http.Client) (int, string) {
		resp, err := c.Get(srv.URL + "/api/sessions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := list(ann); code != 200 || !strings.Contains(body, "demo-u2001") || strings.Contains(body, "u2002") {
		t.Fatalf("ann's list: %d %s", code, body)
	}
	if code, body := list(ben); code != 200 || !strings.Contains(body, "demo-u2002") {
		t.Fatalf("ben's list: %d %s", code, body)
	}
	// A forged user in a header or the query changes nothing.
	req, _ := http.NewRequest("GET", srv.URL+"/api/sessions?user=u2001&uid=2001", nil)
	req.Header.Set("X-Paddock-User", "u2001")
	resp, err := ben.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "u2001") {
		t.Fatalf("a forged user was believed: %s", b)
	}
	gone.Store(uint32(2002), true)
	defer gone.Delete(uint32(2002))
	if code, body := list(ben); code != 403 || !strings.Contains(body, "not in group") {
		t.Fatalf("ben out of the group: %d %s", code, body)
	}
	if code, _ := list(ann); code != 200 {
		t.Fatalf("ann after ben left: %d", code)
	}
}
