package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// previewBackend is fakeBackend with ports: box port 5173 of session
// "abc123abc123" is published and served by app, 8080 by app2; uid 1001
// may not open previews.
type previewBackend struct {
	fakeBackend
	app, app2 *httptest.Server
	dials     []string // as whom each connection was dialled
}

func (f *previewBackend) EnterPreview(ctx context.Context, ref string, box int) (session.Session, error) {
	p, _ := people.From(ctx)
	if p.UID == 1001 {
		return session.Session{}, fmt.Errorf("u1001 is an observer of session \"demo\", and opening its previews needs driver: %w", errdefs.ErrForbidden)
	}
	return session.Session{ID: "abc123abc123", Name: "demo", Ports: []session.Port{{Box: 5173, Host: 40000}, {Box: 8080, Host: 40001}}}, nil
}

func (f *previewBackend) DialPort(ctx context.Context, ref string, box int) (net.Conn, error) {
	p, ok := people.From(ctx)
	if !ok {
		return nil, errdefs.ErrForbidden
	}
	f.mu.Lock()
	f.dials = append(f.dials, p.Name)
	f.mu.Unlock()
	app := f.app
	if box == 8080 {
		app = f.app2
	}
	return net.Dial("tcp", app.Listener.Addr().String())
}

func boxApp(name string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "served by %s", name) })
	mux.HandleFunc("GET /request", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s\ncookie=%s\nkey=%s\n", r.Host, r.Header.Get("Cookie"), r.Header.Get(KeyHeader))
	})
	mux.HandleFunc("GET /setcookies", func(w http.ResponseWriter, _ *http.Request) {
		for _, c := range []string{CookieName + "=evil; Path=/", previewCookiePrefix + "1=evil", "app=ok; Path=/", CookieName + "=x; Path=/; Max-Age=bogus"} {
			w.Header().Add("Set-Cookie", c)
		}
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, b, err := c.Read(r.Context())
		if err == nil {
			_ = c.Write(r.Context(), typ, append([]byte("echo: "), b...))
		}
	})
	return httptest.NewServer(mux)
}

// previewLinkFor asks the page for a preview link as c: the link, or the
// refusal's status and body.
func previewLinkFor(t *testing.T, srv *site, c *http.Client, port int) (int, string) {
	t.Helper()
	code, body := post(t, c, fmt.Sprintf("%s/api/sessions/demo/preview/%d", srv.URL, port), "")
	var out map[string]string
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil {
		return code, body
	}
	return 200, out["url"]
}

// pget is get without the content type.
func pget(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	code, _, body := get(t, c, u)
	return code, body
}

// TestPreview: a preview is entered with a one-time link from the page's
// login, on an origin of its own (not the page's port, one per session
// and port); through it the box's app is served at "/" with WebSockets;
// paddock's cookies and the page's key never reach the box; every
// connection to the box is dialled as the person; and nothing is served
// without the preview's own cookie, with another preview's cookie, with a
// used link, to someone who may not, or for another Host.
func TestPreview(t *testing.T) {
	fb := &previewBackend{app: boxApp("app"), app2: boxApp("app2")}
	defer fb.app.Close()
	defer fb.app2.Close()
	s := New(fb, who, nil)
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.SetPreviewHost(ln.Addr())
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: CheckHost(ln.Addr(), s.Handler())}}
	hs.Start()
	defer hs.Close()
	srv := &site{hs, s}
	c := loggedIn(t, srv)

	code, link := previewLinkFor(t, srv, c, 5173)
	if code != 200 {
		t.Fatalf("preview link: %d %s", code, link)
	}
	u, _ := url.Parse(link)
	page, _ := url.Parse(srv.URL)
	if u.Hostname() != page.Hostname() || u.Port() == page.Port() || u.Path != "/.paddock/enter" {
		t.Fatalf("the preview %s is not on an origin of its own beside the page %s", link, srv.URL)
	}
	if code, body := previewLinkFor(t, srv, c, 9999); code != 404 || !strings.Contains(body, "paddock port demo 9999") {
		t.Fatalf("a port not published: %d %s", code, body)
	}

	// A browser: the page's cookie jar (it sends the page's cookie to
	// every port of the host) and no key: a preview's origin has none.
	b := cookieOnly(c)
	if code, body := pget(t, b, link); code != 200 || body != "served by app" {
		t.Fatalf("entering the preview: %d %q", code, body)
	}
	// Entering clears what an earlier box on this origin may have left.
	noFollow := &http.Client{Jar: b.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	{
		_, l2 := previewLinkFor(t, srv, c, 5173)
		resp, err := noFollow.Get(l2)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Clear-Site-Data") != `"storage"` {
			t.Fatalf("entering: %d, Clear-Site-Data %q", resp.StatusCode, resp.Header.Get("Clear-Site-Data"))
		}
	}
	if code, body := pget(t, b, link); code != 401 || !strings.Contains(body, "used, expired") {
		t.Fatalf("a used link: %d %q", code, body)
	}
	root := u.Scheme + "://" + u.Host
	b.Jar.SetCookies(u, []*http.Cookie{{Name: "app_session", Value: "kept", Path: "/"}})
	code, body := pget(t, b, root+"/request")
	if code != 200 || !strings.Contains(body, "host="+u.Host) || !strings.Contains(body, "cookie=app_session=kept\n") || !strings.Contains(body, "key=\n") {
		t.Fatalf("what the box's app got: %d %q (want its own cookie only, the browser's Host, no key)", code, body)
	}
	if strings.Contains(body, CookieName) || strings.Contains(body, previewCookiePrefix) {
		t.Fatalf("paddock's cookies reached the box: %q", body)
	}
	// The box may set its own cookies, never one of paddock's names.
	sc, err := b.Get(root + "/setcookies")
	if err != nil {
		t.Fatal(err)
	}
	sc.Body.Close()
	if got := sc.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "app=ok; Path=/" {
		t.Fatalf("the box's Set-Cookie through the preview: %q", got)
	}
	// A key sent by a client that has one does not reach the box either.
	req, _ := http.NewRequest("GET", root+"/request", nil)
	req.Header.Set(KeyHeader, pageKey(c))
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(kb), pageKey(c)) {
		t.Fatalf("the page's key reached the box: %q", kb)
	}

	// The WebSocket of a dev server's hot reload.
	ws, _, err := websocket.Dial(context.Background(), "ws://"+u.Host+"/ws", &websocket.DialOptions{HTTPClient: b})
	if err != nil {
		t.Fatalf("websocket through the preview: %v", err)
	}
	_ = ws.Write(context.Background(), websocket.MessageText, []byte("hmr"))
	_, got, err := ws.Read(context.Background())
	ws.CloseNow()
	if err != nil || string(got) != "echo: hmr" {
		t.Fatalf("websocket echo: %q %v", got, err)
	}

	// No cookie: nothing, and a message that says where to log in.
	if code, body := pget(t, &http.Client{}, root+"/"); code != 401 || !strings.Contains(body, "paddock web") {
		t.Fatalf("without the preview's cookie: %d %q", code, body)
	}
	// Another preview (box port 8080) is another origin; this one's
	// cookie opens nothing there.
	_, link2 := previewLinkFor(t, srv, c, 8080)
	u2, _ := url.Parse(link2)
	if u2.Port() == u.Port() {
		t.Fatal("two previews share an origin")
	}
	if code, _ := pget(t, b, "http://"+u2.Host+"/"); code != 401 {
		t.Fatalf("one preview's cookie on another preview: %d", code)
	}
	// The same preview again gives the same origin.
	if _, again := previewLinkFor(t, srv, c, 5173); !strings.HasPrefix(again, root+"/") {
		t.Fatalf("the same preview moved: %s then %s", link, again)
	}
	// A rebinding name is refused.
	req, _ = http.NewRequest("GET", root+"/", nil)
	req.Host = "evil.example.com:" + u.Port()
	if resp, err := b.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another Host: %v %v", resp, err)
	}
	// Someone who may not open previews gets no link.
	if code, body := previewLinkFor(t, srv, loggedInAs(t, srv, 1001), 5173); code != 403 || !strings.Contains(body, "needs driver") {
		t.Fatalf("an observer's preview link: %d %s", code, body)
	}
	// Each connection to the box was dialled as the person.
	fb.mu.Lock()
	for _, d := range fb.dials {
		if d != "u1000" {
			t.Fatalf("a connection to the box dialled as %q", d)
		}
	}
	fb.mu.Unlock()
	// A person taken out of the Runner's group is refused at once.
	gone.Store(uint32(1000), true)
	defer gone.Delete(uint32(1000))
	if code, _ := pget(t, b, root+"/"); code != 403 {
		t.Fatalf("a person no longer in the group: %d", code)
	}
}
