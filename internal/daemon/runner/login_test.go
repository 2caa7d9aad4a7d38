package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/fakeoauth"
)

// loginRunner is a Runner logged in with paddock's own login against a
// fake OAuth server, whose access tokens the fake upstream checks.
func loginRunner(t *testing.T, ttl time.Duration) (*Runner, *fakeoauth.Server, *fakeapi.Server) {
	t.Helper()
	fs := fakeoauth.New(oauth.Claude.ClientID, oauth.Claude.RedirectURL)
	fs.AccessTTL = ttl
	os := httptest.NewServer(fs)
	t.Cleanup(os.Close)
	fake := fakeapi.New()
	fake.Validate = fs.Validate
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Anthropic.Upstream = up.URL
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Credential.ClaudeLoginFile = "off"
	cfg.Credential.OAuth = config.OAuthEndpoints{AuthorizeURL: os.URL + "/oauth/authorize", TokenURL: os.URL + "/v1/oauth/token"}
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	u, err := r.StartLogin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	shown, err := fs.Authorize(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.FinishLogin(context.Background(), shown); err != nil {
		t.Fatal(err)
	}
	if c, err := r.cred.Current(); err != nil || !strings.HasPrefix(c.Source, credential.PaddockLoginSource) {
		t.Fatalf("the credential in use: %+v %v", c.Status(), err)
	}
	return r, fs, fake
}

// stream sends one streaming request through the proxy with a session
// token and reads it to the end; "" means a whole answer.
func stream(r *Runner, tok secret.Value) string {
	req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages",
		strings.NewReader(`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	if resp.StatusCode != 200 || !strings.Contains(string(b), "message_stop") {
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	return ""
}

// TestTenSessionsAcrossAnExpiry: 10 sessions stream without a pause
// while the login's access token nears its expiry: the Runner refreshes
// once, ahead of it, and no request fails.
func TestTenSessionsAcrossAnExpiry(t *testing.T) {
	r, fs, fake := loginRunner(t, 5*time.Second)
	fake.SetPace(20*time.Millisecond, 5) // each stream lasts a little
	var toks []secret.Value
	for i := range 10 {
		tok, err := r.Tokens().Issue(fmt.Sprintf("sess%08d", i), credential.KindOAuth)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	before := fs.Refreshes()
	stop := time.Now().Add(7 * time.Second) // the token is refreshed at 4.5 s
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var fails []string
	var wg sync.WaitGroup
	for _, tok := range toks {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if why := stream(r, tok); why != "" {
					failed.Add(1)
					mu.Lock()
					fails = append(fails, why)
					mu.Unlock()
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := fs.Refreshes() - before; n != 1 || failed.Load() != 0 || ok.Load() < 100 {
		t.Fatalf("%d refreshes, %d requests failed, %d whole: %v", n, failed.Load(), ok.Load(), fails[:min(3, len(fails))])
	}
	st := r.login.Status()
	if st.Refreshes != 1 || st.Failing {
		t.Fatalf("status %+v", st)
	}
	t.Logf("%d whole streams over 7 s across the refresh", ok.Load())
}

// TestExpiredTokenRefreshedOnce: the API calls the token expired before
// paddock thought it would (the server's clock ahead): the requests in
// flight cause one refresh and are sent again; none fails.
func TestExpiredTokenRefreshedOnce(t *testing.T) {
	r, fs, _ := loginRunner(t, time.Hour)
	tok, err := r.Tokens().Issue("sessexpired1", credential.KindOAuth)
	if err != nil {
		t.Fatal(err)
	}
	if why := stream(r, tok); why != "" {
		t.Fatal(why)
	}
	// The OAuth server (and so the API) is now 2 hours ahead: every token
	// issued so far has expired there.
	fs.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	before := fs.Refreshes()
	var wg sync.WaitGroup
	errs := make(chan string, 10)
	for range 10 {
		wg.Go(func() {
			if why := stream(r, tok); why != "" {
				errs <- why
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a request failed: %s", e)
	}
	if n := fs.Refreshes() - before; n != 1 {
		t.Fatalf("%d refreshes", n)
	}
	es, _ := r.decisions.Read("sessexpired1", 0)
	again := 0
	for _, e := range es {
		if strings.Contains(e.Reason, "refreshed and sent again") {
			again++
		}
	}
	if again == 0 {
		t.Fatal("no request was recorded as sent again")
	}
}

// TestDeadLoginTellsTheBox: a login the OAuth server revoked gives boxes
// a 401 in the API's shape that says to log in again; no upstream request.
func TestDeadLoginTellsTheBox(t *testing.T) {
	r, fs, fake := loginRunner(t, time.Hour)
	tok, _ := r.Tokens().Issue("sessdead0001", credential.KindOAuth)
	fs.RevokeAll()
	fs.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	cur, _ := r.login.Current()
	_ = r.login.RefreshNow(context.Background(), cur.Secret)
	fake.Reset()
	req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(bufio.NewReader(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"authentication_error"`) || !strings.Contains(string(b), "paddock credential login") {
		t.Fatalf("a dead login: %d %s", resp.StatusCode, b)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d upstream requests with a dead login", n)
	}
}

// TestMemberLogin: on a team server a member logs in as themselves; their
// sessions use their own login, refreshed by the Runner like the owner's;
// another person cannot finish their login.
func TestMemberLogin(t *testing.T) {
	r, fs, _ := loginRunner(t, time.Hour)
	ann := people.With(context.Background(), people.Person{UID: 4243001, Name: "ann"})
	ben := people.With(context.Background(), people.Person{UID: 4243002, Name: "ben"})
	u, err := r.StartLogin(ann)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := fs.Authorize(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.FinishLogin(ben, shown); err == nil || !strings.Contains(err.Error(), "no login of yours") {
		t.Fatalf("ben finishing ann's login: %v", err)
	}
	// ben's try used it up: ann starts again.
	u, _ = r.StartLogin(ann)
	shown, _ = fs.Authorize(u)
	if _, err := r.FinishLogin(ann, shown); err != nil {
		t.Fatal(err)
	}
	owner, _ := r.login.Current()
	c, err := r.credentialOfPerson(session.Person{UID: 4243001, Name: "ann"})
	if err != nil || c.User != "ann" || c.Secret.Equal(owner.Secret) || !strings.HasPrefix(c.Source, credential.PaddockLoginSource) ||
		!strings.Contains(c.Source, "4243001") {
		t.Fatalf("ann's credential: %+v %v", c.Status(), err)
	}
	if st, _ := r.LoginStatus(ann); !st.LoggedIn {
		t.Fatalf("ann's login status %+v", st)
	}
	if st, _ := r.LoginStatus(ben); st.LoggedIn {
		t.Fatalf("ben has a login: %+v", st)
	}
	// Refreshed by the Runner like the owner's: the API calls it expired.
	if fresh, ok := r.refreshExpired(context.Background(), c); !ok || fresh.Secret.Equal(c.Secret) {
		t.Fatal("ann's login was not refreshed")
	}
	if err := r.Logout(ann); err != nil {
		t.Fatal(err)
	}
	if _, err := r.credentialOfPerson(session.Person{UID: 4243001, Name: "ann"}); err == nil {
		t.Fatal("ann has a credential after logging out")
	}
}

// TestLoginCapIsPerPerson: logins started and not finished are capped per
// person: one member who starts login after login is refused with a
// message that says what to do and when, and another member, and the
// owner, still log in. A ceiling for everyone together stays far above.
func TestLoginCapIsPerPerson(t *testing.T) {
	r, fs, _ := loginRunner(t, time.Hour)
	ann := people.With(context.Background(), people.Person{UID: 4243101, Name: "ann"})
	ben := people.With(context.Background(), people.Person{UID: 4243102, Name: "ben"})
	var urls []string
	var refused error
	for range 100 {
		u, err := r.StartLogin(ann)
		if err != nil {
			refused = err
			break
		}
		urls = append(urls, u)
	}
	if len(urls) != loginsPerPerson || !errors.Is(refused, errdefs.ErrLimit) ||
		!strings.Contains(refused.Error(), fmt.Sprintf("you have %d logins started and not finished", loginsPerPerson)) ||
		!strings.Contains(refused.Error(), "finish one") || !strings.Contains(refused.Error(), "expires at") {
		t.Fatalf("ann started %d logins, then: %v", len(urls), refused)
	}
	t.Log(refused)
	// ann's are hers: ben and the owner are not held up by them.
	u, err := r.StartLogin(ben)
	if err != nil {
		t.Fatalf("ben cannot start a login after ann started %d: %v", len(urls), err)
	}
	shown, _ := fs.Authorize(u)
	if _, err := r.FinishLogin(ben, shown); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartLogin(context.Background()); err != nil {
		t.Fatalf("the owner cannot start a login after ann started %d: %v", len(urls), err)
	}
	// Finishing one of hers makes room for another.
	shown, _ = fs.Authorize(urls[0])
	if _, err := r.FinishLogin(ann, shown); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartLogin(ann); err != nil {
		t.Fatalf("ann after finishing one: %v", err)
	}
	// The ceiling for everyone together, far above one person's cap.
	if loginsAtAll < 32*loginsPerPerson {
		t.Fatalf("the ceiling %d is within reach of a few people", loginsAtAll)
	}
	for uid := uint32(5000000); ; uid++ {
		_, err := r.StartLogin(people.With(context.Background(), people.Person{UID: uid, Name: "m"}))
		if err != nil {
			if !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "everyone together") {
				t.Fatalf("at the ceiling: %v", err)
			}
			t.Log(err)
			break
		}
	}
	r.pending.mu.Lock()
	n := len(r.pending.m)
	r.pending.mu.Unlock()
	if n != loginsAtAll {
		t.Fatalf("%d logins waiting at the ceiling, want %d", n, loginsAtAll)
	}
}
