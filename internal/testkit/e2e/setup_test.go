package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/cli"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// pdAs runs the CLI in-process with env as the invoking environment (HOME
// and the like), as a person's shell would give it.
func (e *env) pdAs(envv []string, args ...string) (stdout, stderr string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := cli.Main(ctx, append([]string{"--state-dir", e.dir}, args...), cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: envv})
	if code != 0 {
		e.t.Fatalf("paddock %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// Markers the test looks for; fake secrets that must never reach a box.
const (
	setupMarker   = "PIRATE-RULES-7731"
	promptMarker  = "--TASK-9942 say hi" // starts with "--": must not be taken for a flag
	fakeOAuth     = "sk-ant-oat01-e2e-host-credential-never-in-a-box"
	fakeHelper    = "pass show anthropic/e2e-never-in-a-box"
	fakeBaseURL   = "http://evil.example:9/never-in-a-box"
	fakeMCPSecret = "sk-e2e-mcp-secret-never-in-a-box"
)

// ownerHome makes a person's home with a Claude Code setup (CLAUDE.md, an
// agent, a skill, settings, a user-scope MCP server) beside what must
// never come (credentials, a credential helper, a base URL, transcripts,
// an MCP server's token) and a git identity.
func ownerHome(t *testing.T) string {
	home := t.TempDir()
	files := map[string]string{
		".claude/CLAUDE.md":                       "Always talk like a pirate. " + setupMarker + "\n",
		".claude/agents/parrot.md":                "---\nname: parrot\ndescription: repeats things\n---\nRepeat what you are told.\n",
		".claude/skills/shanty/SKILL.md":          "---\nname: shanty\ndescription: sings a sea shanty\n---\nSing.\n",
		".claude/settings.json":                   `{"apiKeyHelper":"` + fakeHelper + `","env":{"ANTHROPIC_BASE_URL":"` + fakeBaseURL + `","PADDOCK_E2E_KEPT":"yes"},"includeCoAuthoredBy":false}`,
		".claude/.credentials.json":               `{"claudeAiOauth":{"accessToken":"` + fakeOAuth + `"}}`,
		".claude/projects/-x/old.jsonl":           `{"type":"user","message":"old transcript"}`,
		".claude.json":                            `{"oauthAccount":{"emailAddress":"a@example.org"},"mcpServers":{"e2e-tools":{"command":"/bin/true","args":["serve"],"env":{"API_TOKEN":"` + fakeMCPSecret + `","MODE":"fast"}}}}`,
		".gitconfig":                              "[user]\n\tname = Ada \\\"Pirate\\\" Lovelace\n\temail = ada@example.org\n[credential]\n\thelper = store\n",
		".claude/plugins/known_marketplaces.json": `{}`,
	}
	for p, c := range files {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// TestClaudeSetupAndPrompt: on each backend, `paddock run --prompt` with a
// person's Claude Code setup: the CLAUDE.md, an agent, a skill, the kept
// settings, the user-scope MCP server and the git identity are in the box;
// the prompt is claude's first user message upstream, with the CLAUDE.md
// text in the same request; the credentials file, the credential helper,
// the base URL and the MCP server's token are not in the box, and the
// person was told what was dropped; the prompt is not in the Runner's log,
// and a wake does not send it again.
func TestClaudeSetupAndPrompt(t *testing.T) {
	e := newEnv(t)
	home := ownerHome(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			e.fake.Reset()
			name := "setup-" + backend
			_, stderr := e.pdAs([]string{"PATH=/usr/bin:/bin", "HOME=" + home},
				"run", "-d", "--name", name, "--backend", backend, "--prompt", promptMarker)
			for _, want := range []string{"settings.json: apiKeyHelper: dropped", "settings.json: env.ANTHROPIC_BASE_URL: dropped", "mcpServers.e2e-tools.env.API_TOKEN: dropped"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("run did not say %q:\n%s", want, stderr)
				}
			}
			for _, secret := range []string{fakeHelper, fakeBaseURL, fakeMCPSecret, fakeOAuth} {
				if strings.Contains(stderr, secret) {
					t.Errorf("run printed a value it dropped: %s", stderr)
				}
			}

			// The prompt is the first user message, CLAUDE.md beside it.
			e.waitScreen(name, "hi from the fake server (turn 1)", 60*time.Second)
			var first *fakeapi.Request
			for _, r := range e.fake.Requests() {
				if strings.Contains(string(r.Body), "TASK-9942") {
					r := r
					first = &r
					break
				}
			}
			if first == nil {
				t.Fatal("no request upstream carried the prompt")
			}
			var body struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(first.Body, &body); err != nil || len(body.Messages) == 0 {
				t.Fatalf("request body: %v", err)
			}
			if m := body.Messages[0]; m.Role != "user" || !strings.Contains(string(m.Content), promptMarker) {
				t.Fatalf("the prompt is not the first user message: %s", first.Body)
			}
			if !strings.Contains(string(first.Body), setupMarker) {
				t.Errorf("the owner's CLAUDE.md did not reach the model with the prompt")
			}

			// What is in the box.
			cat := func(p string) string { return e.pd("exec", name, "--", "cat", sandbox.HomeDir+"/"+p) }
			if got := cat(".claude/CLAUDE.md"); !strings.Contains(got, setupMarker) {
				t.Errorf("CLAUDE.md: %q", got)
			}
			if got := cat(".claude/agents/parrot.md"); !strings.Contains(got, "name: parrot") {
				t.Errorf("agent: %q", got)
			}
			if got := cat(".claude/skills/shanty/SKILL.md"); !strings.Contains(got, "name: shanty") {
				t.Errorf("skill: %q", got)
			}
			settings := cat(".claude/settings.json")
			var st struct {
				Env    map[string]string `json:"env"`
				Skip   bool              `json:"skipDangerousModePermissionPrompt"`
				CoAuth *bool             `json:"includeCoAuthoredBy"`
				Helper *string           `json:"apiKeyHelper"`
			}
			if err := json.Unmarshal([]byte(settings), &st); err != nil || st.Env["PADDOCK_E2E_KEPT"] != "yes" || !st.Skip || st.CoAuth == nil || st.Helper != nil {
				t.Errorf("settings.json in the box: %v %s", err, settings)
			}
			var cj struct {
				MCP map[string]struct {
					Command string            `json:"command"`
					Env     map[string]string `json:"env"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(cat(".claude/.claude.json")), &cj); err != nil || cj.MCP["e2e-tools"].Command != "/bin/true" || cj.MCP["e2e-tools"].Env["MODE"] != "fast" {
				t.Errorf("the MCP server did not come: %v %+v", err, cj.MCP)
			}
			gitcfg := cat(".gitconfig")
			if !strings.Contains(gitcfg, `email = "ada@example.org"`) || !strings.Contains(gitcfg, `name = "Ada \"Pirate\" Lovelace"`) || strings.Contains(gitcfg, "helper") {
				t.Errorf(".gitconfig: %q", gitcfg)
			}
			// Where the box has git, it reads the identity back.
			if out, _, code := e.pdRun("exec", name, "--", "sh", "-c", "command -v git >/dev/null || exit 3; git config --global user.email"); code != 3 && out != "ada@example.org\n" {
				t.Errorf("git config --global user.email in the box: %q (exit %d)", out, code)
			}
			// Nothing of what never comes, anywhere in the box's home.
			grep := e.pd("exec", name, "--", "sh", "-c",
				`grep -rlF -D skip -e "$1" -e "$2" -e "$3" -e "$4" `+sandbox.HomeDir+` 2>/dev/null; ls -a `+sandbox.HomeDir+`/.claude/projects 2>/dev/null; true`,
				"sh", fakeOAuth, fakeHelper, fakeBaseURL, fakeMCPSecret)
			if strings.Contains(grep, "/") || strings.Contains(grep, "-x") {
				t.Errorf("found in the box: %q", grep)
			}
			if out, _, code := e.pdRun("exec", name, "--", "test", "-e", sandbox.HomeDir+"/.cache/paddock/first-prompt"); code == 0 {
				t.Errorf("the prompt file is still in the box: %s", out)
			}
			if strings.Contains(e.log.String(), "TASK-9942") || strings.Contains(e.log.String(), setupMarker) {
				t.Error("the Runner logged the prompt or the setup")
			}

			// A wake resumes; the task is not given again.
			e.pd("sleep", name)
			n := len(e.fake.Requests())
			e.pd("wake", name)
			e.waitScreen(name, promptReady, 60*time.Second)
			e.typeLine(name, "again")
			e.waitScreen(name, "hi from the fake server (turn 2)", 60*time.Second)
			for _, r := range e.fake.Requests()[n:] {
				if strings.Count(string(r.Body), "TASK-9942") > 1 {
					t.Errorf("the prompt was sent again after a wake")
				}
			}
			e.pd("rm", "-f", name)
		})
	}
}

// TestRunWithoutClaudeConfig: --no-claude-config and --no-git-identity
// bring nothing of the person's setup.
func TestRunWithoutClaudeConfig(t *testing.T) {
	e := newEnv(t)
	home := ownerHome(t)
	name := "nosetup"
	e.pdAs([]string{"PATH=/usr/bin:/bin", "HOME=" + home}, "run", "-d", "--name", name, "--backend", "local", "--no-claude-config", "--no-git-identity")
	e.waitScreen(name, promptReady, 60*time.Second)
	if out, _, code := e.pdRun("exec", name, "--", "sh", "-c", "cat "+sandbox.HomeDir+"/.claude/CLAUDE.md "+sandbox.HomeDir+"/.gitconfig"); code == 0 || strings.Contains(out, setupMarker) {
		t.Errorf("brought anyway: %q", out)
	}
	e.pd("rm", "-f", name)
}
