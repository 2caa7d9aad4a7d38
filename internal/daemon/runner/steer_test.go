package runner

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestSteerEgress: a running session's egress changes without claude
// restarting. In ask mode curl's connection waits, shows as pending, and
// goes through once approved (the same connection); a denial refuses it
// with a 403 saying who denied it; going offline cuts an open tunnel; a
// named policy attaches and detaches live; approvals of forbidden forms
// (addresses, public-suffix wildcards) are refused with the reason.
func TestSteerEgress(t *testing.T) {
	backends := testBackends(t)
	caPEM, leaf := testenv.CA(t, "ask.example.com", "other.example.com", "pkg.example.org")
	ln, err := net.Listen("tcp", "127.0.0.2:443")
	if err != nil {
		t.Fatalf("the test host needs 127.0.0.2:443: %v", err)
	}
	srv := &http.Server{Handler: testenv.WebHost(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()

	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "off"
	cfg.Web.Listen = "off"
	cfg.Egress.AskTimeout = config.Duration(20 * time.Second)
	cfg.Egress.Policies = map[string]config.EgressPolicy{"pkgs": {Allow: []string{"pkg.example.org"}}}
	logs := &testenv.Buffer{}
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Backends: map[string]sandbox.Backend{"local": backends["local"]},
		EgressResolver:               loopResolver{"ask.example.com": "127.0.0.2", "other.example.com": "127.0.0.2", "pkg.example.org": "127.0.0.2", "inside.example.com": "10.1.2.3"},
		UnsafeEgressLoopbackForTests: true})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ctx := context.Background()
	s, err := r.CreateSession(ctx, api.CreateRequest{Name: "steer", Backend: "local", Egress: "allowlist", Ask: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	defer r.RemoveSession(ctx, s.ID, false)
	boxID := s.BoxID
	run := func(stdin string, argv ...string) (string, int) {
		var out strings.Builder
		// The proxy claude's environment names, as its Bash tool passes on.
		p, err := r.Exec(ctx, s.ID, channel.ExecOptions{Argv: argv, Env: []string{"HTTPS_PROXY=http://" + BoxEgressAddr}, Stdout: &out, Stderr: &out})
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
	if out, code := run(string(caPEM), "paddock", "guest", "put", "/tmp/ca.pem"); code != 0 {
		t.Fatalf("put CA: %s", out)
	}
	// curl uses the box's HTTPS_PROXY, as claude's Bash tool does.
	curl := func(url string, extra ...string) chan string {
		ch := make(chan string, 1)
		go func() {
			out, code := run("", append([]string{"curl", "-sS", "--cacert", "/tmp/ca.pem", "--max-time", "60"}, append(extra, url)...)...)
			ch <- fmt.Sprintf("%d %s", code, out)
		}()
		return ch
	}
	waitPending := func(host string) api.PendingView {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			ps, _ := r.EgressPending(ctx)
			for _, p := range ps {
				if p.Host == host {
					return p
				}
			}
		}
		t.Fatalf("%s never waited for approval\n%s", host, logs.String())
		return api.PendingView{}
	}

	got := curl("https://ask.example.com/")
	p := waitPending("ask.example.com")
	if p.Name != "steer" || p.Port != 443 {
		t.Fatalf("pending %+v", p)
	}
	res, err := r.ApproveEgress(ctx, "steer", api.ApproveRequest{Rule: "ask.example.com"})
	if err != nil || res.Answered != 1 || !res.Recorded {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if out := <-got; !strings.HasPrefix(out, "0 ") || !strings.Contains(out, "hello from ask.example.com") {
		t.Fatalf("the approved connection: %s", out)
	}
	// Approved for the session: the next one goes straight through.
	if out := <-curl("https://ask.example.com/"); !strings.Contains(out, "hello from") {
		t.Fatalf("after approval: %s", out)
	}

	// Denied: a 403 that says who denied it.
	got = curl("https://other.example.com/", "-v")
	waitPending("other.example.com")
	if res, err := r.ApproveEgress(ctx, "steer", api.ApproveRequest{Rule: "other.example.com", Deny: true}); err != nil || res.Answered != 1 {
		t.Fatalf("deny: %+v %v", res, err)
	}
	if out := <-got; strings.HasPrefix(out, "0 ") || !strings.Contains(out, "403") {
		t.Fatalf("the denied connection: %s", out)
	}

	// Never asked about: a name that resolves to a private address.
	if out := <-curl("https://inside.example.com/"); strings.HasPrefix(out, "0 ") {
		t.Fatalf("a private address: %s", out)
	}
	// Forbidden approvals, with the reason.
	for rule, want := range map[string]string{"10.1.2.3": "address", "*.com": "public suffix", "*.co.uk": "public suffix", "*": "wildcard",
		"inside.example.com": "private"} {
		if _, err := r.ApproveEgress(ctx, "steer", api.ApproveRequest{Rule: rule}); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("approve %q: %v", rule, err)
		}
	}

	// A named policy, live.
	if _, err := r.Set(ctx, "steer", api.SetRequest{Attach: []string{"pkgs"}}); err != nil {
		t.Fatal(err)
	}
	if out := <-curl("https://pkg.example.org/"); !strings.Contains(out, "hello from pkg.example.org") {
		t.Fatalf("with the policy attached: %s", out)
	}
	if _, err := r.Set(ctx, "steer", api.SetRequest{Detach: []string{"pkgs"}, Ask: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if out := <-curl("https://pkg.example.org/"); strings.HasPrefix(out, "0 ") || !strings.Contains(out, "403") {
		t.Fatalf("with the policy detached and ask off: %s", out)
	}

	// Offline cuts the open tunnel; claude was never restarted.
	slow := curl("https://ask.example.com/slow")
	time.Sleep(time.Second)
	off := session.EgressOffline
	s2, err := r.Set(ctx, "steer", api.SetRequest{Egress: &off})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-slow:
		if strings.HasPrefix(out, "0 ") || !strings.Contains(out, "tick") {
			t.Fatalf("the cut tunnel: %s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("going offline left the tunnel open")
	}
	if s2.BoxID != boxID || s2.Egress != off {
		t.Fatalf("after set: %+v", s2)
	}
	if out := <-curl("https://ask.example.com/"); strings.HasPrefix(out, "0 ") || !strings.Contains(out, "403") {
		t.Fatalf("offline: %s", out)
	}
	es, _ := r.Logs(ctx, s.ID, 0)
	var cut, changed, approved int
	for _, e := range es {
		switch {
		case e.Kind == "egress" && e.Decision == "cut" && strings.Contains(e.Reason, "offline"):
			cut++
		case e.Kind == "egress" && e.Decision == "changed":
			changed++
		case e.Kind == "egress" && e.Decision == "allowed" && strings.HasPrefix(e.Rule, "approved"):
			approved++
		}
	}
	if cut != 1 || changed < 4 || approved < 2 {
		t.Fatalf("the decision log: %d cut, %d changes, %d approved: %+v", cut, changed, approved, es)
	}
}

func ptr[T any](v T) *T { return &v }
