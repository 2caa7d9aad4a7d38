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

	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/internal/daemon/webtls"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestWebOverTLS: web.tls = "self-signed" with a name (paddock.test, on a
// loopback address here): paddock serve prints the certificate's
// fingerprint; paddock web prints an https URL by that name; a client
// that pins the fingerprint logs in and gets a Secure, HttpOnly,
// SameSite=Strict cookie; plain HTTP and another Host get nothing; an API
// token works over it; Chromium, trusting that one key, shows the page.
func TestWebOverTLS(t *testing.T) {
	e := newEnvOpts(t, envOpts{web: "tls = \"self-signed\"\nhosts = [\"paddock.test\"]\n"})
	fp := regexp.MustCompile(`(?m)^  ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})$`).FindStringSubmatch(e.log.String())
	if fp == nil || !strings.Contains(e.log.String(), "served over TLS; its certificate, made now, has the SHA-256 fingerprint") {
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
	e.pd("run", "-d", "--name", "tls-1", "--backend", "local")
	defer e.pdRun("rm", "-f", "tls-1")
	ctx := newBrowser(t, chromium, chromedp.Flag("host-resolver-rules", "MAP paddock.test 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.TrimSpace(e.pd("web"))), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="tls-1"]`))); err != nil {
		t.Fatalf("the page over TLS in Chromium: %v", err)
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin`)); loc != "https://paddock.test:"+m[1] {
		t.Fatalf("the page's origin: %q", loc)
	}
	screenshot(t, ctx, "web-tls.png")
}
