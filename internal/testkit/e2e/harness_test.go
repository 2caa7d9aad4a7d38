// Package e2e drives paddock as a user does: a real `paddock serve`
// process, the CLI, the real pinned Claude Code in real boxes of each
// backend, and the fake Messages API as the only fake.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/box/sandbox/kubernetes"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/cli"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/k8stest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// ownerToken is the owner's (fake) setup token.
const ownerToken = "sk-fake-owner-setup-token-e2e-000000000000"

type env struct {
	// helper is this test binary, where other users may run it (team_test.go).
	helper string
	// hostsFile, if set, is serve's /etc/hosts (envOpts.hosts).
	hostsFile string
	relay     *relayEcho
	t         testing.TB
	bin       string
	dir       string
	fake      *fakeapi.Server
	image     string
	claude    string

	mu    sync.Mutex
	serve *exec.Cmd
	log   *testenv.Buffer

	// kube, when set, is the test cluster the Runner's [kubernetes]
	// backend uses, in namespace kubeNS.
	kube   *k8stest.Cluster
	kubeNS string
}

// newEnv starts a Runner with the e2e configuration and any extra TOML
// lines appended to it.
func newEnv(t testing.TB, extra ...string) *env {
	t.Helper()
	return newEnvOpts(t, envOpts{}, extra...)
}

// envOpts change newEnv's set-up.
type envOpts struct {
	// tlsUpstream serves the fake API over TLS, with a test certificate
	// the Runner trusts through anthropic.ca_file.
	tlsUpstream bool
	// plan and scopes replace credential.subscription_type ("max") and
	// set credential.scopes.
	plan, scopes string
	// usageView turns anthropic.usage_view on.
	usageView bool
	// fallbackToOwner turns credential.fallback_to_owner on.
	fallbackToOwner bool
	// hosts are names `paddock serve` resolves to test addresses: it runs
	// in a mount namespace of its own with an /etc/hosts that has them.
	hosts map[string]string
	// web are more lines of [web].
	web string
}

// newEnvOpts is newEnv with options.
func newEnvOpts(t testing.TB, o envOpts, extra ...string) *env {
	t.Helper()
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "tmux")
	e := &env{t: t, bin: testenv.PaddockBinary(t), claude: testenv.Claude(t), fake: fakeapi.New(ownerToken)}
	if len(o.hosts) > 0 {
		testenv.LookPath(t, "unshare")
		base, _ := os.ReadFile("/etc/hosts")
		text := string(base) + "\n"
		for name, addr := range o.hosts {
			text += addr + " " + name + "\n"
		}
		e.hostsFile = filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(e.hostsFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cli := imagetest.Docker(t)
	e.image = imagetest.BoxImage(t, cli)
	cli.Close()
	up := httptest.NewUnstartedServer(e.fake)
	anthropic := ""
	if o.tlsUpstream {
		up.StartTLS()
		caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
		if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		anthropic = fmt.Sprintf("ca_file = %q\n", caFile)
	} else {
		up.Start()
	}
	if o.usageView {
		anthropic += "usage_view = true\n"
	}
	t.Cleanup(up.Close)
	plan := "subscription_type = \"max\"\n"
	if o.plan != "" {
		plan = fmt.Sprintf("subscription_type = %q\n", o.plan)
	}
	if o.scopes != "" {
		plan += fmt.Sprintf("scopes = %q\n", o.scopes)
	}
	if o.fallbackToOwner {
		plan += "fallback_to_owner = true\n"
	}
	e.relay = &relayEcho{}
	relaySrv := httptest.NewServer(e.relay)
	t.Cleanup(relaySrv.Close)
	e.dir = filepath.Join(testenv.TraversableTempDir(t), "state")
	if err := os.MkdirAll(e.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("version = 1\n[anthropic]\nupstream = %q\n%s[claude]\nbinary = %q\n[docker]\nimage = %q\nbase_cache = \"/var/cache/paddock\"\n[sessions]\nmemory_mb = 1024\n[web]\nlisten = \"127.0.0.1:0\"\n%s[credential]\n%s[[relay]]\nname = \"mod\"\nprefix = \"/mod/\"\nupstream = %q\nheader = \"X-Hub-Secret\"\n",
		up.URL, anthropic, e.claude, e.image, o.web, plan, relaySrv.URL) + strings.Join(extra, "\n")
	if err := os.WriteFile(filepath.Join(e.dir, "paddock.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start()
	t.Cleanup(func() {
		// Every session, also one a failed test left running: a box
		// outlives its Runner, and prune leaves the sessions' own.
		var ss []struct {
			ID string `json:"id"`
		}
		if out, _, code := e.pdRun("ls", "--all-users", "--json"); code == 0 && json.Unmarshal([]byte(out), &ss) == nil {
			for _, s := range ss {
				e.pdRun("rm", "-f", s.ID)
			}
		}
		e.pd("prune", "--volumes")
		e.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("runner log:\n%s", e.log.String())
		}
	})
	return e
}

// start runs `paddock serve` as its own process and waits for its socket.
func (e *env) start() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	cmd := exec.Command(e.bin, "--state-dir", e.dir, "serve")
	if e.hostsFile != "" {
		// The same process (unshare and sh exec), so signals reach serve.
		cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
			`mount --bind "$0" /etc/hosts && exec "$@"`, e.hostsFile, e.bin, "--state-dir", e.dir, "serve")
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "CLAUDE_CODE_OAUTH_TOKEN=" + ownerToken}
	e.log = &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = e.log, e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.serve = cmd
	for i := 0; i < 200; i++ {
		if out, code := e.pdCode("credential", "status"); code == 0 && !strings.Contains(out, "not running") {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	e.t.Fatalf("serve did not come up:\n%s", e.log.String())
}

// stop ends serve with sig (SIGKILL: the kill -9 of a crash).
func (e *env) stop(sig syscall.Signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.serve == nil {
		return
	}
	_ = e.serve.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = e.serve.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = e.serve.Process.Kill()
	}
	e.serve = nil
}

// pdRun runs the CLI in-process.
func (e *env) pdRun(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code = cli.Main(ctx, append([]string{"--state-dir", e.dir}, args...), cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: []string{"PATH=/usr/bin:/bin"}})
	return out.String(), errb.String(), code
}

// pdCode runs the CLI and returns stdout and stderr together, and the code.
func (e *env) pdCode(args ...string) (string, int) {
	out, errs, code := e.pdRun(args...)
	return out + errs, code
}

// pd runs the CLI, fails the test unless it succeeds, and returns stdout.
func (e *env) pd(args ...string) string {
	e.t.Helper()
	out, errs, code := e.pdRun(args...)
	if code != 0 {
		e.t.Fatalf("paddock %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// screen is what claude's terminal shows now.
func (e *env) screen(name string) string {
	out, errs, code := e.pdRun("exec", name, "--", "tmux", "-L", "paddock", "capture-pane", "-p", "-t", "claude")
	if code != 0 {
		return fmt.Sprintf("(capture failed: exit %d: %s)", code, errs)
	}
	return out
}

// waitScreen waits until the screen shows want.
func (e *env) waitScreen(name, want string, d time.Duration) string {
	e.t.Helper()
	deadline := time.Now().Add(d)
	var s string
	for time.Now().Before(deadline) {
		if s = e.screen(name); strings.Contains(s, want) {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("screen of %s never showed %q:\n%s", name, want, s)
	return ""
}

// typeLine types a line into claude's prompt.
func (e *env) typeLine(name, line string) {
	e.t.Helper()
	e.pd("exec", name, "--", "tmux", "-L", "paddock", "send-keys", "-t", "claude", "-l", line)
	e.pd("exec", name, "--", "tmux", "-L", "paddock", "send-keys", "-t", "claude", "Enter")
}

// relayEcho records what reaches the relay upstream.
type relayEcho struct {
	mu     sync.Mutex
	secret []string
	path   string
}

func (r *relayEcho) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.secret, r.path = req.Header.Values("X-Hub-Secret"), req.URL.Path
	r.mu.Unlock()
	io.WriteString(w, "relayed")
}

// promptReady is what claude draws once it waits for input.
const promptReady = "bypass permissions on"

// backends opens each backend on the Runner's state, to look at objects.
func (e *env) backends() map[string]sandbox.Backend {
	e.t.Helper()
	lb, err := local.New(local.Config{Root: filepath.Join(e.dir, "local"), GuestBinary: filepath.Join(filepath.Dir(e.bin), guest.BinaryName)})
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := api.NewClient(filepath.Join(e.dir, "paddock.sock")).Health(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	db, err := docker.New(context.Background(), docker.Config{Image: e.image, Dir: filepath.Join(e.dir, "docker-view"), Owner: h.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	bes := map[string]sandbox.Backend{"local": lb, "docker": db}
	if e.kube != nil {
		kb, err := kubernetes.NewFromREST(context.Background(), kubernetes.Config{Namespace: e.kubeNS, Owner: h.ID,
			Image: imagetest.Tag, ImagePullPolicy: "Never", UnsafeUnenforcedNetworkPolicy: true}, e.kube.RESTConfig())
		if err != nil {
			e.t.Fatal(err)
		}
		bes["kubernetes"] = kb
	}
	return bes
}

// objectsOf lists every labelled object of a session on every backend.
func (e *env) objectsOf(id string) []sandbox.Object {
	e.t.Helper()
	var out []sandbox.Object
	for _, be := range e.backends() {
		objs, err := be.List(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		for _, o := range objs {
			if o.Session == id {
				out = append(out, o)
			}
		}
	}
	return out
}

// chat starts a detached session on backend, waits for Claude Code's
// prompt and has one exchange with the fake API; it returns the session's
// id and the token in its box.
func (e *env) chat(name, backend string, extra ...string) (id, token string) {
	e.t.Helper()
	id = strings.TrimSpace(e.pd(append([]string{"run", "-d", "--name", name, "--backend", backend}, extra...)...))
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
	return id, strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
}
