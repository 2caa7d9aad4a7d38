package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// artifactDir is where the browser test leaves its screenshots
// (PADDOCK_ARTIFACTS, or artifacts/ at the top of the repository).
func artifactDir(t *testing.T) string {
	d := os.Getenv("PADDOCK_ARTIFACTS")
	if d == "" {
		d = filepath.Join("..", "..", "..", "artifacts")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// terminalText is what xterm.js draws, as text.
const terminalText = `(document.querySelector('.xterm-rows') || {innerText: ''}).innerText`

func waitTerminal(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var text string
	for time.Now().Before(deadline) {
		var err error
		if text, err = chromedp.Run(ctx, chromedp.Evaluate[string](terminalText)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the page's terminal never showed %q:\n%s", want, text)
}

// TestWebPageInChromium: log in with the printed URL, open a session, type
// a prompt, see the fake upstream's answer drawn; an observer tab sees it
// too and cannot type, and has no message box nor the key row's keys.
// Screenshots are saved as artifacts.
func TestWebPageInChromium(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	e := newEnv(t)
	name := "web"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	login := strings.TrimSpace(e.pd("web")) // a one-time login URL
	base := login[:strings.Index(login, "/login")]

	ctx := newBrowser(t, chromium)

	// Without the login there is no page.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "not logged in") {
		t.Fatalf("a page without login: %q", body)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+name+`"]`))); err != nil {
		t.Fatalf("the session list: %v", err)
	}
	screenshot(t, ctx, "web-sessions.png")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+name), chromedp.WaitVisible(chromedp.CSS(".xterm-rows"))); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, ctx, "bypass permissions on")
	typeInto(t, ctx, "say hi\r")
	waitTerminal(t, ctx, "hi from the fake server (turn 1)")
	waitTerminal(t, ctx, "❯ say hi") // typed once, as typed
	screenshot(t, ctx, "web-driver.png")

	// An observer in another tab sees it and cannot type.
	octx, ocancel := chromedp.NewContext(ctx)
	defer ocancel()
	if err := chromedp.Do(octx, chromedp.Navigate(base+"/#/s/"+name+"/observer"), chromedp.WaitVisible(chromedp.CSS(".xterm-rows"))); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, octx, "hi from the fake server (turn 1)")
	typeInto(t, octx, "observer was here\r")
	time.Sleep(time.Second)
	if s := e.screen(name); strings.Contains(s, "observer was here") {
		t.Fatalf("the observer's keys reached claude:\n%s", s)
	}
	// Nor is it offered a message box or the key row's keys.
	if v, _ := chromedp.Run(octx, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("message")).display + " " + document.querySelector('#keys [data-key="esc"]').disabled`)); v != "none true" {
		t.Fatalf("the observer's message box and keys: %q", v)
	}
	screenshot(t, octx, "web-observer.png")

	// The list shows what claude does, live: waiting once its turn is over.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+name+`"]`))); err != nil {
		t.Fatal(err)
	}
	waitRow(t, ctx, name, "waiting")

	// A new session from the page's form, with a first task: claude starts
	// with it, and it is the first user message upstream.
	const task = "WEBTASK-5531 say hi"
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#create input[name="name"]`), "webtask"),
		chromedp.SetValue(chromedp.CSS(`#create select[name="backend"]`), "local"),
		chromedp.SetValue(chromedp.CSS(`#create textarea[name="prompt"]`), task),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="webtask"]`))); err != nil {
		t.Fatalf("the new-session form: %v", err)
	}
	defer e.pdRun("rm", "-f", "webtask")
	e.waitScreen("webtask", "hi from the fake server (turn 1)", 60*time.Second)
	found := false
	for _, r := range e.fake.Requests() {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) == nil && len(body.Messages) > 0 && body.Messages[0].Role == "user" &&
			strings.Contains(string(body.Messages[0].Content), task) {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("the page's first task is not the first user message upstream")
	}
	screenshot(t, ctx, "web-new-session.png")

	// Log out: the page says how to log in again, and the cookie is dead.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#logout`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if err == nil && strings.Contains(body, "paddock web") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after log out the page says %q", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	if body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(body, "not logged in") {
		t.Fatalf("logged out, the page still shows: %q", body)
	}
	// The login URL was good once.
	if err := chromedp.Do(ctx, chromedp.Navigate(login)); err != nil {
		t.Fatal(err)
	}
	if body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(body, "used or expired") {
		t.Fatalf("the login URL worked twice: %q", body)
	}
	e.pd("rm", "-f", name)
}

// newBrowser starts a headless Chromium for the test, with a tab open,
// for 2 minutes at most; it ends with the test.
func newBrowser(t *testing.T, chromium string, extra ...chromedp.ExecAllocatorOption) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	opts = append(opts, extra...)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitRow waits until the session list's row of name holds want.
func waitRow(t *testing.T, ctx context.Context, name, want string) {
	t.Helper()
	var text string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		var err error
		text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-name="`+name+`"]`)))
		if err == nil && strings.Contains(text, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the row of %s never showed %q: %q", name, want, text)
}

// typeInto types into the page's terminal as a user does: the text is
// inserted into xterm.js's input element, and Enter is a key press.
func typeInto(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(".xterm-helper-textarea"))); err != nil {
		t.Fatal(err)
	}
	words, enter := strings.CutSuffix(text, "\r")
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: words}); err != nil {
		t.Fatal(err)
	}
	if enter {
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(".xterm-helper-textarea"), "\r")); err != nil {
			t.Fatal(err)
		}
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
