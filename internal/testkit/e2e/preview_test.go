package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// startPreviewServer puts the tests' dev server in the session's box and
// runs it on port (until the test ends), as claude's Bash tool would.
func (e *env) startPreviewServer(name, port string) {
	e.t.Helper()
	bin, err := os.ReadFile(testenv.PreviewServer(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	dst := sandbox.HomeDir + "/previewsrv"
	e.execStdin(name, string(bin), "sh", "-c", "cat > "+dst+" && chmod 0755 "+dst)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		mainWithStdin(ctx, e, "", io.Discard, "exec", name, "--", dst, "-port", port)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// httpBody GETs u until it answers with want (20 s), or fails the test.
func httpBody(t *testing.T, u, want string) string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(u)
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if last = string(b); strings.Contains(last, want) {
			return last
		}
	}
	t.Fatalf("%s never answered %q: %s", u, want, last)
	return ""
}

// TestPreviewInChromium: on the local and docker backends (kubernetes:
// TestPreviewOnKubernetes), a dev server started in a box answers through
// paddock port on the host, and through the web page's "open preview"
// button in Chromium: its page, on an origin of its own, and a WebSocket
// echo through it; once the session sleeps nothing answers.
//
// Over TLS (a page by name with its self-signed certificate, on local),
// the preview is served over TLS too, by the page's name, on its own
// origin, with a Secure cookie.
func TestPreviewInChromium(t *testing.T) {
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) { previewInChromium(t, newEnv(t), backend, false) })
	}
	t.Run("tls", func(t *testing.T) {
		previewInChromium(t, newEnvOpts(t, envOpts{web: "tls = \"self-signed\"\nhosts = [\"paddock.test\"]\n"}), "local", true)
	})
}

// previewInChromium is TestPreviewInChromium's check on one backend of e,
// whose page is served over TLS by the name paddock.test when overTLS.
func previewInChromium(t *testing.T, e *env, backend string, overTLS bool) {
	chromium := testenv.LookPath(t, "chromium")
	name := "pv"
	e.pd("run", "-d", "--name", name, "--backend", backend)
	e.waitScreen(name, promptReady, 30*time.Second)
	e.startPreviewServer(name, "5173")
	out, errs, code := e.pdRun("port", name, "5173")
	if code != 0 || !strings.HasPrefix(out, "http://127.0.0.1:") || !strings.Contains(errs, "box port 5173 of pv answers on") {
		t.Fatalf("paddock port: %d %q %q", code, out, errs)
	}
	hostURL := strings.TrimSpace(out)
	httpBody(t, hostURL+"/", "served from the box")
	if ls := e.pd("port", "ls", name); !strings.Contains(ls, "open: "+hostURL) {
		t.Fatalf("paddock port ls: %s", ls)
	}

	login := strings.TrimSpace(e.pd("web"))
	base := login[:strings.Index(login, "/login")]
	ctx, origin := newBrowser(t, chromium), "http://127.0.0.1:"
	if overTLS {
		ctx, origin = pinnedBrowser(t, e), "https://paddock.test:"
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+name+`"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+name), chromedp.WaitVisible(chromedp.CSS(`button.preview[data-port="5173"]`))); err != nil {
		t.Fatalf("the preview button: %v", err)
	}
	opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return i.Type == "page" && i.URL != "" && i.URL != "about:blank" })
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button.preview[data-port="5173"]`))); err != nil {
		t.Fatal(err)
	}
	var id target.ID
	select {
	case id = <-opened:
	case <-time.After(30 * time.Second):
		t.Fatal("the preview button opened no tab")
	}
	pctx, pcancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	defer pcancel()
	if err := chromedp.Do(pctx, chromedp.WaitVisible(chromedp.CSS("#served"))); err != nil {
		t.Fatalf("the preview's page: %v", err)
	}
	var echo, loc string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if echo, err = chromedp.Run(pctx, chromedp.Text(chromedp.CSS("#echo"))); err == nil && strings.HasPrefix(echo, "echo: ") {
			break
		}
	}
	if echo != "echo: ping through the preview" {
		t.Fatalf("the WebSocket through the preview: %q", echo)
	}
	loc, _ = chromedp.Run(pctx, chromedp.Evaluate[string](`location.origin`))
	if strings.HasPrefix(base, loc) || !strings.HasPrefix(loc, origin) {
		t.Fatalf("the preview's origin %q is the page's (%s)", loc, base)
	}
	// The preview's origin holds nothing of the page's: no key.
	if k, _ := chromedp.Run(pctx, chromedp.Evaluate[string](`JSON.stringify(Object.keys(localStorage))`)); k != "[]" {
		t.Fatalf("the preview's origin has storage: %s", k)
	}
	if overTLS { // its cookie is Secure, as the page's
		cs, err := chromedp.Call(pctx, network.GetCookies, network.GetCookiesParams{})
		if err != nil {
			t.Fatal(err)
		}
		secure := 0
		for _, c := range cs.Cookies {
			if strings.HasPrefix(c.Name, "paddock_preview_") && c.Secure && c.HTTPOnly {
				secure++
			}
		}
		if secure == 0 {
			t.Fatalf("the preview's cookie over TLS: %+v", cs.Cookies)
		}
		backend = "tls"
	}
	screenshot(t, pctx, "web-preview-"+backend+".png")

	// Asleep: neither the host port nor the preview answers.
	e.pd("sleep", name)
	if resp, err := http.Get(hostURL + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("the host port answers while the session sleeps: %d", resp.StatusCode)
	}
	if err := chromedp.Do(pctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	body, _ := chromedp.Run(pctx, chromedp.Text(chromedp.CSS("body")))
	if strings.Contains(body, "served from the box") || !strings.Contains(body, "does not run") {
		t.Fatalf("the preview of a sleeping session: %q", body)
	}
	e.pd("rm", "-f", name)
}
