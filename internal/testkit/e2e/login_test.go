package e2e

import (
	"bufio"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/testkit/fakeoauth"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// loginCLI runs paddock credential login as a person does: it prints a
// URL; the "browser" (the fake server's Authorize) shows a code; the code
// is pasted on stdin.
func (e *env) loginCLI(fs *fakeoauth.Server) string {
	e.t.Helper()
	cmd := exec.Command(e.bin, "--state-dir", e.dir, "credential", "login")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdin, _ := cmd.StdinPipe()
	stderr, _ := cmd.StderrPipe()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	var said strings.Builder
	url := ""
	for url == "" {
		line, err := br.ReadString('\n')
		said.WriteString(line)
		if err != nil {
			e.t.Fatalf("credential login printed no URL: %v\n%s", err, said.String())
		}
		if u := strings.TrimSpace(line); strings.HasPrefix(u, "http") {
			url = u
		}
	}
	shown, err := fs.Authorize(url)
	if err != nil {
		e.t.Fatalf("the login page: %v", err)
	}
	io.WriteString(stdin, shown+"\n")
	stdin.Close()
	rest, _ := io.ReadAll(br)
	said.Write(rest)
	if err := cmd.Wait(); err != nil {
		e.t.Fatalf("credential login: %v\n%s%s", err, said.String(), out.String())
	}
	return said.String() + out.String()
}

// TestLoginRefreshedByTheRunner: paddock credential login against a fake
// OAuth server; the real Claude Code works turns while the Runner
// refreshes the login (access tokens of 4 s here), with no 401 upstream;
// the Runner killed with -9 at random moments of its refreshing leaves a
// whole login each time, and the session goes on after each restart.
func TestLoginRefreshedByTheRunner(t *testing.T) {
	fs := fakeoauth.New(oauth.Claude.ClientID, oauth.Claude.RedirectURL)
	fs.AccessTTL = 4 * time.Second
	os_ := httptest.NewServer(fs)
	t.Cleanup(os_.Close)
	e := newEnv(t, "[credential.oauth]", `authorize_url = "`+os_.URL+`/oauth/authorize"`, `token_url = "`+os_.URL+`/v1/oauth/token"`)
	e.fake.Validate = fs.Validate

	out := e.loginCLI(fs)
	for _, want := range []string{"Open this URL in a browser", "paste the code", "paddock is logged in"} {
		if !strings.Contains(out, want) {
			t.Fatalf("credential login said:\n%s", out)
		}
	}
	if st := e.pd("credential", "status"); !strings.Contains(st, "source:      paddock-login:") || !strings.Contains(st, "login:       paddock's own") {
		t.Fatalf("credential status:\n%s", st)
	}
	name := "logged"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 60*time.Second)
	for turn := 1; turn <= 3; turn++ {
		e.typeLine(name, "say hi")
		e.waitScreen(name, "hi from the fake server (turn "+string(rune('0'+turn))+")", 60*time.Second)
		time.Sleep(3 * time.Second) // across at least one refresh
	}
	if fs.Refreshes() < 2 {
		t.Fatalf("%d refreshes in ~10 s of 4 s tokens", fs.Refreshes())
	}
	for _, r := range e.fake.Requests() {
		if r.Status == 401 {
			t.Fatalf("an upstream 401: %s %s", r.Method, r.Path)
		}
		if r.Path == "/v1/messages" && !strings.HasPrefix(r.Credential, fakeoauth.AccessPrefix) {
			t.Fatalf("a request went out with another credential than the login's")
		}
	}

	// kill -9 while it refreshes every ~0.4 s: a whole login every time.
	for i := range 5 {
		time.Sleep(time.Duration(300+i*170) * time.Millisecond)
		e.stop(syscall.SIGKILL)
		st, err := (oauth.Store{Path: filepath.Join(e.dir, "login.json")}).Load()
		if err != nil {
			t.Fatalf("kill %d: the stored login: %v", i, err)
		}
		if known, _ := fs.Validate(st.Access.Reveal()); !known {
			t.Fatalf("kill %d: the stored token is not one the server issued", i)
		}
		e.start()
	}
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server (turn 4)", 60*time.Second)
	// What a kill left mid-save is gone once the Runner is back.
	if left, _ := filepath.Glob(filepath.Join(e.dir, ".login.json.tmp*")); len(left) > 0 {
		t.Fatalf("a restarted Runner left %d temporary login files", len(left))
	}
	if st := e.pd("credential", "status"); strings.Contains(st, "FAILING") || strings.Contains(st, "DEAD") {
		t.Fatalf("after the kills:\n%s", st)
	}
	e.pd("rm", "-f", name)

	// Revoked: credential status says so, and what to do.
	fs.RevokeAll()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := e.pd("credential", "status")
		if strings.Contains(st, "LOGIN DEAD") && strings.Contains(st, "paddock credential login") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revoked login, credential status says:\n%s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLoginThroughTheWebPage: an admin logs paddock in from the web page in
// Chromium: the page hands out the login URL, takes the code back, and
// then shows the login's state.
func TestLoginThroughTheWebPage(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	fs := fakeoauth.New(oauth.Claude.ClientID, oauth.Claude.RedirectURL)
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	e := newEnv(t, "[credential.oauth]", `authorize_url = "`+srv.URL+`/oauth/authorize"`, `token_url = "`+srv.URL+`/v1/oauth/token"`)
	login := strings.TrimSpace(e.pd("web"))
	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#loginStart")),
		chromedp.Click(chromedp.CSS("#loginStart")), chromedp.WaitVisible(chromedp.CSS("#loginCode"))); err != nil {
		t.Fatalf("the page's login: %v", err)
	}
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#loginURL").href`))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := fs.Authorize(href)
	if err != nil {
		t.Fatalf("the URL the page gave: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#loginCode"), shown), chromedp.Click(chromedp.CSS(`#loginForm button`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#login")))
		if strings.Contains(text, "paddock's own, refreshed by the Runner") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the login the page says %q", text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	screenshot(t, ctx, "web-login.png")
	if st := e.pd("credential", "status"); !strings.Contains(st, "paddock-login:") {
		t.Fatalf("credential status after the page's login:\n%s", st)
	}
	if fs.Exchanges() != 1 {
		t.Fatalf("%d exchanges", fs.Exchanges())
	}
}
