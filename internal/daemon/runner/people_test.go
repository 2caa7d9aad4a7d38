package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// TestWhoseCredentialAndUserLimits: each person's sessions go out with
// their own credential, or are refused when they have none and the owner
// lends none; the decision log and /metrics name whose credential paid;
// users.max_sessions and users.tokens_per_day refuse beyond the limit with
// the limit's key in the message (429 in the API's error shape).
func TestWhoseCredentialAndUserLimits(t *testing.T) {
	backends := testBackends(t)
	const owner, annTok = "sk-fake-owner-cred-0000000000", "sk-ant-oat01-fake-ann-token-0000000000"
	fake := fakeapi.New(owner, annTok)
	up := httptest.NewServer(fake)
	defer up.Close()
	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "127.0.0.1:0"
	cfg.Anthropic.Upstream = up.URL
	cfg.Users.Limits = map[string]config.UserLimits{"ann": {MaxSessions: 1, TokensPerDay: 60}}
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + owner}, Backends: map[string]sandbox.Backend{"local": backends["local"]}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ann := people.With(context.Background(), people.Person{UID: 4242001, Name: "ann"})
	ben := people.With(context.Background(), people.Person{UID: 4242002, Name: "ben"})

	// No credential of her own, and the owner lends none: refused, saying how.
	_, err = r.CreateSession(ann, api.CreateRequest{Name: "ann-1", Backend: "local"})
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "ann has no credential of their own") ||
		!strings.Contains(err.Error(), "paddock credential set") {
		t.Fatalf("ann without a credential: %v", err)
	}
	if _, err := r.SetUserCredential(ann, credential.KindOAuth, secret.New(annTok)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "users", "4242001", "credential.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ann's credential file: %v %v", fi, err)
	}
	if st, err := r.CredentialStatus(ann); err != nil || st.User != "ann" || st.Source != "user:ann" {
		t.Fatalf("ann's status: %+v %v", st, err)
	}
	s1, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-1", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(context.Background(), s1.ID, false)
	if s1.Owner.Name != "ann" || s1.Owner.UID != 4242001 {
		t.Fatalf("owner %+v", s1.Owner)
	}
	// users.max_sessions = 1 for ann.
	if _, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-2", Backend: "local"}); !errors.Is(err, errdefs.ErrLimit) ||
		!strings.Contains(err.Error(), "users.max_sessions = 1") {
		t.Fatalf("ann's second session: %v", err)
	}
	mine, err := r.CreateSession(context.Background(), api.CreateRequest{Name: "owners", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(context.Background(), mine.ID, false)

	send := func(id string) (int, string, string) {
		var out strings.Builder
		p, err := r.Exec(context.Background(), id, channel.ExecOptions{Argv: []string{"printenv", "CLAUDE_CODE_OAUTH_TOKEN"}, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		p.CloseStdin()
		p.Wait()
		fake.Reset()
		req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(out.String()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cred := ""
		if reqs := fake.Requests(); len(reqs) == 1 {
			cred = reqs[0].Credential
		}
		return resp.StatusCode, cred, string(b)
	}
	if code, cred, _ := send(s1.ID); code != 200 || cred != annTok {
		t.Fatalf("ann's session: %d sent %q", code, cred)
	}
	if code, cred, _ := send(mine.ID); code != 200 || cred != owner {
		t.Fatalf("the owner's session: %d sent %q", code, cred)
	}
	// 37 tokens a request (the fake's usage): the second of ann's reaches
	// 74, over her 60 a day; the third is refused before it goes upstream.
	send(s1.ID)
	code, cred, body := send(s1.ID)
	if code != http.StatusTooManyRequests || cred != "" || !strings.Contains(body, `"rate_limit_error"`) ||
		!strings.Contains(body, "users.tokens_per_day = 60") {
		t.Fatalf("ann over her daily tokens: %d %q %s", code, cred, body)
	}
	if code, _, _ := send(mine.ID); code != 200 {
		t.Fatalf("the owner is not limited by ann's use: %d", code)
	}
	es, err := r.Logs(context.Background(), s1.ID, 0)
	if err != nil || len(es) < 3 {
		t.Fatalf("ann's log: %v %v", es, err)
	}
	// Whose credential paid, on every request that went upstream (the
	// log also holds what the box's own claude sent, some refused).
	paidBy := func(es []decisionlog.Entry) map[string]int {
		m := map[string]int{}
		for _, e := range es {
			if e.Decision == "forwarded" {
				m[e.CredentialUser]++
			}
		}
		return m
	}
	if got := paidBy(es); len(got) != 1 || got["ann"] < 2 {
		t.Fatalf("the decision log of ann's session says these paid: %v", got)
	}
	self, _ := user.Current()
	if es, _ := r.Logs(context.Background(), mine.ID, 0); len(paidBy(es)) != 1 || paidBy(es)[self.Username] == 0 {
		t.Fatalf("the owner's session's log: %v", paidBy(es))
	}
	resp, err := http.Get(r.WebAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// At least the two sent above; the box's own claude may have sent its
	// start-up requests (no tokens) with ann's credential too.
	if n := metricValue(string(mb), `paddock_credential_requests_total{decision="forwarded",user="ann"}`); n < 2 ||
		!strings.Contains(string(mb), `paddock_credential_tokens_total{user="ann"} 74`) {
		t.Fatalf("/metrics on ann:\n%s", grepLines(string(mb), "paddock_credential"))
	}
	if strings.Contains(string(mb), annTok) || strings.Contains(string(mb), owner) {
		t.Fatal("a credential in /metrics")
	}

	// ben has none; with credential.fallback_to_owner the owner's pays.
	if _, err := r.credentialOfPerson(session.Person{UID: 4242002, Name: "ben"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("ben without fallback: %v", err)
	}
	r.opts.Config.Credential.FallbackToOwner = true
	c, err := r.credentialOfPerson(session.Person{UID: 4242002, Name: "ben"})
	if err != nil || c.Secret.Reveal() != owner || c.User != self.Username {
		t.Fatalf("ben with fallback: %+v %v", c.Status(), err)
	}
	if _, err := r.SetUserCredential(ben, credential.KindOAuth, secret.New("")); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("an empty credential: %v", err)
	}
	// An admin's credential is the owner's, stored on the host.
	if _, err := r.SetUserCredential(context.Background(), credential.KindOAuth, secret.New(annTok)); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("the owner through the per-user route: %v", err)
	}
	if err := r.RemoveUserCredential(ann); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "users", "4242001", "credential.json")); !os.IsNotExist(err) {
		t.Fatalf("ann's credential after rm: %v", err)
	}
	_ = statedir.APISocket
}

// metricValue is the value of the sample named exactly series in a
// Prometheus text exposition, or -1 when there is none.
func metricValue(exposition, series string) float64 {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSocketForTheGroup: with api.group the API socket is the group's
// (0660), and a missing group is refused at start, saying how to make it.
func TestSocketForTheGroup(t *testing.T) {
	g, err := user.LookupGroupId("0")
	if err != nil {
		t.Skip("no group 0")
	}
	cfg := config.Default()
	cfg.Web.Listen = "off"
	cfg.Proxy.Listen = "off"
	cfg.API.Group = "paddock-no-such-group"
	if _, err := New(Options{StateDir: filepath.Join(t.TempDir(), "s"), Config: cfg}); err == nil || !strings.Contains(err.Error(), "sudo groupadd paddock-no-such-group") {
		t.Fatalf("a missing group: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("chown to a group needs root here")
	}
	cfg.API.Group = g.Name
	dir := filepath.Join(t.TempDir(), "s")
	r, err := New(Options{StateDir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	fi, err := os.Stat(filepath.Join(dir, statedir.APISocket))
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	// Root is an admin, by the kernel's word on the connection.
	p, err := api.NewClient(filepath.Join(dir, statedir.APISocket)).Whoami(context.Background())
	if err != nil || !p.Admin || p.UID != 0 {
		t.Fatalf("whoami: %+v %v", p, err)
	}
}

// TestAuditOverTheSocket: paddock audit's route, with -f: the entries so
// far, then new ones as they are recorded, each with who did it.
func TestAuditOverTheSocket(t *testing.T) {
	tr := startRunner(t, []string{"ANTHROPIC_API_KEY=sk-fake-env-key"}, nil, "off")
	c := tr.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Refused (an admin's credential is the owner's), and recorded.
	if _, err := c.SetCredential(ctx, "", secret.New("sk-ant-oat01-first")); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("root's own credential: %v", err)
	}
	got := make(chan audit.Entry, 8)
	done := make(chan error, 1)
	go func() {
		done <- c.Audit(ctx, api.AuditQuery{Follow: true}, func(e audit.Entry) error { got <- e; return nil })
	}()
	first := <-got
	self, _ := user.Current()
	if first.Action != audit.ActionCredentialSet || first.User != self.Username || first.Error == "" {
		t.Fatalf("the first entry: %+v", first)
	}
	if strings.Contains(fmt.Sprint(first), "sk-ant-oat01-first") {
		t.Fatal("a credential in the audit log")
	}
	if err := c.RemoveCredential(ctx); err == nil {
		t.Fatal("root removed an owner's credential through the per-user route")
	}
	if next := <-got; next.Action != audit.ActionCredentialRemove || next.User != self.Username {
		t.Fatalf("the followed entry: %+v", next)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v", err)
	}
	var n int
	if err := c.Audit(context.Background(), api.AuditQuery{N: 1}, func(audit.Entry) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("the last entry: %d %v", n, err)
	}
}

// TestUserCredCache: a person's stored credential is read once and then
// kept; forget (after the Runner writes or removes it) and the recheck
// period make the next request read the file again; a damaged file is
// never kept.
func TestUserCredCache(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	u := &userCredCache{now: func() time.Time { return now }}
	f := credential.File{Path: filepath.Join(t.TempDir(), "credential.json")}
	if _, err := u.load(7, f); !errors.Is(err, credential.ErrMissing) {
		t.Fatalf("no file: %v", err)
	}
	if err := f.Save(credential.KindAPIKey, secret.New("sk-ant-api03-first-000000000000")); err != nil {
		t.Fatal(err)
	}
	if _, err := u.load(7, f); !errors.Is(err, credential.ErrMissing) {
		t.Fatalf("the absence is kept until forgotten: %v", err)
	}
	u.forget(7)
	if c, err := u.load(7, f); err != nil || c.Secret.Reveal() != "sk-ant-api03-first-000000000000" {
		t.Fatalf("after forget: %v", err)
	}
	// Changed by hand: seen after the recheck period.
	if err := f.Save(credential.KindAPIKey, secret.New("sk-ant-api03-second-00000000000")); err != nil {
		t.Fatal(err)
	}
	if c, _ := u.load(7, f); c.Secret.Reveal() != "sk-ant-api03-first-000000000000" {
		t.Fatal("read again before the recheck period")
	}
	now = now.Add(userCredRecheck)
	if c, err := u.load(7, f); err != nil || c.Secret.Reveal() != "sk-ant-api03-second-00000000000" {
		t.Fatalf("after the recheck period: %v", err)
	}
	// A damaged file is an error each time, not kept.
	if err := os.WriteFile(f.Path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	u.forget(7)
	for i := 0; i < 2; i++ {
		if _, err := u.load(7, f); err == nil || errors.Is(err, credential.ErrMissing) {
			t.Fatalf("a damaged file: %v", err)
		}
	}
	if _, ok := u.m[7]; ok {
		t.Fatal("a damaged file's error is kept")
	}
}

// TestLentCredentialNeverInTheBox (issue 31, item 2): a person whose only
// credential is the owner's, lent through credential.fallback_to_owner,
// is refused direct mode, at create and at every later start (here: ben
// had his own when he made the session and removed it since); nothing of
// the owner's setup token reaches his box's environment.
func TestLentCredentialNeverInTheBox(t *testing.T) {
	backends := testBackends(t)
	const owner, benTok = "sk-ant-oat01-fake-owner-token-000000000", "sk-ant-oat01-fake-ben-token-0000000000"
	up := httptest.NewServer(fakeapi.New(owner, benTok))
	defer up.Close()
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "127.0.0.1:0"
	cfg.Anthropic.Upstream = up.URL
	cfg.Credential.FallbackToOwner = true
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + owner},
		Backends: map[string]sandbox.Backend{"local": backends["local"]}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ben := people.With(context.Background(), people.Person{UID: 4242002, Name: "ben"})
	direct := api.CreateRequest{Name: "ben-direct", Backend: "local", CredentialMode: "direct", Egress: "offline"}

	_, err = r.CreateSession(ben, direct)
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "ben has none of their own") ||
		!strings.Contains(err.Error(), "leave out --credential-mode direct") || strings.Contains(err.Error(), owner) {
		t.Fatalf("ben, direct, on the lent credential: %v", err)
	}
	// Through the proxy the lent one is fine.
	proxied, err := r.CreateSession(ben, api.CreateRequest{Name: "ben-proxy", Backend: "local", Egress: "offline", NoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(context.Background(), proxied.ID, false)

	// His own, then direct is his: made without starting; then he removes
	// it, and the start is refused.
	if _, err := r.SetUserCredential(ben, credential.KindOAuth, secret.New(benTok)); err != nil {
		t.Fatal(err)
	}
	direct.NoStart = true
	s, err := r.CreateSession(ben, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(context.Background(), s.ID, false)
	if err := r.RemoveUserCredential(ben); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wake(ben, s.ID); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "lent through the proxy only") {
		t.Fatalf("ben's direct session started on the lent credential: %v", err)
	}
	if got, err := r.Session(ben, s.ID); err == nil && got.Observed == session.Running {
		var out strings.Builder
		if p, err := r.Exec(context.Background(), s.ID, channel.ExecOptions{Argv: []string{"printenv", "CLAUDE_CODE_OAUTH_TOKEN"}, Stdout: &out}); err == nil {
			p.CloseStdin()
			p.Wait()
		}
		t.Fatalf("ben's direct session runs on the lent credential (environment %q)", out.String())
	}
}
