package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
)

// TestRunSetupPrompt: --prompt, --prompt-file FILE and --prompt-file -
// fill the request; conflicts and an oversized prompt are usage errors
// that say what to do.
func TestRunSetupPrompt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "task.md")
	os.WriteFile(file, []byte("from a file\n"), 0o600)
	big := filepath.Join(t.TempDir(), "big.md")
	os.WriteFile(big, bytes.Repeat([]byte("x"), firstprompt.MaxBytes+1), 0o600)
	for _, tc := range []struct {
		name       string
		rs         runSetup
		stdin      string
		stdinTaken bool
		want       string
		err        string
	}{
		{"flag", runSetup{prompt: "-x do it"}, "", false, "-x do it", ""},
		{"file", runSetup{promptFile: file}, "", false, "from a file\n", ""},
		{"stdin", runSetup{promptFile: "-"}, "piped task", false, "piped task", ""},
		{"none", runSetup{}, "", false, "", ""},
		{"both", runSetup{prompt: "a", promptFile: file}, "", false, "", "give one"},
		{"stdin twice", runSetup{promptFile: "-"}, "x", true, "", "both read stdin"},
		{"too big", runSetup{promptFile: big}, "", false, "", "at most"},
		{"empty file", runSetup{promptFile: "-"}, "", false, "", "empty"},
		{"missing file", runSetup{promptFile: "/nonexistent/x"}, "", false, "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rs.noClaudeConfig, tc.rs.noGitIdentity = true, true
			var req api.CreateRequest
			var stderr bytes.Buffer
			err := tc.rs.fill(context.Background(), &req, IO{Stdin: strings.NewReader(tc.stdin), Stderr: &stderr}, tc.stdinTaken)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(req.Prompt) != tc.want {
				t.Fatalf("prompt %q, %v", string(req.Prompt), err)
			}
		})
	}
}

// TestRunSetupBrokenHome: a Claude setup that cannot be read whole never
// stops paddock run: it says what it left out.
func TestRunSetupBrokenHome(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte("{broken"), 0o644)
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte("[]"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(home, ".claude", "CLAUDE.md"))
	var req api.CreateRequest
	var stderr bytes.Buffer
	rs := runSetup{noGitIdentity: true}
	if err := rs.fill(context.Background(), &req, IO{Env: []string{"HOME=" + home}, Stderr: &stderr}, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"claude setup: settings.json: not a JSON object", "claude setup: .claude.json: mcpServers: skipped", "claude setup: CLAUDE.md: skipped: a symlink that leads out"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if req.ClaudeSetup != nil {
		t.Fatalf("brought %+v", req.ClaudeSetup)
	}
	// An explicit --claude-config that is not there is an error.
	rs = runSetup{claudeConfig: filepath.Join(home, "nope"), noGitIdentity: true}
	if err := rs.fill(context.Background(), &req, IO{Stderr: &stderr}, false); err == nil {
		t.Fatal("no error for a missing --claude-config")
	}
}
