package runner

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// Fake owner credentials, obviously not real.
const (
	ownerKey   = "sk-fake-owner-key-for-claude-test-0001"
	ownerOAuth = "sk-fake-owner-oauth-for-claude-test-01"
)

// runClaude runs the real pinned `claude -p` on the host with only the
// session token, against the Runner's credential proxy.
func runClaude(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	base := []string{
		"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "PATH=/usr/bin:/bin",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1", "CLAUDE_CODE_MAX_RETRIES=0", "IS_SANDBOX=1",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = append(base, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestRealClaudeThroughProxy(t *testing.T) {
	bin := testenv.Claude(t)
	for _, tc := range []struct {
		name   string
		kind   credential.Kind
		owner  string
		listen string
	}{
		{"api key over tcp", credential.KindAPIKey, ownerKey, "127.0.0.1:0"},
		{"oauth over unix socket", credential.KindOAuth, ownerOAuth, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := startRunner(t, []string{tc.kind.EnvVar() + "=" + tc.owner}, []string{tc.owner}, tc.listen)
			tok, err := tr.Tokens().Issue("s1", tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			env := []string{tc.kind.EnvVar() + "=" + tok.Reveal()}
			if strings.HasPrefix(tr.ProxyAddr(), "unix:") {
				env = append(env, "ANTHROPIC_UNIX_SOCKET="+strings.TrimPrefix(tr.ProxyAddr(), "unix:"), "ANTHROPIC_BASE_URL=http://localhost")
			} else {
				env = append(env, "ANTHROPIC_BASE_URL=http://"+tr.ProxyAddr())
			}
			out, err := runClaude(t, bin, env, "-p", "say hi")
			if err != nil || !strings.Contains(out, "hi from the fake server") {
				t.Fatalf("claude: %v\n%s\nrunner log:\n%s", err, out, tr.logs.String())
			}
			// A tool turn: the fake asks for Bash, the CLI runs it, sends the result back.
			proof := filepath.Join(t.TempDir(), "proof.txt")
			out, err = runClaude(t, bin, env, "--dangerously-skip-permissions", "-p", "TOOLTEST: echo hello > "+proof)
			if err != nil || !strings.Contains(out, "The tool ran. Done.") {
				t.Fatalf("tool turn: %v\n%s", err, out)
			}
			if b, _ := os.ReadFile(proof); string(b) != "hello\n" {
				t.Fatalf("tool did not run: %q", b)
			}
			reqs := tr.fake.Requests()
			if len(reqs) < 3 {
				t.Fatalf("%d upstream requests", len(reqs))
			}
			for _, r := range reqs {
				if r.Credential != tc.owner || r.CredentialHeader != strings.ToLower(tc.kind.Header()) {
					t.Fatalf("upstream saw credential %q in %q", r.Credential, r.CredentialHeader)
				}
				for k, vs := range r.Header {
					for _, v := range vs {
						if strings.Contains(v, tok.Reveal()) {
							t.Fatalf("session token reached the upstream in %s", k)
						}
					}
				}
				if r.Path != "/v1/messages" || r.RawQuery != "beta=true" {
					t.Fatalf("upstream request %s?%s", r.Path, r.RawQuery)
				}
				beta := r.Header.Get("Anthropic-Beta")
				if (tc.kind == credential.KindOAuth) != strings.Contains(beta, "oauth-2025-04-20") {
					t.Fatalf("beta list does not match the kind: %s", beta)
				}
			}
			// The decision log has the turn, with tokens and the tool id.
			tr.Proxy().Drain()
			es, err := tr.Logs(context.Background(), "s1", 0)
			if err != nil || len(es) != len(reqs) {
				t.Fatalf("%d entries for %d requests: %v", len(es), len(reqs), err)
			}
			last := es[len(es)-1]
			if last.Model == "" || last.OutputTokens == 0 || len(last.ToolResultIDs) != 1 || last.ToolResultIDs[0] != "toolu_fake_01" {
				t.Fatalf("last entry %+v", last)
			}
			// Revoked: refused at once, nothing reaches the upstream.
			tr.fake.Reset()
			if err := tr.Tokens().Revoke("s1"); err != nil {
				t.Fatal(err)
			}
			out, err = runClaude(t, bin, env, "-p", "say hi")
			if err == nil || len(tr.fake.Requests()) != 0 {
				t.Fatalf("revoked token worked: %v %d\n%s", err, len(tr.fake.Requests()), out)
			}
			for _, s := range []string{tc.owner, tok.Reveal()} {
				if strings.Contains(tr.logs.String(), s) {
					t.Fatal("a secret is in the Runner log")
				}
			}
		})
	}
}
