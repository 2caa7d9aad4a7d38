package runner

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/attacks"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// directUpstream is the fake API over TLS (a test certificate the Runner
// trusts through anthropic.ca_file), with the direct routes added.
type directUpstream struct {
	fake    *fakeapi.Server
	mu      sync.Mutex
	seen    []string // METHOD path credential
	queries []string // the raw query of each
}

func (d *directUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.seen = append(d.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	d.queries = append(d.queries, r.URL.RawQuery)
	d.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"enabled":true}`)
		return
	}
	d.fake.ServeHTTP(w, r)
}

func (d *directUpstream) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen, d.queries = nil, nil
}

func (d *directUpstream) query(i int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries[i]
}

func (d *directUpstream) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// directRunner is a Runner with anthropic.direct on, against a TLS
// upstream, and a session token for session id; each of more changes the
// config first.
func directRunner(t *testing.T, id string, more ...func(*config.Config)) (*Runner, *directUpstream, secret.Value) {
	t.Helper()
	up := &directUpstream{fake: fakeapi.New(realDirectCred)}
	srv := httptest.NewTLSServer(up)
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	cfg := config.Default()
	cfg.Anthropic.Upstream = srv.URL
	cfg.Anthropic.CAFile = caFile
	cfg.Proxy.Listen = "off"
	cfg.Web.Listen = "off"
	cfg.Credential.ClaudeLoginFile = "off"
	for _, f := range more {
		f(&cfg)
	}
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + realDirectCred}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	// A proxy-mode session's record (no box: the test is the box).
	if err := r.save(&session.Session{ID: id, Name: id, CredentialMode: session.ModeProxy, Desired: session.Running, Observed: session.Running}); err != nil {
		t.Fatal(err)
	}
	tok, err := r.Tokens().Issue(id, credential.KindOAuth)
	if err != nil {
		t.Fatal(err)
	}
	return r, up, tok
}

const realDirectCred = "sk-fake-owner-direct-oauth-0000000000"

// boxCONNECT opens what a box's Claude Code opens through HTTPS_PROXY:
// CONNECT host:443 over session id's channel, then TLS with sni, trusting
// the Runner's CA (NODE_EXTRA_CA_CERTS). The CONNECT's status line comes
// back, and the TLS connection if it was made.
func boxCONNECT(t *testing.T, r *Runner, id, host, sni string) (string, *tls.Conn, error) {
	t.Helper()
	box, runner := net.Pipe()
	t.Cleanup(func() { box.Close() })
	if !r.egressConns.push(&sessionConn{Conn: runner, r: bufio.NewReader(runner), session: id}) {
		t.Fatal("the egress proxy is not serving")
	}
	box.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(box, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	br := bufio.NewReader(box)
	status, err := br.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	if !strings.Contains(status, " 200 ") {
		return strings.TrimSpace(status), nil, nil
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.ca.PEM)
	tc := tls.Client(box, &tls.Config{ServerName: sni, RootCAs: pool})
	return strings.TrimSpace(status), tc, tc.Handshake()
}

// send sends one request on a terminated connection and reads the answer.
func send(t *testing.T, tc *tls.Conn, method, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+DirectHost+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if err := req.Write(tc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestDirectPath: CONNECT api.anthropic.com:443 from a box is answered by
// the Runner, in the offline posture too: the allowlisted routes go
// upstream with the real credential swapped in; everything else (other
// paths, other hosts, another SNI, a token in the wrong header, another
// session's token, none) is refused with no upstream request.
func TestDirectPath(t *testing.T) {
	r, up, tok := directRunner(t, "sessdirect01", func(c *config.Config) { c.Anthropic.UsageView = true })
	bearer := map[string]string{"Authorization": "Bearer " + tok.Reveal()}

	status, tc, err := boxCONNECT(t, r, "sessdirect01", DirectHost, DirectHost)
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("CONNECT %s: %q %v", DirectHost, status, err)
	}
	if code, body := send(t, tc, "GET", "/api/claude_code/settings", bearer); code != 200 || !strings.Contains(body, "enabled") {
		t.Fatalf("fast mode's status: %d %s", code, body)
	}
	got := up.requests()
	if len(got) != 1 || got[0] != "GET /api/claude_code/settings Bearer "+realDirectCred {
		t.Fatalf("the upstream saw %q", got)
	}
	// /status usage: each query the CLI sends, and nothing else.
	for _, q := range []string{"", "?skip_spend=1", "?at_wall=1&skip_spend=1", "?cedar_ember=1&skip_spend=1", "?starry_waterfall=cli_menu&skip_spend=1"} {
		if code, body := send(t, tc, "GET", "/api/oauth/usage"+q, bearer); code != 200 {
			t.Fatalf("usage%s: %d %s", q, code, body)
		}
	}
	if got := up.requests(); len(got) != 6 || got[5] != "GET /api/oauth/usage Bearer "+realDirectCred ||
		up.query(5) != "skip_spend=1&starry_waterfall=cli_menu" {
		t.Fatalf("the upstream saw %q (last query %q)", got, up.query(len(got)-1))
	}
	up.reset()
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
		code         int
	}{
		{"GET", "/api/oauth/usage?skip_spend=0", bearer, 400},
		{"GET", "/api/oauth/usage?at_wall=1&at_wall=1", bearer, 400},
		{"GET", "/api/oauth/usage?starry_waterfall=../profile", bearer, 400},
		{"GET", "/api/oauth/usage?org=00000000-0000-4000-8000-000000000002", bearer, 400},
		{"POST", "/api/oauth/usage", bearer, 405},
		{"GET", "/api/oauth/usage/../profile", bearer, 404},
		{"POST", "/api/event_logging/v2/batch", bearer, 404},
		{"POST", "/api/eval/sdk-zAZezfDKGoZuXXKe", bearer, 404},
		{"GET", "/api/claude_cli/bootstrap", bearer, 404},
		{"GET", "/api/oauth/profile", bearer, 404},
		{"GET", "/v1/mcp_servers", bearer, 404},
		{"GET", "/api/claude_code/settings/../oauth/profile", bearer, 404},
		{"GET", "/API/claude_code_penguin_mode", bearer, 404},
		{"POST", "/api/claude_code/settings", bearer, 405},
		{"GET", "/api/claude_code/settings", nil, 401},
		{"GET", "/api/claude_code/settings", map[string]string{"X-Api-Key": tok.Reveal()}, 401},
		{"GET", "/api/claude_code/settings", map[string]string{"Authorization": "Bearer " + realDirectCred}, 401},
		{"GET", "/api/claude_code/settings", map[string]string{"X-Token": tok.Reveal()}, 401},
	} {
		code, body := send(t, tc, c.method, c.path, c.hdr)
		if code != c.code {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, code, c.code, body)
		}
		if strings.Contains(body, realDirectCred) {
			t.Fatalf("the credential in an answer to the box: %s", body)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d upstream requests; the refused ones reached it: %q", n, up.requests())
	}

	// Another session's token on this session's connection: refused.
	other, _ := r.Tokens().Issue("sessdirect02", credential.KindOAuth)
	if code, _ := send(t, tc, "GET", "/api/claude_code/settings", map[string]string{"Authorization": "Bearer " + other.Reveal()}); code != 403 {
		t.Fatalf("another session's token: %d", code)
	}
	// Another host: the posture decides (offline: refused); another SNI
	// on the API host's CONNECT: no handshake.
	if status, _, _ := boxCONNECT(t, r, "sessdirect01", "platform.claude.com", "platform.claude.com"); !strings.Contains(status, " 403 ") {
		t.Fatalf("CONNECT platform.claude.com offline: %q", status)
	}
	if _, _, err := boxCONNECT(t, r, "sessdirect01", DirectHost, "evil.example"); err == nil {
		t.Fatal("a handshake for another SNI")
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d upstream requests", n)
	}
	// The decisions are logged: the one forwarded, the refusals.
	time.Sleep(200 * time.Millisecond)
	es, _ := r.decisions.Read("sessdirect01", 0)
	var forwarded, refused, terminated int
	for _, e := range es {
		switch {
		case e.Decision == "terminated":
			terminated++
		case e.Decision == "forwarded":
			forwarded++
		case e.Decision == "refused":
			refused++
		}
	}
	if terminated < 2 || forwarded != 6 || refused < 16 {
		t.Fatalf("the decision log: %d terminated, %d forwarded, %d refused", terminated, forwarded, refused)
	}
}

// TestAttackSuiteOverTheDirectPath: the credential proxy's attack suite,
// sent inside TLS the Runner terminated for the API host (what an agent
// in a box can reach there): each case causes at most the upstream
// requests it allows, each with the owner's credential once, never the
// box's token or a smuggled one, and only on an allowed route.
func TestAttackSuiteOverTheDirectPath(t *testing.T) {
	r, up, tok := directRunner(t, "sessattack01")
	for _, tc := range attacks.Cases("Authorization", "Bearer "+tok.Reveal(), "X-Api-Key", "") {
		t.Run(tc.Name, func(t *testing.T) {
			before := len(up.requests())
			_, conn, err := boxCONNECT(t, r, "sessattack01", DirectHost, DirectHost)
			if err != nil {
				t.Fatal(err)
			}
			go func() { io.WriteString(conn, tc.Req+attacks.Sentinel) }()
			resps := attacks.ReadResponses(conn)
			seen := up.requests()[before:]
			if len(seen) != tc.Want {
				var codes []int
				for _, x := range resps {
					codes = append(codes, x.StatusCode)
				}
				t.Fatalf("upstream saw %d requests, want %d (answers %v): %q", len(seen), tc.Want, codes, seen)
			}
			for _, s := range seen {
				method, rest, _ := strings.Cut(s, " ")
				path, auth, _ := strings.Cut(rest, " ")
				if auth != "Bearer "+realDirectCred || strings.Contains(s, tok.Reveal()) || strings.Contains(s, attacks.Junk) {
					t.Fatalf("upstream saw %q", s)
				}
				switch method + " " + path {
				case "POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models",
					"GET /api/claude_code/settings", "GET /api/claude_code/policy_limits", "GET /api/oauth/usage":
				default:
					t.Fatalf("upstream saw %s %s", method, path)
				}
			}
		})
	}
}

// TestDirectUsageViewOff (issue 31, item 13): without anthropic.usage_view
// (the default) the direct path refuses GET /api/oauth/usage with 403,
// saying which setting, and nothing goes upstream; the other direct routes
// still do.
func TestDirectUsageViewOff(t *testing.T) {
	r, up, tok := directRunner(t, "sessusage01")
	bearer := map[string]string{"Authorization": "Bearer " + tok.Reveal()}
	status, tc, err := boxCONNECT(t, r, "sessusage01", DirectHost, DirectHost)
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("CONNECT %s: %q %v", DirectHost, status, err)
	}
	if code, body := send(t, tc, "GET", "/api/oauth/usage?skip_spend=1", bearer); code != 403 || !strings.Contains(body, "anthropic.usage_view is off") {
		t.Fatalf("usage without usage_view: %d %s", code, body)
	}
	if got := up.requests(); len(got) != 0 {
		t.Fatalf("the upstream saw %q", got)
	}
	if code, body := send(t, tc, "GET", "/api/claude_code/settings", bearer); code != 200 {
		t.Fatalf("settings: %d %s", code, body)
	}
}
