package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/webtls"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestWebOverTLS: web.tls = "self-signed" with a name (paddock.test, on a
// loopback address here): paddock serve prints the certificate's
// fingerprint, and how to log in from a phone (a passkey); paddock web prints an https URL by that name; a client
// that pins the fingerprint logs in and gets a Secure, HttpOnly,
// SameSite=Strict cookie; plain HTTP and another Host get nothing; an API
// token works over it; Chromium, trusting that one key, shows the page.
func TestWebOverTLS(t *testing.T) {
	e := newEnvOpts(t, envOpts{web: "tls = \"self-signed\"\nhosts = [\"paddock.test\"]\n"})
	fp := regexp.MustCompile(`(?m)^  ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})$`).FindStringSubmatch(e.log.String())
	if fp == nil || !strings.Contains(e.log.String(), "served over TLS; its certificate, made now, has the SHA-256 fingerprint") ||
		!strings.Contains(e.log.String(), "log in with a passkey: `paddock web enroll`") {
		t.Fatalf("serve did not print the fingerprint:\n%s", e.log.String())
	}
	login := strings.TrimSpace(e.pd("web"))
	m := regexp.MustCompile(`^https://paddock\.test:(\d+)/login\?token=`).FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("paddock web: %s", login)
	}
	addr := "127.0.0.1:" + m[1]
	pinned := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{ServerName: "paddock.test", InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			if got := webtls.Fingerprint(cs.PeerCertificates[0].Raw); got != fp[1] {
				t.Errorf("the server's certificate is %s, serve printed %s", got, fp[1])
			}
			return nil
		}},
	}}
	resp, err := pinned.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sc := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != 200 || !strings.Contains(sc, "; Secure") || !strings.Contains(sc, "; HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Fatalf("login over TLS: %d, cookie %q", resp.StatusCode, sc)
	}
	// Plain HTTP on the same port gets no page.
	if r, err := http.Get("http://" + addr + "/healthz"); err == nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode == 200 {
			t.Fatalf("plain HTTP answered: %s", b)
		}
	}
	// Another name: 421 (DNS rebinding), also over TLS.
	req, _ := http.NewRequest("GET", "https://paddock.test:"+m[1]+"/healthz", nil)
	req.Host = "evil.test:" + m[1]
	if r, err := pinned.Do(req); err != nil || r.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another Host: %v %v", r, err)
	}
	// An API token over TLS.
	tok := strings.TrimSpace(e.pd("token", "create", "--scope", "read"))
	req, _ = http.NewRequest("GET", "https://paddock.test:"+m[1]+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if r, err := pinned.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("the API over TLS: %v %v", r, err)
	}

	// Chromium trusting only this certificate's key shows the page.
	e.pd("run", "-d", "--name", "tls-1", "--backend", "local")
	defer e.pdRun("rm", "-f", "tls-1")
	ctx := pinnedBrowser(t, e)
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.TrimSpace(e.pd("web"))), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="tls-1"]`))); err != nil {
		t.Fatalf("the page over TLS in Chromium: %v", err)
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin`)); loc != "https://paddock.test:"+m[1] {
		t.Fatalf("the page's origin: %q", loc)
	}
	screenshot(t, ctx, "web-tls.png")
}

// TestPasskeyLogin: on a Runner serving its page over TLS by a name, with
// Chromium's virtual authenticator as the person's device: paddock web
// enroll prints a one-time https link; opening it makes a passkey and
// logs in (the session list shows); after logging out, /passkey logs in
// again with the passkey alone; the link is dead after its use; wrong
// logins from one address are limited (429); both logins are in the
// audit log.
func TestPasskeyLogin(t *testing.T) {
	testenv.LookPath(t, "chromium")
	e := newEnvOpts(t, envOpts{web: "tls = \"self-signed\"\nhosts = [\"paddock.test\"]\n"})
	enroll := strings.TrimSpace(e.pd("web", "enroll"))
	m := regexp.MustCompile(`^https://paddock\.test:(\d+)/enroll\?token=\S+$`).FindStringSubmatch(enroll)
	if m == nil {
		t.Fatalf("paddock web enroll: %q", enroll)
	}
	base := "https://paddock.test:" + m[1]
	e.pd("run", "-d", "--name", "pk-1", "--backend", "local")
	defer e.pdRun("rm", "-f", "pk-1")

	ctx := pinnedBrowser(t, e)
	virtualAuthenticator(t, ctx)
	// listed waits until the page lists the session: logged in.
	listed := func(what string) {
		t.Helper()
		var msg string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('tr[data-name="pk-1"]')`)); ok {
				return
			}
			msg, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("msg")||document.body).textContent`))
		}
		t.Fatalf("%s: not logged in; the page says %q", what, msg)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(enroll), chromedp.Click(chromedp.CSS("#enroll"))); err != nil {
		t.Fatal(err)
	}
	listed("enrolment")
	if u, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); strings.Contains(u, "token=") {
		t.Fatalf("the token stayed in the address: %s", u)
	}
	// Log out; then the passkey alone logs in.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/passkey"), chromedp.Click(chromedp.CSS("#login"))); err != nil {
		t.Fatal(err)
	}
	listed("passkey login")
	screenshot(t, ctx, "web-passkey.png")
	// The enrolment link was good once.
	if err := chromedp.Do(ctx, chromedp.Navigate(enroll), chromedp.Click(chromedp.CSS("#enroll"))); err != nil {
		t.Fatal(err)
	}
	var msg string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(msg, "used or expired"); time.Sleep(100 * time.Millisecond) {
		msg, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("msg").textContent`))
	}
	if !strings.Contains(msg, "used or expired") {
		t.Fatalf("a used enrolment link: %q", msg)
	}

	// Wrong logins from one address: refused, then limited.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+m[1])
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	var last int
	for i := 0; i < 12; i++ {
		req, _ := http.NewRequest("POST", base+"/passkey/login/finish?id=guess", strings.NewReader("{}"))
		req.Header.Set("X-Paddock", "1")
		req.Header.Set("Origin", base)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last = resp.StatusCode
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("after 12 wrong logins: %d", last)
	}
	// The audit log has the enrolment and the passkey login.
	var hows []string
	_ = api.NewClient(filepath.Join(e.dir, "paddock.sock")).Audit(context.Background(), api.AuditQuery{}, func(a audit.Entry) error {
		if a.Action == audit.ActionWebPasskey && a.Error == "" {
			hows = append(hows, strings.Fields(a.Detail)[0])
		}
		return nil
	})
	if strings.Join(hows, " ") != "enroll passkey" {
		t.Fatalf("audit: %v", hows)
	}
}

// pinnedBrowser is a Chromium that reaches paddock.test on loopback and
// trusts the key of e's self-signed certificate, and no other.
func pinnedBrowser(t *testing.T, e *env, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chromium := testenv.LookPath(t, "chromium")
	pemBytes, err := os.ReadFile(filepath.Join(e.dir, webtls.Dir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pemBytes)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return newBrowser(t, chromium, append([]chromedp.ExecAllocatorOption{chromedp.Flag("host-resolver-rules", "MAP paddock.test 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:]))}, extra...)...)
}

// virtualAuthenticator gives the browser's tab Chromium's virtual
// authenticator: a device with a platform passkey that a person always
// approves.
func virtualAuthenticator(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, cdpwebauthn.Enable, cdpwebauthn.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, cdpwebauthn.AddVirtualAuthenticator, cdpwebauthn.AddVirtualAuthenticatorParams{Options: &cdpwebauthn.VirtualAuthenticatorOptions{
			Protocol: cdpwebauthn.AuthenticatorProtocolCtap2, Transport: cdpwebauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
		}})
		return err
	})); err != nil {
		t.Fatalf("the virtual authenticator: %v", err)
	}
}
