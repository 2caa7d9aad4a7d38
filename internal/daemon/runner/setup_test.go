package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/claudesetup"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// TestFirstStartKeptUntilUsed: what a create request brings for the first
// start is checked, kept 0600 in the state dir until then, offered only
// while claude has not started in the session, and gone once dropped; a
// bad part refuses the request.
func TestFirstStartKeptUntilUsed(t *testing.T) {
	r := &Runner{opts: Options{StateDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
	req := api.CreateRequest{Prompt: "do the thing", GitIdentity: &gitident.Identity{Name: "A", Email: "a@b"},
		ClaudeSetup: &claudesetup.Bundle{Files: []claudesetup.File{{Path: "CLAUDE.md", Mode: 0o644, Data: []byte("hi")}},
			Settings: json.RawMessage(`{"apiKeyHelper":"x","model":"m"}`)}}
	fs, dropped, err := checkFirstStart(&req, nil)
	if err != nil || fs == nil || string(fs.Claude.Settings) != `{"model":"m"}` {
		t.Fatalf("%+v %v", fs, err)
	}
	if len(dropped) != 1 || !strings.Contains(dropped[0].Item, "apiKeyHelper") {
		t.Fatalf("dropped: %+v", dropped)
	}
	if err := r.saveFirstStart("s1", fs); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(r.firstStartFile("s1")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi.Mode(), err)
	}
	s := session.Session{ID: "s1"}
	got := r.pendingFirstStart(&s)
	if got == nil || got.Prompt != "do the thing" || got.Git.Email != "a@b" || len(got.Claude.Files) != 1 {
		t.Fatalf("%+v", got)
	}
	files, err := got.files()
	if err != nil || len(files) != 3 || files[0].Path != ".claude/CLAUDE.md" || files[1].Path != ".gitconfig" || files[2].Path != firstprompt.BoxPath || files[2].Mode != 0o600 {
		t.Fatalf("%+v %v", files, err)
	}
	if argv := got.claudeArgv([]string{"claude", "--session-id", "u"}); argv[0] != "sh" || argv[len(argv)-1] != "u" {
		t.Fatalf("%q", argv)
	}
	out, sep := got.mergeConfig(`{"a":1}`+"\x00"+`{"b":2}`, 7)
	if !strings.Contains(out[sep+1:], `"model": "m"`) || !strings.Contains(out[sep+1:], `"b": 2`) || out[:sep] != `{"a":1}` {
		t.Fatalf("%q %d", out, sep)
	}
	s.Started = true
	if r.pendingFirstStart(&s) != nil {
		t.Fatal("offered after the first start")
	}
	if err := r.dropFirstStart("s1"); err != nil || r.pendingFirstStart(&session.Session{ID: "s1"}) != nil {
		t.Fatal("not dropped", err)
	}
	var none *firstStart
	if argv := none.claudeArgv([]string{"claude"}); len(argv) != 1 {
		t.Fatal(argv)
	}
	// Nothing brought: nothing kept.
	if fs, _, err := checkFirstStart(&api.CreateRequest{}, nil); fs != nil || err != nil {
		t.Fatal(fs, err)
	}
	for _, bad := range []api.CreateRequest{
		{Prompt: firstprompt.Text(strings.Repeat("x", firstprompt.MaxBytes+1))},
		{GitIdentity: &gitident.Identity{Name: "a\nb"}},
		{ClaudeSetup: &claudesetup.Bundle{Files: []claudesetup.File{{Path: ".credentials.json", Mode: 0o644}}}},
	} {
		if _, _, err := checkFirstStart(&bad, nil); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// TestOnlyAllowedClaudeVersionsInstall: a session may ask for the pinned
// Claude Code or a version an admin lists in claude.allowed_versions;
// any other is refused with what is allowed and how an admin adds one,
// before npm is ever run (a fake npm first on PATH would leave a mark)
// and before anything of the session is recorded. The key is read from
// the file, and a range or tag in it is refused.
func TestOnlyAllowedClaudeVersionsInstall(t *testing.T) {
	cfg, err := config.Parse("paddock.toml", []byte("version = 1\n[claude]\nallowed_versions = [\"2.1.300\"]\n"))
	if err != nil || !slices.Equal(cfg.Claude.AllowedVersions, []string{"2.1.300"}) {
		t.Fatalf("claude.allowed_versions: %+v %v", cfg.Claude.AllowedVersions, err)
	}
	for _, bad := range []string{`["latest"]`, `["^2.1.0"]`, `["2.1"]`} {
		if _, err := config.Parse("paddock.toml", []byte("version = 1\n[claude]\nallowed_versions = "+bad+"\n")); err == nil || !strings.Contains(err.Error(), "claude.allowed_versions") {
			t.Errorf("allowed_versions = %s: %v", bad, err)
		}
	}
	bin := t.TempDir()
	mark := filepath.Join(t.TempDir(), "npm-ran")
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\necho \"$@\" >> "+mark+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	cfg.Proxy.Listen, cfg.Web.Listen = "off", "off"
	cfg.Credential.ClaudeLoginFile = "off"
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	close(r.adopted)
	ctx := context.Background()
	for v, kind := range map[string]error{"2.1.299": errdefs.ErrForbidden, "9.9.9": errdefs.ErrForbidden, "latest": errdefs.ErrInvalid} {
		_, err := r.CreateSession(ctx, api.CreateRequest{Name: "v", Backend: "local", ClaudeVersion: v, NoStart: true})
		if !errdefs.Is(err, kind) || !strings.Contains(err.Error(), "the pinned "+claudecode.PinnedVersion+" and 2.1.300 (claude.allowed_versions)") {
			t.Errorf("claude version %s: %v", v, err)
		}
		if kind == errdefs.ErrForbidden && !strings.Contains(err.Error(), `allowed_versions = ["`+v+`"] under [claude]`) {
			t.Errorf("claude version %s: no word of how an admin adds it: %v", v, err)
		}
	}
	if ss, _ := r.Sessions(ctx); len(ss) != 0 {
		t.Fatalf("a refused version left sessions: %+v", ss)
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("npm ran: %s", b)
	}
	// The pinned one, and the listed one, pass the check.
	for _, v := range []string{"", claudecode.PinnedVersion, "2.1.300"} {
		if _, _, err := checkFirstStart(&api.CreateRequest{ClaudeVersion: v}, r.opts.Config.Claude.AllowedVersions); err != nil {
			t.Errorf("claude version %q: %v", v, err)
		}
	}
}
