package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/internal/credentials/secret"
	svc "github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/tlsterm"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

const (
	testHost  = "git.test-service.example"
	realToken = "ghp_REALTOKEN_never_in_a_box_0123456789"
)

// sink keeps the entries recorded.
type sink struct {
	mu sync.Mutex
	es []decisionlog.Entry
}

func (s *sink) Record(e decisionlog.Entry) { s.mu.Lock(); s.es = append(s.es, e); s.mu.Unlock() }
func (s *sink) all() []decisionlog.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]decisionlog.Entry(nil), s.es...)
}

// upstream is a GitHub Enterprise-shaped host: real `git http-backend`
// for git, an API that echoes the Authorization header, both asking for
// the real token (401 without it). It counts what reached it.
type upstream struct {
	ca      *tlsterm.CA
	addr    string
	root    string
	mu      sync.Mutex
	reached []string
}

func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.reached...)
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{root: t.TempDir()}
	ca, err := tlsterm.LoadOrCreate(t.TempDir(), []string{testHost})
	if err != nil {
		t.Fatal(err)
	}
	u.ca = ca
	gitExec, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	backend := &cgi.Handler{Path: gitExec, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + u.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=owner"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v3/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "authorization: %s\n", r.Header.Get("Authorization"))
	})
	mux.Handle("/", backend)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+realToken))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reached = append(u.reached, r.Method+" "+r.URL.Path)
		u.mu.Unlock()
		auth := r.Header.Get("Authorization")
		if auth != want && auth != "Bearer "+realToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ca.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	u.addr = ln.Addr().String()
	return u
}

// env is a proxy for one session, with a listener the test's git talks
// TLS to as if it were the service host.
type env struct {
	t       *testing.T
	up      *upstream
	log     *sink
	url     string // https://testHost:port
	caFile  string
	session Session
	work    string
}

func newEnv(t *testing.T, access svc.Access) *env {
	t.Helper()
	up := newUpstream(t)
	e := &env{t: t, up: up, log: &sink{}}
	pool := x509.NewCertPool()
	pool.AddCert(up.ca.Cert)
	b := Bound{Grant: svc.Grant{Secret: "gh", Repo: "o/r", Access: access, Placeholder: "paddock-placeholder-gh-abc"},
		Secret: svc.Secret{Name: "gh", Kind: svc.GitHub, Host: testHost, Value: secret.New(realToken)}}
	e.session = Session{Bounds: []Bound{b}, Own: []string{"paddock/s1"}}
	p := New(Options{
		Session: func(string) (Session, error) { return e.session, nil },
		Dial: func(ctx context.Context, host string, port int) (net.Conn, error) {
			if host != testHost {
				return nil, fmt.Errorf("dial %s: not the test's host", host)
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", up.addr)
		},
		RootCAs: pool, Decisions: e.log, TempDir: t.TempDir(),
	})
	t.Cleanup(p.Close)
	boxCA, err := tlsterm.LoadOrCreate(t.TempDir(), Hosts(e.session.Bounds))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.Serve("s1", c, boxCA)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	e.url = "https://" + testHost + ":" + port
	e.caFile = filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(e.caFile, boxCA.PEM, 0o644)
	// The upstream's repository, with one commit on main.
	bare := filepath.Join(up.root, "o", "r.git")
	e.git("", "init", "-q", "--bare", "-b", "main", bare)
	e.git(bare, "config", "http.receivepack", "true")
	e.work = filepath.Join(t.TempDir(), "work")
	e.git("", "init", "-q", "-b", "main", e.work)
	os.WriteFile(filepath.Join(e.work, "a"), []byte("a\n"), 0o644)
	e.git(e.work, "add", "a")
	e.git(e.work, "commit", "-q", "-m", "one")
	e.git(e.work, "push", "-q", bare, "main")
	e.up.mu.Lock()
	e.up.reached = nil
	e.up.mu.Unlock()
	return e
}

// boxGit runs git as a box would: the placeholder from a credential
// helper, the Runner's CA for the service host, the host at the proxy.
func (e *env) boxGit(dir string, args ...string) (string, error) {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.url, "https://"))
	pre := []string{"-c", "http.curloptResolve=" + testHost + ":" + port + ":127.0.0.1",
		"-c", "credential.helper=", "-c", "credential.helper=!f() { echo username=x-access-token; echo password=paddock-placeholder-gh-abc; }; f"}
	cmd := exec.Command("git", append(pre, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_SSL_CAINFO="+e.caFile,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), realToken) {
		e.t.Fatalf("git in the box saw the real token:\n%s", out)
	}
	return string(out), err
}

func (e *env) git(dir string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (e *env) upstreamRef(ref string) string {
	cmd := exec.Command("git", "-C", filepath.Join(e.up.root, "o", "r.git"), "rev-parse", "--verify", "-q", ref)
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

func (e *env) last() decisionlog.Entry {
	es := e.log.all()
	if len(es) == 0 {
		e.t.Fatal("no decision recorded")
	}
	return es[len(es)-1]
}

// TestGitThroughGrant: with a push grant, a box's git clones, pushes its
// own branch and fast-forwards it; pushing main, a force push and a
// deletion are refused before anything reaches the server, and git
// prints why. The real token reaches the server and never the box.
func TestGitThroughGrant(t *testing.T) {
	e := newEnv(t, svc.Push)
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := e.boxGit("", "clone", "-q", e.url+"/o/r.git", clone); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	e.git(clone, "checkout", "-q", "-b", "paddock/s1")
	os.WriteFile(filepath.Join(clone, "b"), []byte("b\n"), 0o644)
	e.git(clone, "add", "b")
	e.git(clone, "commit", "-q", "-m", "two")
	if out, err := e.boxGit(clone, "push", "-q", "origin", "paddock/s1"); err != nil {
		t.Fatalf("push of the session's branch: %v\n%s", err, out)
	}
	if got, want := e.upstreamRef("refs/heads/paddock/s1"), e.git(clone, "rev-parse", "HEAD"); got != want {
		t.Fatalf("upstream paddock/s1 %q, want %q", got, want)
	}
	if l := e.last(); l.Decision != decisionlog.Forwarded || len(l.RefUpdates) != 1 || !strings.HasSuffix(l.RefUpdates[0], " refs/heads/paddock/s1") || l.Service != "gh" || l.Repo != "o/r" {
		t.Fatalf("the push's entry: %+v", l)
	}
	os.WriteFile(filepath.Join(clone, "c"), []byte("c\n"), 0o644)
	e.git(clone, "add", "c")
	e.git(clone, "commit", "-q", "-m", "three")
	if out, err := e.boxGit(clone, "push", "-q", "origin", "paddock/s1"); err != nil {
		t.Fatalf("a fast-forward of the session's branch: %v\n%s", err, out)
	}
	mainBefore := e.upstreamRef("refs/heads/main")
	before := len(e.up.seen())
	refused := func(name string, args []string, want string) {
		t.Helper()
		out, err := e.boxGit(clone, args...)
		if err == nil {
			t.Fatalf("%s went through:\n%s", name, out)
		}
		if !strings.Contains(out, want) || !strings.Contains(out, "remote: paddock: this push was refused") {
			t.Fatalf("%s: git printed\n%s\nwant %q", name, out, want)
		}
		for _, r := range e.up.seen()[before:] {
			if strings.HasSuffix(r, "/git-receive-pack") && strings.HasPrefix(r, "POST") {
				t.Fatalf("%s: the push reached the server (%s)", name, r)
			}
		}
		if l := e.last(); l.Decision != decisionlog.Refused || !strings.Contains(l.Reason, "push refused") {
			t.Fatalf("%s: entry %+v", name, l)
		}
	}
	refused("push to main", []string{"push", "origin", "HEAD:main"}, "[remote rejected] HEAD -> main (paddock: not this session's branch")
	e.git(clone, "commit", "-q", "--amend", "-m", "rewritten")
	refused("a force push", []string{"push", "--force", "origin", "paddock/s1"}, "(paddock: not a fast-forward")
	refused("a deletion", []string{"push", "origin", ":paddock/s1"}, "(paddock: a session never deletes a ref)")
	refused("a tag", []string{"push", "origin", "HEAD:refs/tags/v1"}, "not this session's branch")
	if got := e.upstreamRef("refs/heads/main"); got != mainBefore {
		t.Fatal("main moved")
	}
}

// TestReadOnlyGrant: a read grant fetches and cannot push at all.
func TestReadOnlyGrant(t *testing.T) {
	e := newEnv(t, svc.Read)
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := e.boxGit("", "clone", "-q", e.url+"/o/r.git", clone); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	e.git(clone, "checkout", "-q", "-b", "paddock/s1")
	out, err := e.boxGit(clone, "push", "origin", "paddock/s1")
	if err == nil || !strings.Contains(out, "read-only") {
		t.Fatalf("a push with a read grant: %v\n%s", err, out)
	}
	if e.upstreamRef("refs/heads/paddock/s1") != "" {
		t.Fatal("the branch arrived")
	}
}

// TestPlaceholderElsewhere: the placeholder sent for another repository,
// or to an admin route, is refused and nothing reaches the server; a
// route that echoes the credential shows it redacted.
func TestPlaceholderElsewhere(t *testing.T) {
	e := newEnv(t, svc.Push)
	// Another repository of the same host: refused once git offers the
	// placeholder (its anonymous try gets the server's 401 first).
	e.git("", "init", "-q", "--bare", filepath.Join(e.up.root, "o", "other.git"))
	out, err := e.boxGit("", "clone", "-q", e.url+"/o/other.git", filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("clone of another repository: %v\n%s", err, out)
	}
	if l := e.last(); l.Decision != decisionlog.Refused || l.Rule != string(OpPlaceholder) {
		t.Fatalf("entry %+v", l)
	}
	curl := func(path string) (string, int) {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.url, "https://"))
		cmd := exec.Command("curl", "-sS", "--cacert", e.caFile, "--resolve", testHost+":"+port+":127.0.0.1",
			"-H", "Authorization: Bearer paddock-placeholder-gh-abc", "-w", "\n%{http_code}", e.url+path)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v %s", path, err, b)
		}
		s := strings.TrimSpace(string(b))
		i := strings.LastIndexByte(s, '\n')
		var code int
		fmt.Sscan(s[i+1:], &code)
		return s[:i], code
	}
	before := len(e.up.seen())
	if body, code := curl("/api/v3/repos/o/r/hooks"); code != 403 || !strings.Contains(body, "hooks") {
		t.Fatalf("an admin route: %d %s", code, body)
	}
	if body, code := curl("/api/v3/repos/o/other"); code != 403 {
		t.Fatalf("another repository's API: %d %s", code, body)
	}
	if n := len(e.up.seen()); n != before {
		t.Fatalf("refused requests reached the server: %v", e.up.seen()[before:])
	}
	body, code := curl("/api/v3/repos/o/r/echo")
	if code != 200 || strings.Contains(body, realToken) || !strings.Contains(body, Redacted) {
		t.Fatalf("the echo route: %d %q", code, body)
	}
}

// TestRedactorAcrossWrites: a credential split over writes is still
// redacted.
func TestRedactorAcrossWrites(t *testing.T) {
	var b strings.Builder
	r := &redactor{w: &b, secrets: []string{"SECRETVALUE"}, fl: http.NewResponseController(nil)}
	for _, p := range []string{"a SEC", "RETVAL", "UE b SECRETVALUESECR", "ETVALUE", " SECRE"} {
		r.Write([]byte(p))
	}
	r.flush()
	if got, want := b.String(), "a "+Redacted+" b "+Redacted+Redacted+" SECRE"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
