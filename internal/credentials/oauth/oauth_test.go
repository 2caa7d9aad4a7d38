package oauth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/testkit/fakeoauth"
)

// server is a fake OAuth server with paddock's endpoints pointed at it.
func server(t *testing.T) (*fakeoauth.Server, Endpoints) {
	t.Helper()
	e := Claude
	fs := fakeoauth.New(e.ClientID, e.RedirectURL)
	hs := httptest.NewServer(fs)
	t.Cleanup(hs.Close)
	e.AuthorizeURL, e.TokenURL = hs.URL+"/oauth/authorize", hs.URL+"/v1/oauth/token"
	return fs, e
}

// login does the whole flow as a person would: open the URL, paste the code.
func login(t *testing.T, fs *fakeoauth.Server, c *Client) Token {
	t.Helper()
	p, err := NewPKCE()
	if err != nil {
		t.Fatal(err)
	}
	shown, err := fs.Authorize(c.LoginURL(p))
	if err != nil {
		t.Fatalf("the login page: %v", err)
	}
	code, err := ParseCode(shown+"\n", p)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Exchange(context.Background(), code, p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLoginAndRefreshRotate(t *testing.T) {
	fs, e := server(t)
	c := &Client{Endpoints: e}
	tok := login(t, fs, c)
	if !strings.HasPrefix(tok.Access.Reveal(), "sk-ant-oat01-") || tok.Refresh.IsZero() || tok.Expires.IsZero() {
		t.Fatalf("token: %+v", tok)
	}
	if k, _ := credential.DetectKind(tok.Access); k != credential.KindOAuth {
		t.Fatalf("kind %v", k)
	}
	next, err := c.Refresh(context.Background(), tok.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	if next.Refresh.Equal(tok.Refresh) || next.Access.Equal(tok.Access) {
		t.Fatal("the refresh did not rotate")
	}
	// The old refresh token is dead: invalid_grant, a permanent error.
	_, err = c.Refresh(context.Background(), tok.Refresh)
	var oe *Error
	if !errors.As(err, &oe) || oe.Code != "invalid_grant" || !oe.Permanent() {
		t.Fatalf("reusing a rotated refresh token: %v", err)
	}
	if strings.Contains(err.Error(), tok.Refresh.Reveal()) {
		t.Fatal("an error holds the refresh token")
	}
}

func TestLoginRefusals(t *testing.T) {
	fs, e := server(t)
	c := &Client{Endpoints: e}
	p, _ := NewPKCE()
	if _, err := ParseCode("no-hash-here", p); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "the # in the middle") {
		t.Fatalf("a cut code: %v", err)
	}
	if _, err := ParseCode("abc#other-state", p); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "another login") {
		t.Fatalf("another login's code: %v", err)
	}
	shown, _ := fs.Authorize(c.LoginURL(p))
	code, _ := ParseCode(shown, p)
	// A wrong verifier: invalid_grant.
	q := p
	q.Verifier = strings.Repeat("x", 43)
	if _, err := c.Exchange(context.Background(), code, q); !IsPermanent(err) {
		t.Fatalf("a wrong verifier: %v", err)
	}
	// An expired code.
	p2, _ := NewPKCE()
	shown, _ = fs.Authorize(c.LoginURL(p2))
	code2, _ := ParseCode(shown, p2)
	fs.Now = func() time.Time { return time.Now().Add(time.Hour) }
	_, err := c.Exchange(context.Background(), code2, p2)
	fs.Now = nil
	if !IsPermanent(err) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("an expired code: %v", err)
	}
	// Down: no answer at all is not permanent.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	down := &Client{Endpoints: Endpoints{TokenURL: "http://" + addr + "/v1/oauth/token", ClientID: e.ClientID}}
	_, err = down.Refresh(context.Background(), secret.New("r"))
	var oe *Error
	if !errors.As(err, &oe) || oe.Status != 0 || IsPermanent(err) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("a server that is down: %v", err)
	}
	// Slow: the caller's deadline ends it.
	tok := login(t, fs, c)
	fs.InjectFault(fakeoauth.FaultDelay, 1, 0, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Refresh(ctx, tok.Refresh); err == nil || IsPermanent(err) {
		t.Fatalf("a slow server: %v", err)
	}
	// A server error is not permanent either.
	fs.InjectFault(fakeoauth.FaultStatus, 1, 503, 0)
	if _, err := c.Refresh(context.Background(), tok.Refresh); err == nil || IsPermanent(err) {
		t.Fatalf("a 503: %v", err)
	}
}

func newAuthority(t *testing.T, fs *fakeoauth.Server, e Endpoints) (*Authority, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "login.json")
	c := &Client{Endpoints: e}
	a := &Authority{Store: Store{Path: path}, Client: c}
	if err := a.Install(login(t, fs, c)); err != nil {
		t.Fatal(err)
	}
	return a, path
}

// TestOneRefreshForManyExpired: 10 requests that meet the same expired
// token cause one refresh; all then use the new token.
func TestOneRefreshForManyExpired(t *testing.T) {
	fs, e := server(t)
	a, _ := newAuthority(t, fs, e)
	first, err := a.Current()
	if err != nil {
		t.Fatal(err)
	}
	before := fs.Refreshes()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if err := a.RefreshNow(context.Background(), first.Secret); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := fs.Refreshes() - before; n != 1 {
		t.Fatalf("%d refreshes for one expired token", n)
	}
	now, _ := a.Current()
	if now.Secret.Equal(first.Secret) {
		t.Fatal("the token did not change")
	}
	if st := a.Status(); st.Refreshes != 1 || st.Failing {
		t.Fatalf("status %+v", st)
	}
}

// TestRotatedTokenSavedBeforeUse: by the time the new access token is
// handed out, the file holds the new refresh token.
func TestRotatedTokenSavedBeforeUse(t *testing.T) {
	fs, e := server(t)
	a, path := newAuthority(t, fs, e)
	old, _ := a.Current()
	if err := a.RefreshNow(context.Background(), old.Secret); err != nil {
		t.Fatal(err)
	}
	cur, _ := a.Current()
	stored, err := (Store{Path: path}).Load()
	if err != nil || !stored.Access.Equal(cur.Secret) {
		t.Fatalf("the file does not hold the token in use: %v", err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// A new Authority on the same file (a restarted Runner) refreshes with it.
	b := &Authority{Store: Store{Path: path}, Client: a.Client}
	if err := b.RefreshNow(context.Background(), cur.Secret); err != nil {
		t.Fatalf("refresh after a restart: %v", err)
	}
}

// TestRunRefreshesAheadAndRecovers: Run refreshes before expiry; a failed
// refresh keeps the stored token, is retried with backoff, and recovers;
// a revoked login is dead and says to log in again.
func TestRunRefreshesAheadAndRecovers(t *testing.T) {
	fs, e := server(t)
	fs.AccessTTL = 3 * time.Second
	a, path := newAuthority(t, fs, e)
	a.Lead, a.MaxBackoff = 2*time.Second, 200*time.Millisecond
	var changes atomic.Int32
	a.OnChange = func(Status) { changes.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The next two refreshes fail (503), then it works.
	fs.InjectFault(fakeoauth.FaultStatus, 2, 503, 0)
	go a.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	sawFailing := false
	for time.Now().Before(deadline) {
		st := a.Status()
		sawFailing = sawFailing || st.Failing
		if st.Refreshes >= 1 && !st.Failing {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := a.Status()
	if !sawFailing || st.Refreshes < 1 || st.Failing {
		t.Fatalf("no recovery: saw failing %v, status %+v", sawFailing, st)
	}
	if c, err := a.Current(); err != nil || c.Kind != credential.KindOAuth {
		t.Fatalf("after recovery: %v", err)
	}
	// Revoked: the next refresh is refused for good.
	fs.RevokeAll()
	cur, _ := a.Current()
	if err := a.RefreshNow(context.Background(), cur.Secret); !IsPermanent(err) {
		t.Fatalf("refresh of a revoked login: %v", err)
	}
	_, err := a.Current()
	if !errors.Is(err, ErrLoginNeeded) || !errors.Is(err, credential.ErrExpired) || !strings.Contains(err.Error(), "paddock credential login") {
		t.Fatalf("a dead login: %v", err)
	}
	// The stored refresh token was never lost.
	if _, err := (Store{Path: path}).Load(); err != nil {
		t.Fatalf("the stored login after failures: %v", err)
	}
	if changes.Load() == 0 {
		t.Fatal("OnChange never called")
	}
}

func TestStoreRefusesOthers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "login.json")
	if _, err := (Store{Path: p}).Load(); !errors.Is(err, ErrNoLogin) {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte(`{"access_token":"a","refresh_token":"r"}`), 0o644)
	if _, err := (Store{Path: p}).Load(); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a 0644 login: %v", err)
	}
	os.WriteFile(p, []byte(`{"access_token":"a"`), 0o600)
	os.Chmod(p, 0o600)
	if _, err := (Store{Path: p}).Load(); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a damaged login: %v", err)
	}
}

var _ = http.StatusOK

// TestStaleTemporaryFilesRemoved: what a kill -9 during a save leaves
// beside the login is removed when the Authority first loads it.
func TestStaleTemporaryFilesRemoved(t *testing.T) {
	fs, e := server(t)
	a, path := newAuthority(t, fs, e)
	stale := filepath.Join(filepath.Dir(path), ".login.json.tmp123456")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &Authority{Store: Store{Path: path}, Client: a.Client}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(stale); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale file is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if _, err := b.Current(); err != nil {
		t.Fatal(err)
	}
}
