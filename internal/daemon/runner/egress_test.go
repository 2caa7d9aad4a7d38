package runner

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// loopResolver maps every name it knows to one loopback address: "the
// internet" of this test lives on 127.0.0.2.
type loopResolver map[string]string

func (m loopResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestDirectAnthropicThroughEgress: the real pinned claude in a
// direct-mode, anthropic-posture box reaches "api.anthropic.com" (the
// fake, behind TLS from a test CA) through the egress proxy, while curl to
// any other name from the same box is denied and logged.
func TestDirectAnthropicThroughEgress(t *testing.T) {
	backends := testBackends(t)
	caPEM, leaf := testenv.CA(t, "api.anthropic.com")
	fake := fakeapi.New(ownerOAuth)
	ln, err := net.Listen("tcp", "127.0.0.2:443")
	if err != nil {
		t.Fatalf("the fake API needs 127.0.0.2:443: %v", err)
	}
	srv := &http.Server{Handler: fake, TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()

	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "off"
	cfg.Web.Listen = "off"
	logs := &testenv.Buffer{}
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Backends: backends,
		EgressResolver: loopResolver{"api.anthropic.com": "127.0.0.2", "example.com": "127.0.0.2"}, UnsafeEgressLoopbackForTests: true})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)

	for name := range backends {
		t.Run(name, func(t *testing.T) {
			s, err := r.CreateSession(context.Background(), api.CreateRequest{Name: "direct-" + name, Backend: name, Egress: "anthropic", CredentialMode: "direct"})
			if err != nil {
				t.Fatalf("%v\n%s", err, logs.String())
			}
			defer r.RemoveSession(context.Background(), s.ID, false)
			run := func(stdin string, extra []string, argv ...string) (string, int) {
				var out strings.Builder
				p, err := r.Exec(context.Background(), s.ID, channel.ExecOptions{Argv: argv, Env: extra, Stdout: &out, Stderr: &out})
				if err != nil {
					t.Fatal(err)
				}
				if stdin != "" {
					p.Write([]byte(stdin))
				}
				p.CloseStdin()
				code, _ := p.Wait()
				return out.String(), code
			}
			if out, code := run(string(caPEM), nil, "paddock", "guest", "put", "/tmp/ca.pem"); code != 0 {
				t.Fatalf("put CA: %s", out)
			}
			before := len(fake.Requests())
			out, code := run("", []string{"NODE_EXTRA_CA_CERTS=/tmp/ca.pem", "CLAUDE_CODE_MAX_RETRIES=0"}, "claude", "-p", "say hi")
			if code != 0 || !strings.Contains(out, "hi from the fake server") {
				t.Fatalf("claude through the egress proxy: %d %s\n%s", code, out, logs.String())
			}
			reqs := fake.Requests()
			if len(reqs) <= before || reqs[len(reqs)-1].Credential != ownerOAuth {
				t.Fatalf("the API saw %d requests", len(reqs)-before)
			}
			out, code = run("", nil, "curl", "-sS", "-o", "/dev/null", "--max-time", "10", "https://example.com/")
			if code == 0 || !strings.Contains(out, "403") {
				t.Fatalf("curl to another name: %d %s", code, out)
			}
			// Without the proxy, nothing: no route, no resolver.
			out, code = run("", nil, "curl", "-sS", "--noproxy", "*", "--max-time", "5", "https://api.anthropic.com/")
			if code == 0 {
				t.Fatalf("a direct connection worked: %s", out)
			}
			es, _ := r.Logs(context.Background(), s.ID, 0)
			var allowed, denied bool
			for _, e := range es {
				if e.Kind != "egress" {
					continue
				}
				allowed = allowed || e.Decision == "allowed" && e.Host == "api.anthropic.com" && e.Addr == "127.0.0.2:443" && e.BytesOut > 0
				denied = denied || e.Decision == "denied" && e.Host == "example.com" && strings.Contains(e.Reason, "not on the anthropic allowlist")
			}
			if !allowed || !denied {
				t.Fatalf("egress log: allowed=%v denied=%v: %+v", allowed, denied, es)
			}
		})
	}
}

// TestSessionOwnCredential: a session created with its creator's own
// credential sends that one upstream; another session sends the owner's.
func TestSessionOwnCredential(t *testing.T) {
	backends := testBackends(t)
	const owner, creator = "sk-fake-owner-cred-0000000000", "sk-ant-api03-fake-creator-key-000000000000"
	fake := fakeapi.New(owner, creator)
	up := httptest.NewServer(fake)
	defer up.Close()
	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Anthropic.Upstream = up.URL
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + owner}, Backends: map[string]sandbox.Backend{"local": backends["local"]}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)

	mine, err := r.CreateSession(context.Background(), api.CreateRequest{Name: "mine", Backend: "local", Credential: api.Secret(creator)})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := r.CreateSession(context.Background(), api.CreateRequest{Name: "theirs", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if mine.CredentialKind != "api_key" || theirs.CredentialKind != "oauth" {
		t.Fatalf("kinds %s %s", mine.CredentialKind, theirs.CredentialKind)
	}
	send := func(id, varName, header, prefix string) string {
		var out strings.Builder
		p, err := r.Exec(context.Background(), id, channel.ExecOptions{Argv: []string{"printenv", varName}, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		p.CloseStdin()
		p.Wait()
		tok := strings.TrimSpace(out.String())
		fake.Reset()
		req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set(header, prefix+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reqs := fake.Requests()
		if resp.StatusCode != 200 || len(reqs) != 1 {
			t.Fatalf("%s: %d", id, resp.StatusCode)
		}
		return reqs[0].Credential
	}
	if got := send(mine.ID, "ANTHROPIC_API_KEY", "X-Api-Key", ""); got != creator {
		t.Fatalf("the creator's session sent %q", got)
	}
	if got := send(theirs.ID, "CLAUDE_CODE_OAUTH_TOKEN", "Authorization", "Bearer "); got != owner {
		t.Fatalf("the other session sent %q", got)
	}
	st, _ := os.Stat(filepath.Join(dir, "session-credentials", mine.ID+".json"))
	if st == nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the session credential file: %v", st)
	}
	r.RemoveSession(context.Background(), mine.ID, false)
	r.RemoveSession(context.Background(), theirs.ID, false)
	if _, err := os.Stat(filepath.Join(dir, "session-credentials", mine.ID+".json")); err == nil {
		t.Fatal("rm left the session's credential")
	}
}

// TestApprovalExpiryArmed: a policy with timed approvals (egress approve
// --for) has the session's tunnels checked again when the next one ends,
// and then the one after; setting the policy — as a start, a wake or a
// Runner started again does — arms it from the stored approvals alone;
// dropping the policy stops it.
func TestApprovalExpiryArmed(t *testing.T) {
	cfg := config.Default()
	cfg.Proxy.Listen = "off"
	cfg.Web.Listen = "off"
	cfg.Credential.ClaudeLoginFile = "off"
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := session.Session{ID: "expiring", Name: "expiring", Egress: session.EgressAllowlist, EgressApproved: []session.Approval{
		{Rule: "a.example.com", Until: now.Add(-time.Minute), By: "ben"}, // over already
		{Rule: "b.example.com", Until: now.Add(300 * time.Millisecond), By: "ben"},
		{Rule: "c.example.com", By: "ben"}, // no end
		{Rule: "d.example.com", Until: now.Add(900 * time.Millisecond), By: "ben"},
	}}
	timer := func() *time.Timer {
		sl := r.slot(s.ID)
		if sl == nil {
			return nil
		}
		sl.mu.Lock()
		defer sl.mu.Unlock()
		return sl.expiry
	}
	armed := func() bool { return timer() != nil }
	if _, err := r.setPolicy(&s); err != nil {
		t.Fatal(err)
	}
	if !armed() {
		t.Fatal("no timer for the approvals' ends")
	}
	first := timer()
	// Past b's end: armed again, for d's.
	var second *time.Timer
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		second = timer()
		if second != nil && second != first {
			break
		}
	}
	if second == nil || second == first {
		t.Fatal("not armed again for the next approval's end")
	}
	// Past d's end: nothing left to arm.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !armed() {
			break
		}
	}
	if armed() {
		t.Fatal("still armed with every timed approval over")
	}
	// Armed again by a policy set anew, and stopped by its drop.
	s.EgressApproved = append(s.EgressApproved, session.Approval{Rule: "e.example.com", Until: time.Now().Add(time.Hour), By: "ben"})
	if _, err := r.setPolicy(&s); err != nil {
		t.Fatal(err)
	}
	if !armed() {
		t.Fatal("a new timed approval is not armed")
	}
	r.dropPolicy(s.ID)
	if armed() {
		t.Fatal("a dropped policy left its timer")
	}
	if n := r.slotCount(); n != 0 {
		t.Fatalf("a dropped policy left the session in memory (%d slots)", n)
	}
}

// TestAlwaysListAndRemove: egress approve --always puts the rule on the
// session owner's standing list, which egress always ls shows and every
// ask-mode session of theirs uses (no one else's); egress always rm takes
// it off: the list is empty again, the copy kept in the session where it
// was approved goes, each running session of the owner has its policy set
// again without it (an approval of the same rule for one session alone
// stays) and its decision log says who removed it; removing it again is
// not found, saying how to list them.
func TestAlwaysListAndRemove(t *testing.T) {
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen = "off", "off"
	cfg.Credential.ClaudeLoginFile = "off"
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		EgressResolver: loopResolver{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	close(r.adopted) // nothing to re-adopt: the sessions below are records only
	ann, ben := session.Person{UID: 2001, Name: "ann"}, session.Person{UID: 2002, Name: "ben"}
	as := func(p session.Person) context.Context {
		return people.With(context.Background(), people.Person{UID: p.UID, Name: p.Name})
	}
	// Running ask-mode sessions, their policies installed as a start does.
	for _, s := range []session.Session{
		{ID: "annone0000", Name: "one", Owner: ann},
		{ID: "anntwo0000", Name: "two", Owner: ann},
		{ID: "annthree00", Name: "three", Owner: ann},
		{ID: "benone0000", Name: "bens", Owner: ben},
	} {
		s.Observed, s.Desired, s.Egress, s.EgressAsk, s.Created = session.Running, session.Running, session.EgressAllowlist, true, time.Now()
		if err := r.save(&s); err != nil {
			t.Fatal(err)
		}
		if _, err := r.setPolicy(&s); err != nil {
			t.Fatal(err)
		}
	}
	const rule = "docs.example.com:443"
	approved := func(id string) bool {
		for _, a := range r.policy(id).Approved {
			if a.Rule.String() == rule {
				return true
			}
		}
		return false
	}
	if _, err := r.ApproveEgress(as(ann), "one", api.ApproveRequest{Rule: "docs.example.com", Scope: "always"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ApproveEgress(as(session.Person{Name: "root"}), "three", api.ApproveRequest{Rule: "docs.example.com"}); err != nil {
		t.Fatal(err)
	}
	list, err := r.StandingApprovals(context.Background(), ann)
	if err != nil || len(list) != 1 || list[0].Rule != rule || list[0].By != "ann" {
		t.Fatalf("ann's standing list: %+v %v", list, err)
	}
	if l, err := r.StandingApprovals(context.Background(), ben); err != nil || l == nil || len(l) != 0 {
		t.Fatalf("ben's standing list: %#v %v", l, err)
	}
	if !approved("annone0000") || !approved("annthree00") || approved("benone0000") {
		t.Fatalf("the policies with the rule approved always: one %v three %v bens %v", approved("annone0000"), approved("annthree00"), approved("benone0000"))
	}
	// The list is read whenever a policy is made (a start, a wake, a
	// set): another of ann's sessions has it from its next one.
	two, err := r.Session(context.Background(), "two")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.setPolicy(&two); err != nil || !approved("anntwo0000") {
		t.Fatalf("two's policy: %v", err)
	}

	res, err := r.RemoveStandingApproval(as(session.Person{Name: "root"}), ann, "docs.example.com")
	if err != nil || res.Rule != rule || res.User != "ann" || res.Sessions != 3 {
		t.Fatalf("remove: %+v %v", res, err)
	}
	if l, _ := r.StandingApprovals(context.Background(), ann); len(l) != 0 {
		t.Fatalf("ann's standing list after rm: %+v", l)
	}
	if _, err := r.store.Get(store.BucketMeta, alwaysKey(ann.UID)); err == nil {
		t.Fatal("an empty standing list is still stored")
	}
	if approved("annone0000") || approved("anntwo0000") || !approved("annthree00") {
		t.Fatalf("the policies after rm: one %v two %v three %v (its own approval)", approved("annone0000"), approved("anntwo0000"), approved("annthree00"))
	}
	if s, _ := r.Session(context.Background(), "one"); len(s.EgressApproved) != 0 {
		t.Fatalf("one kept its copy of the standing approval: %+v", s.EgressApproved)
	}
	es, _ := r.Logs(context.Background(), "annone0000", 0)
	found := false
	for _, e := range es {
		found = found || e.Kind == "egress" && strings.Contains(e.Reason, "standing approval "+rule+" of ann removed") && strings.Contains(e.Reason, "by root")
	}
	if !found {
		t.Fatalf("one's decision log: %+v", es)
	}
	if _, err := r.RemoveStandingApproval(as(ann), ann, rule); !errdefs.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "paddock egress always ls") {
		t.Fatalf("removing it again: %v", err)
	}
}
