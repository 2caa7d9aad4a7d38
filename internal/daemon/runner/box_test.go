package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// backends returns each backend this host can run, set up for tests.
func testBackends(t testing.TB) map[string]sandbox.Backend {
	t.Helper()
	testenv.Root(t)
	claude := testenv.Claude(t)
	out := map[string]sandbox.Backend{}
	root := filepath.Join(testenv.TraversableTempDir(t), "local")
	lb, err := local.New(local.Config{Root: root, GuestBinary: testenv.GuestBinary(t), ClaudeBinary: claude})
	t.Cleanup(func() {
		if t.Failed() { // the guest's own output, if it said anything
			logs, _ := filepath.Glob(filepath.Join(root, "boxes", "*", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	if err != nil {
		testenv.Missing(t, "local backend: "+err.Error())
	}
	out["local"] = lb
	cli := imagetest.Docker(t)
	img := imagetest.BoxImage(t, cli)
	db, err := docker.New(context.Background(), docker.Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(t), "docker"), Owner: testenv.UniqueOwner(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	out["docker"] = db
	return out
}

func execIn(t *testing.T, cl *channel.Client, env []string, argv ...string) (string, int) {
	t.Helper()
	return execInStdin(t, cl, env, "", argv...)
}

// execInStdin also writes stdin, then closes it.
func execInStdin(t *testing.T, cl *channel.Client, env []string, stdin string, argv ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	p, err := cl.Exec(channel.ExecOptions{Argv: argv, Env: env, Dir: sandbox.WorkspaceDir, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if stdin != "" {
		p.Write([]byte(stdin))
	}
	p.CloseStdin()
	done := make(chan struct{})
	var code int
	go func() { code, _ = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		p.Close()
		t.Fatalf("%v did not finish: %s", argv, out.String())
	}
	return out.String(), code
}

// TestClaudeInBoxThroughChannel: the real pinned claude -p runs in a box of
// each backend, with no interface but lo, and reaches the fake upstream
// through the channel and the credential proxy with a session token only.
func TestClaudeInBoxThroughChannel(t *testing.T) {
	for name, be := range testBackends(t) {
		t.Run(name, func(t *testing.T) {
			tr := startRunner(t, []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}, []string{ownerOAuth}, "off")
			ctx := context.Background()
			session := "claude-" + name
			bx, err := be.Create(ctx, sandbox.CreateOptions{Session: session})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
			if _, err := be.Start(ctx, bx.ID); err != nil {
				t.Fatal(err)
			}
			link, err := tr.Link(ctx, be, bx.ID, session)
			if err != nil {
				t.Fatal(err)
			}
			defer link.Close()
			tok, err := tr.Tokens().Issue(session, credential.KindOAuth)
			if err != nil {
				t.Fatal(err)
			}
			env := []string{
				"PATH=/opt/claude/bin:/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir,
				"CLAUDE_CONFIG_DIR=" + sandbox.HomeDir + "/.claude",
				"ANTHROPIC_BASE_URL=http://" + BoxAPIAddr, "CLAUDE_CODE_OAUTH_TOKEN=" + tok.Reveal(),
				"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1", "CLAUDE_CODE_MAX_RETRIES=0",
			}
			// No interface but lo in this very box.
			if out, _ := execIn(t, link.Client, env, "sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(out) != "lo" {
				t.Fatalf("interfaces: %q", out)
			}
			out, code := execIn(t, link.Client, env, "claude", "-p", "say hi")
			if code != 0 || !strings.Contains(out, "hi from the fake server") {
				t.Fatalf("claude in the box: %d\n%s\nrunner log:\n%s", code, out, tr.logs.String())
			}
			out, code = execIn(t, link.Client, env, "claude", "--dangerously-skip-permissions", "-p", "TOOLTEST: echo hello > /workspace/proof.txt")
			if code != 0 || !strings.Contains(out, "The tool ran. Done.") {
				t.Fatalf("tool turn: %d\n%s", code, out)
			}
			if out, _ := execIn(t, link.Client, env, "cat", "/workspace/proof.txt"); out != "hello\n" {
				t.Fatalf("proof: %q", out)
			}
			for _, r := range tr.fake.Requests() {
				if r.Credential != ownerOAuth {
					t.Fatalf("upstream saw %q", r.Credential)
				}
			}
			if n := len(tr.fake.Requests()); n != 3 {
				t.Fatalf("%d upstream requests, want 3", n)
			}
			// The real credential is nowhere in the box: env, files, argv. The
			// needle travels on stdin, so the scan itself does not hold it.
			out, _ = execInStdin(t, link.Client, env, ownerOAuth+"\n", "sh", "-c", "grep -rlF -f /dev/stdin /home /workspace /tmp /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo scanned")
			if strings.TrimSpace(out) != "scanned" {
				t.Fatalf("the real credential is in the box: %q", out)
			}
			// Another session's token is refused on this box's channel.
			other, _ := tr.Tokens().Issue("someone-else", credential.KindOAuth)
			tr.fake.Reset()
			env2 := append(append([]string(nil), env...), "CLAUDE_CODE_OAUTH_TOKEN="+other.Reveal())
			out, code = execIn(t, link.Client, env2, "claude", "-p", "say hi")
			if code == 0 || len(tr.fake.Requests()) != 0 {
				t.Fatalf("a token of another session worked in this box: %d %s", code, out)
			}
			tr.Proxy().Drain()
		})
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
