package claudecode

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestSeedClaudeJSONKeepsAndSets(t *testing.T) {
	existing := []byte(`{"numStartups": 3, "projects": {"/workspace": {"allowedTools": ["x"]}, "/other": {"a": 1}}, "customApiKeyResponses": {"approved": ["old"]}}`)
	out, kept, err := SeedClaudeJSON(existing, "/workspace", "pdk_st_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG")
	if err != nil || !kept {
		t.Fatal(kept, err)
	}
	var d map[string]any
	json.Unmarshal(out, &d)
	p := d["projects"].(map[string]any)["/workspace"].(map[string]any)
	if d["hasCompletedOnboarding"] != true || p["hasTrustDialogAccepted"] != true || p["allowedTools"] == nil || d["numStartups"].(float64) != 3 {
		t.Fatalf("%s", out)
	}
	ap := d["customApiKeyResponses"].(map[string]any)["approved"].([]any)
	if len(ap) != 1 || ap[0] != "opqrstuvwxyzABCDEFG"[len("opqrstuvwxyzABCDEFG")-19:] && ap[0] != ApprovalSuffix("pdk_st_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG") {
		t.Fatalf("approval %v", ap)
	}
	if len(ApprovalSuffix("pdk_st_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG")) != 20 {
		t.Fatal("suffix length")
	}
	// OAuth: no approval written.
	out, _, _ = SeedClaudeJSON(nil, "/workspace", "")
	if strings.Contains(string(out), "customApiKeyResponses") {
		t.Fatalf("%s", out)
	}
}

// TestSeedFromWhatTheBoxWrote: a config file that is not a JSON object —
// cut short by a kill, not JSON, or JSON of another kind ("null" once
// panicked here: it leaves a nil map) — is reported as not kept, and the
// result is seeded from nothing; blank is an empty object; numbers are kept
// digit for digit.
func TestSeedFromWhatTheBoxWrote(t *testing.T) {
	for _, in := range []string{"{broken", `{"a": 1`, "null", "[]", `"x"`, "5", "true", `{"a":1} {"b":2}`, `{"a":1} x`, "\x00"} {
		out, kept, err := SeedClaudeJSON([]byte(in), "/workspace", "")
		if err != nil || kept {
			t.Errorf("%q: kept %v, %v", in, kept, err)
		}
		var d map[string]any
		if json.Unmarshal(out, &d) != nil || d["hasCompletedOnboarding"] != true {
			t.Errorf("%q: not seeded: %s", in, out)
		}
		out, kept, err = SeedSettings([]byte(in))
		if err != nil || kept || !strings.Contains(string(out), `"skipDangerousModePermissionPrompt": true`) {
			t.Errorf("settings %q: kept %v, %v: %s", in, kept, err, out)
		}
	}
	for _, in := range []string{"", "  \n", "{}", " {\"a\": null} \n"} {
		if _, kept, err := SeedClaudeJSON([]byte(in), "/workspace", ""); err != nil || !kept {
			t.Errorf("%q: kept %v, %v", in, kept, err)
		}
	}
	out, _, _ := SeedClaudeJSON([]byte(`{"big": 12345678901234567891, "f": 1.50}`), "/workspace", "")
	if !strings.Contains(string(out), `"big": 12345678901234567891`) || !strings.Contains(string(out), `"f": 1.50`) {
		t.Errorf("numbers changed: %s", out)
	}
}

func TestSeedSettings(t *testing.T) {
	out, kept, err := SeedSettings([]byte(`{"env": {"A": "1"}}`))
	if err != nil || !kept || !strings.Contains(string(out), `"skipDangerousModePermissionPrompt": true`) || !strings.Contains(string(out), `"A": "1"`) {
		t.Fatalf("%s %v", out, err)
	}
}

func TestEnvAndArgs(t *testing.T) {
	o := LaunchOptions{Home: "/home/paddock", BaseURL: "http://127.0.0.1:4141", CredentialVar: "CLAUDE_CODE_OAUTH_TOKEN", Credential: "tok",
		SessionID: "u-1", Model: "opus", Effort: "high"}
	env := Env(o)
	for _, want := range []string{"CLAUDE_CONFIG_DIR=/home/paddock/.claude", "CLAUDE_CODE_TMPDIR=/home/paddock/.cache/claude-tmp",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:4141", "CLAUDE_CODE_OAUTH_TOKEN=tok"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	if slices.Contains(env, "IS_SANDBOX=1") {
		t.Error("IS_SANDBOX for a non-root box user")
	}
	// Without the quiet switch, telemetry stays off and so do the updater
	// and the marketplace.
	o.NonessentialTraffic = true
	loud := Env(o)
	for _, want := range []string{"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DO_NOT_TRACK=1",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1"} {
		if !slices.Contains(loud, want) {
			t.Errorf("env with nonessential traffic lacks %s", want)
		}
	}
	if slices.Contains(loud, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") || slices.Contains(env, "DISABLE_TELEMETRY=1") {
		t.Errorf("the quiet switch and the telemetry switches: %v / %v", env, loud)
	}
	o.NonessentialTraffic = false
	o.Root = true
	if !slices.Contains(Env(o), "IS_SANDBOX=1") {
		t.Error("no IS_SANDBOX for root")
	}
	if got := strings.Join(Args(o), " "); got != "claude --dangerously-skip-permissions --session-id u-1 --model opus --effort high" {
		t.Error(got)
	}
	o.Resume, o.Model, o.Effort = true, "", ""
	if got := strings.Join(Args(o), " "); got != "claude --dangerously-skip-permissions --resume u-1" {
		t.Error(got)
	}
}

func TestTranscriptPath(t *testing.T) {
	if p := TranscriptPath("/h", "/srv/probe/work", "f8"); p != "/h/.claude/projects/-srv-probe-work/f8.jsonl" {
		t.Fatal(p)
	}
}

// TestLineWriter: whole lines, each indented, as they come; a last line
// without its newline waits for flush.
func TestLineWriter(t *testing.T) {
	var b strings.Builder
	lw := &lineWriter{w: &b, prefix: "  "}
	for _, p := range []string{"npm http fetch GET 200 a", "\nsecond\r\nthi", "rd\n", "tail"} {
		if _, err := lw.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.String(), "  npm http fetch GET 200 a\n  second\n  third\n"; got != want {
		t.Fatalf("before flush: %q, want %q", got, want)
	}
	lw.flush()
	if got := b.String(); !strings.HasSuffix(got, "  tail\n") {
		t.Fatalf("after flush: %q", got)
	}
}
