package credproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/testkit/fakeoauth"
)

// loginAuthority is paddock's own login against a fake OAuth server, as
// paddock credential login leaves it: an Authority with a stored login.
func loginAuthority(t *testing.T) (*fakeoauth.Server, *oauth.Authority) {
	t.Helper()
	e := oauth.Claude
	fs := fakeoauth.New(e.ClientID, e.RedirectURL)
	hs := httptest.NewServer(fs)
	t.Cleanup(hs.Close)
	e.AuthorizeURL, e.TokenURL = hs.URL+"/oauth/authorize", hs.URL+"/v1/oauth/token"
	c := &oauth.Client{Endpoints: e}
	p, err := oauth.NewPKCE()
	if err != nil {
		t.Fatal(err)
	}
	shown, err := fs.Authorize(c.LoginURL(p))
	if err != nil {
		t.Fatal(err)
	}
	code, err := oauth.ParseCode(shown, p)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Exchange(context.Background(), code, p)
	if err != nil {
		t.Fatal(err)
	}
	a := &oauth.Authority{Store: oauth.Store{Path: filepath.Join(t.TempDir(), "login.json")}, Client: c}
	if err := a.Install(tok); err != nil {
		t.Fatal(err)
	}
	return fs, a
}

// TestExpiredBoxHangsUpMidRefresh: through the proxy, as the Runner wires
// it (OnExpired refreshes paddock's login). A box's request meets an
// expired token; while the OAuth server has rotated the refresh token and
// not yet answered, five more boxes meet it too, and then the first box
// hangs up. The one refresh goes on: the five are served with the new
// token, the OAuth server saw one refresh request in all, the rotated
// login is stored, and the box that hung up is served on its next request.
// Before, the refresh died with the first box's request, the next waiter
// refreshed with the dead refresh token (invalid_grant), and the login was
// signed out for every session.
func TestExpiredBoxHangsUpMidRefresh(t *testing.T) {
	fs, a := loginAuthority(t)
	first, err := a.Current()
	if err != nil {
		t.Fatal(err)
	}
	// The API calls the first access token expired and serves any other
	// the OAuth server issued and still knows.
	var oldSeen atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		if tok == first.Secret.Reveal() {
			oldSeen.Add(1)
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired. Please obtain a new token or refresh your existing token."}}`)
			return
		}
		if known, expired := fs.Validate(tok); !known || expired {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"Invalid bearer token"}}`)
			return
		}
		io.WriteString(w, `{"id":"m","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) {
		o.Credential = a
		// What the Runner's OnExpired does for its own login.
		o.OnExpired = func(ctx context.Context, used credential.Credential) (credential.Credential, bool) {
			if err := a.RefreshNow(ctx, used.Secret); err != nil {
				return credential.Credential{}, false
			}
			c, err := a.Current()
			if err != nil || c.Secret.Equal(used.Secret) {
				return credential.Credential{}, false
			}
			return c, true
		}
	})
	h.real = first.Secret.Reveal() // never in a log line either
	const body = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`
	send := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/messages", strings.NewReader(body))
		for k, vs := range h.authed() {
			req.Header[k] = vs
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	base := len(fs.Requests())
	fs.InjectFault(fakeoauth.FaultLateAnswer, 1, 0, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstDone := make(chan error, 1)
	go func() { _, err := send(ctx); firstDone <- err }()
	waitUntil(t, "the OAuth server to rotate the refresh token", func() bool { return fs.Refreshes() == 1 })

	var wg sync.WaitGroup
	codes := make(chan int, 5)
	for range 5 {
		wg.Go(func() {
			code, err := send(context.Background())
			if err != nil {
				t.Error(err)
			}
			codes <- code
		})
	}
	waitUntil(t, "the five to meet the expired token", func() bool { return oldSeen.Load() == 6 })
	cancel() // the first box hangs up
	if err := <-firstDone; err == nil {
		t.Fatal("the first box's request ended well although it hung up")
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("a box waiting for the refresh got %d, want 200", code)
		}
	}
	// The box that hung up asks again: served, with no further refresh.
	if code, err := send(context.Background()); err != nil || code != 200 {
		t.Fatalf("the next request of the box that hung up: %d %v", code, err)
	}
	var refreshes []fakeoauth.TokenRequest
	for _, r := range fs.Requests()[base:] {
		if r.Grant == "refresh_token" {
			refreshes = append(refreshes, r)
		}
	}
	if len(refreshes) != 1 || fs.Refreshes() != 1 {
		t.Fatalf("%d refresh requests at the OAuth server (%d granted), want 1: %+v", len(refreshes), fs.Refreshes(), refreshes)
	}
	cur, err := a.Current()
	if err != nil || cur.Secret.Equal(first.Secret) {
		t.Fatalf("the login after the hang-up: %v", err)
	}
	if stored, err := a.Store.Load(); err != nil || !stored.Access.Equal(cur.Secret) {
		t.Fatalf("the rotated login is not the stored one: %v", err)
	}
	if st := a.Status(); st.Dead || st.Failing {
		t.Fatalf("the login's status: %+v", st)
	}
}

// waitUntil polls cond for up to 10 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
