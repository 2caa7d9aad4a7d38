package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestPhoneConsole is the remote console on a phone, end to end: a
// Runner serves its page over TLS by a name; Chromium, as a phone (390 by
// 844, touch), enrols a passkey with its virtual authenticator and logs
// in. The list puts the session waiting for the person first; the person
// turns notifications on (asked once); the session page has the key row,
// whose keys reach the terminal as a terminal's bytes; a message sent
// from the page's box reaches the fake upstream; claude's curl asks to
// reach a host, the phone gets a notification and approves it from the
// list; curl gets the page; the end of the turn is another notification,
// and the page shows the turn as text; claude's exit is one too. Screenshots of the phone's list
// and session page are checked for the key row and the list, in the
// viewport's width.
func TestPhoneConsole(t *testing.T) {
	testenv.LookPath(t, "chromium")
	const host = "api.phone-test.example"
	inet := newTestInternet(t, host)
	e := newEnvOpts(t, envOpts{web: "tls = \"self-signed\"\nhosts = [\"paddock.test\"]\n", hosts: map[string]string{host: inet.addr}})
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), inet.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	enroll := strings.TrimSpace(e.pd("web", "enroll"))
	m := regexp.MustCompile(`^https://paddock\.test:(\d+)/enroll\?token=\S+$`).FindStringSubmatch(enroll)
	if m == nil {
		t.Fatalf("paddock web enroll: %q", enroll)
	}
	base := "https://paddock.test:" + m[1]
	// "phone" asks before any connection; "idle", made after it (newer),
	// sleeps: it needs nobody, so it comes after.
	e.pd("run", "-d", "--name", "phone", "--backend", "local", "--workspace", ws, "--egress", "allowlist", "--ask")
	defer e.pdRun("rm", "-f", "phone")
	e.pd("run", "-d", "--name", "idle", "--backend", "local")
	defer e.pdRun("rm", "-f", "idle")
	e.waitScreen("phone", promptReady, 60*time.Second)
	e.pd("sleep", "idle")

	ctx := pinnedBrowser(t, e)
	virtualAuthenticator(t, ctx)
	var frames struct {
		sync.Mutex
		sent []string
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if f, ok := ev.(*network.EventWebSocketFrameSent); ok {
			frames.Lock()
			frames.sent = append(frames.sent, string(f.Response.PayloadData))
			frames.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{})
		return err
	}), chromedp.Navigate(enroll), chromedp.Click(chromedp.CSS("#enroll"))); err != nil {
		t.Fatal(err)
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	waitFor := func(what, js, want string, d time.Duration) string {
		t.Helper()
		var got string
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got = eval(js); strings.Contains(got, want) {
				return got
			}
		}
		t.Fatalf("%s: %q never held %q\n%s", what, got, want, e.screen("phone"))
		return ""
	}
	const order = `[...document.querySelectorAll("#sessions tbody tr")].map(r => r.dataset.name + ":" + (r.dataset.needs || "")).join(" ")`
	waitFor("the list after the passkey enrolment", order, "phone:waiting idle:", 30*time.Second)

	// Notifications: asked once, by the button; granted (as a person's
	// tap on the browser's question would), the page's worker shows them.
	if eval(`String(!document.getElementById("notify").hidden)`) != "true" {
		t.Fatal("the page does not offer notifications")
	}
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: base}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#notify"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the notifications' worker", `navigator.serviceWorker.getRegistration().then(r => String(!!(r && r.active)))`, "true", 20*time.Second)
	const shown = `navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => ns.map(n => n.title).join("\n"))`

	// The session page on the phone: the key row's keys reach the terminal.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/phone")); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, ctx, promptReady)
	waitFor("the turn before any", `document.getElementById("turn").innerText`, "No turn yet.", 10*time.Second)
	if eval(`String(document.getElementById("notify").hidden)`) != "true" {
		t.Fatal("the page asks for notifications again")
	}
	for _, k := range []string{"esc", "left", "right", "ctrl"} {
		if err := chromedp.Do(ctx, chromedp.Tap(chromedp.CSS(`#keys [data-key="`+k+`"]`))); err != nil {
			t.Fatal(err)
		}
	}
	typeInto(t, ctx, "l") // after Ctrl: ^L, claude redraws
	want := []string{"\x1b", "\x1b[D|\x1bOD", "\x1b[C|\x1bOC", "\x0c"}
	var typed []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(typed) < len(want); time.Sleep(100 * time.Millisecond) {
		typed = typed[:0]
		frames.Lock()
		for _, f := range frames.sent {
			var msg struct{ T, D string }
			if json.Unmarshal([]byte(f), &msg) == nil && msg.T == "i" {
				typed = append(typed, msg.D)
			}
		}
		frames.Unlock()
	}
	if len(typed) != len(want) {
		t.Fatalf("the key row sent %q", typed)
	}
	for i, w := range want {
		if !strings.Contains("|"+w+"|", "|"+typed[i]+"|") {
			t.Fatalf("key %d sent %q, want %q (all: %q)", i, typed[i], w, typed)
		}
	}
	checkPhoneShot(t, ctx, "web-phone-session.png", "#keys", "#message", "#terminal")

	// A message from the page's box reaches the fake upstream; claude's
	// curl then waits for approval.
	e.fake.SetSteps([]fakeapi.Step{{Name: "Bash", Input: map[string]any{
		"command":     "curl -sS --max-time 120 --cacert /workspace/ca.pem https://" + host + "/ > /workspace/got.txt 2>&1; echo rc=$? >> /workspace/got.txt",
		"description": "fetch " + host}}})
	defer e.fake.SetSteps(nil)
	text := fakeapi.StepsKeyword + " fetch it, sent from a phone"
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#message textarea"), text), chromedp.Tap(chromedp.CSS(`#message button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the message's answer", `document.getElementById("messageStatus").textContent`, "claude took it", 60*time.Second)
	reached := false
	for deadline := time.Now().Add(30 * time.Second); !reached && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, r := range e.fake.Requests() {
			reached = reached || bytes.Contains(r.Body, []byte("sent from a phone"))
		}
	}
	if !reached {
		t.Fatal("the page's message never reached the upstream")
	}

	// Back to the list: the connection waits, the phone is told, the
	// session is first with it, and the person approves it there.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/")); err != nil {
		t.Fatal(err)
	}
	waitFor("the list while curl waits", order, "phone:approval idle:", 90*time.Second)
	waitFor("the approval's notification", shown, "phone asks to reach "+host+":443", 30*time.Second)
	row := `#pending tr[data-host="` + host + `:443"]`
	checkPhoneShot(t, ctx, "web-phone-list.png", "#sessions", row+" button.approve")
	if err := chromedp.Do(ctx, chromedp.Tap(chromedp.CSS(row+" button.approve"))); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && !bytes.Contains(got, []byte("rc=")); time.Sleep(200 * time.Millisecond) {
		got, _ = os.ReadFile(filepath.Join(ws, "got.txt"))
	}
	if !bytes.Contains(got, []byte("hello from "+host)) || !bytes.Contains(got, []byte("rc=0")) {
		t.Fatalf("curl after the phone's approval: %q\n%s", got, e.pd("logs", "--egress", "phone"))
	}
	waitFor("the turn's end, told", shown, "phone is waiting for you", 60*time.Second)
	if logs := e.pd("logs", "--egress", "phone"); !strings.Contains(logs, "approved by root") {
		t.Fatalf("the decision log lacks the approval:\n%s", logs)
	}
	// The turn, as text, on the session page.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/phone")); err != nil {
		t.Fatal(err)
	}
	turn := waitFor("the last turn", `document.getElementById("turn").innerText`, fakeapi.StepsDone, 30*time.Second)
	if !strings.Contains(turn, "sent from a phone") || !strings.Contains(turn, "Bash: fetch "+host) {
		t.Fatalf("the last turn on the page:\n%s", turn)
	}
	// claude exits (/exit; on-failure leaves it so): told, and the list
	// says so.
	// It is told even to a person on that session's page.
	e.typeLine("phone", "/exit")
	waitFor("claude's exit, told", shown, "phone: claude exited", 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/")); err != nil {
		t.Fatal(err)
	}
	waitFor("the list after the exit", order, "phone:exited idle:", 30*time.Second)
}

// checkPhoneShot saves a full screenshot of the page on the phone, and
// checks it: nothing wider than the viewport, and each of sels drawn
// within its width, with something on it (not one flat colour).
func checkPhoneShot(t *testing.T, ctx context.Context, name string, sels ...string) {
	t.Helper()
	// The layout's width (innerWidth is the visual viewport's, which a
	// phone's browser widens to show a page too wide for it).
	w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.clientWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if sw, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); sw > w {
		t.Fatalf("%s: the page is %d pixels wide on a %d-pixel phone", name, sw, w)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	scale := float64(img.Bounds().Dx()) / float64(w)
	for _, sel := range sels {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return null; const b = e.getBoundingClientRect();
			return {x: b.left + scrollX, y: b.top + scrollY, w: b.width, h: b.height}; })()`, sel)
		r, err := chromedp.Run(ctx, chromedp.Evaluate[*struct{ X, Y, W, H float64 }](js))
		if err != nil || r == nil || r.W == 0 || r.H == 0 {
			t.Fatalf("%s: %s is not drawn (%v)", name, sel, err)
		}
		if r.X < 0 || r.X+r.W > float64(w)+0.5 {
			t.Fatalf("%s: %s spans %.0f..%.0f, past the %d-pixel screen", name, sel, r.X, r.X+r.W, w)
		}
		colours := map[[3]uint32]bool{}
		for y := r.Y; y < r.Y+r.H; y += 2 {
			for x := r.X; x < r.X+r.W; x += 2 {
				c := img.At(int(x*scale), int(y*scale))
				cr, cg, cb, _ := c.RGBA()
				colours[[3]uint32{cr >> 8, cg >> 8, cb >> 8}] = true
			}
		}
		if len(colours) < 3 {
			t.Fatalf("%s: %s is blank in the screenshot", name, sel)
		}
	}
}
