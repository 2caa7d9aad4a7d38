package runner

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/claudesetup"
	"github.com/paddockhq/paddock/internal/firstprompt"
	"github.com/paddockhq/paddock/internal/gitident"
	"github.com/paddockhq/paddock/internal/session"
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
	fs, err := r.checkFirstStart(&req)
	if err != nil || fs == nil || string(fs.Claude.Settings) != `{"model":"m"}` {
		t.Fatalf("%+v %v", fs, err)
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
	if fs, err := r.checkFirstStart(&api.CreateRequest{}); fs != nil || err != nil {
		t.Fatal(fs, err)
	}
	for _, bad := range []api.CreateRequest{
		{Prompt: firstprompt.Text(strings.Repeat("x", firstprompt.MaxBytes+1))},
		{GitIdentity: &gitident.Identity{Name: "a\nb"}},
		{ClaudeSetup: &claudesetup.Bundle{Files: []claudesetup.File{{Path: ".credentials.json", Mode: 0o644}}}},
	} {
		if _, err := r.checkFirstStart(&bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}
