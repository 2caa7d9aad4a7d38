package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// smokePrompt makes a real model and the fake upstream alike run one
// shell command with the Bash tool (the fake scripts TOOLTEST).
const smokePrompt = "Use the Bash tool to run exactly this shell command, then stop. TOOLTEST: echo smoke-ok > /workspace/smoke.txt"

func smokeCmd(g *globals, o IO) *cobra.Command {
	var backend, version string
	var keep bool
	cmd := &cobra.Command{
		Use:   "smoke [--claude-version V] [--backend B]",
		Short: "Prove a Claude Code version works here before adopting it: banner, /status, a tool turn, a clean 401",
		Long: `Run a throwaway session and check, one line each: claude --version reports the pin, the
prompt is drawn, /status renders, a turn with a tool runs end to end (a file appears in
/workspace), and a dummy credential is refused cleanly (401, no retries). Exits 1 on any failure.
It spends one small real turn against the Runner's upstream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			name := "smoke-" + strings.Split(session.NewName(), "-")[1] + fmt.Sprint(time.Now().Unix()%100000)
			if version == "" {
				version = claudecode.PinnedVersion
			}
			s, err := c.CreateSession(ctx, api.CreateRequest{Name: name, Backend: backend, ClaudeVersion: version})
			if err != nil {
				return err
			}
			if !keep {
				defer c.RemoveSession(context.Background(), s.ID, false)
			}
			failed := 0
			report := func(check string, err error, detail string) bool {
				if err != nil {
					failed++
					fmt.Fprintf(o.Stdout, "FAIL %-12s %v\n", check, err)
					return false
				}
				fmt.Fprintf(o.Stdout, "ok   %-12s %s\n", check, detail)
				return true
			}
			run := func(argv ...string) (string, int, error) {
				es, err := c.Exec(ctx, s.ID, api.ExecRequest{Argv: argv})
				if err != nil {
					return "", -1, err
				}
				defer es.Close()
				_ = es.CloseStdin()
				var out bytes.Buffer
				code, err := es.Copy(&out, &out)
				return out.String(), code, err
			}
			screen := func() string {
				out, _, _ := run("tmux", "-L", "paddock", "capture-pane", "-p", "-t", "claude")
				return out
			}
			waitFor := func(want string, d time.Duration) error {
				deadline := time.Now().Add(d)
				for time.Now().Before(deadline) {
					if strings.Contains(strings.Join(strings.Fields(screen()), " "), want) {
						return nil
					}
					time.Sleep(100 * time.Millisecond)
				}
				return fmt.Errorf("the screen never showed %q", want)
			}
			keys := func(k ...string) error {
				_, code, err := run(append([]string{"tmux", "-L", "paddock", "send-keys", "-t", "claude"}, k...)...)
				if err == nil && code != 0 {
					err = fmt.Errorf("send-keys exit %d", code)
				}
				return err
			}

			out, code, err := run("claude", "--version")
			if err == nil && (code != 0 || !strings.HasPrefix(out, version+" ")) {
				err = fmt.Errorf("claude --version said %q (exit %d), not %s", strings.TrimSpace(out), code, version)
			}
			report("banner", err, strings.TrimSpace(out))
			report("prompt", waitFor("bypass permissions on", 60*time.Second), "Claude Code drew its prompt")

			err = keys("-l", "/status")
			if err == nil {
				time.Sleep(300 * time.Millisecond)
				err = keys("Enter")
			}
			if err == nil {
				err = waitFor("Version: "+version, 30*time.Second)
			}
			report("/status", err, "rendered in the terminal")
			_ = keys("Escape")
			time.Sleep(300 * time.Millisecond)

			err = keys("-l", smokePrompt)
			if err == nil {
				time.Sleep(300 * time.Millisecond)
				err = keys("Enter")
			}
			if err == nil {
				deadline := time.Now().Add(3 * time.Minute)
				for {
					out, _, _ = run("cat", "/workspace/smoke.txt")
					if strings.TrimSpace(out) == "smoke-ok" {
						break
					}
					if time.Now().After(deadline) {
						err = fmt.Errorf("no /workspace/smoke.txt after the turn")
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			report("tool turn", err, "a Bash tool call wrote /workspace/smoke.txt")

			// A dummy credential, through the same proxy: refused at once.
			start := time.Now()
			es, err := c.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sh", "-c",
				`for v in CLAUDE_CODE_OAUTH_TOKEN ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN; do eval "[ -n \"\$$v\" ] && export $v=dummy-credential-for-smoke"; done; CLAUDE_CODE_MAX_RETRIES=0 exec claude -p hello`}})
			if err == nil {
				_ = es.CloseStdin()
				var b bytes.Buffer
				code, err = es.Copy(&b, &b)
				es.Close()
				out = b.String()
				switch {
				case err != nil:
				case code == 0:
					err = fmt.Errorf("a dummy credential worked: %s", strings.TrimSpace(out))
				case !strings.Contains(out, "Not logged in") && !strings.Contains(out, "Invalid API key") && !strings.Contains(out, "401"):
					err = fmt.Errorf("claude failed, but not on authentication: %s", strings.TrimSpace(out))
				case time.Since(start) > 30*time.Second:
					err = fmt.Errorf("the refusal took %v", time.Since(start).Round(time.Second))
				}
			}
			report("401", err, fmt.Sprintf("a dummy credential was refused cleanly in %v: %s", time.Since(start).Round(100*time.Millisecond), firstLine(out)))
			if failed > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "local, docker or kubernetes (default from config)")
	cmd.Flags().StringVar(&version, "claude-version", "", "the Claude Code version to prove (default: the pinned "+claudecode.PinnedVersion+"); local installs it from npm, docker needs paddock/box:claude-<version>")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the smoke session afterwards, to look at it")
	return cmd
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
