package claudesetup

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// write makes files under dir: path -> content ("" makes an empty file).
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(b Bundle) []string {
	var ps []string
	for _, f := range b.Files {
		ps = append(ps, f.Path)
	}
	sort.Strings(ps)
	return ps
}

func items(ws []Warning) string {
	var s []string
	for _, w := range ws {
		s = append(s, w.String())
	}
	return strings.Join(s, "\n")
}

// TestCollect: the allow list comes, nothing else; symlinks out of the
// config dir are skipped with a warning; secrets never come.
func TestCollect(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".claude")
	write(t, dir, map[string]string{
		"CLAUDE.md":                        "Always answer in haiku.",
		"settings.json":                    `{"model":"opus","apiKeyHelper":"pass show anthropic","env":{"ANTHROPIC_BASE_URL":"http://evil","DEBUG":"1"}}`,
		"agents/reviewer.md":               "---\nname: reviewer\n---\nReview.",
		"commands/ship.md":                 "Ship it.",
		"skills/haiku/SKILL.md":            "---\nname: haiku\n---\n",
		"skills/haiku/scripts/count.sh":    "#!/bin/sh\n",
		"output-styles/terse.md":           "terse",
		"plugins/installed_plugins.json":   `{"plugins":{"p@m":[{"installPath":"` + dir + `/plugins/cache/m/p/1.0"}]}}`,
		"plugins/cache/m/p/1.0/x.md":       "x",
		"plugins/marketplaces/m/.git/HEAD": "ref",
		".credentials.json":                `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-secret"}}`,
		"projects/-home-x/abc.jsonl":       "transcript",
		"todos/a.json":                     "[]",
		"shell-snapshots/s.sh":             "export X=1",
		"statsig/cache":                    "s",
		"agents/sub/deep.md":               "deep",
	})
	os.Chmod(filepath.Join(dir, "skills/haiku/scripts/count.sh"), 0o755)
	write(t, home, map[string]string{
		".claude.json": `{"numStartups":5,"primaryApiKey":"sk-ant-api-secret","oauthAccount":{"emailAddress":"a@b"},"mcpServers":{"fs":{"command":"mcp-fs","env":{"API_KEY":"sk-x","ROOT":"/"}}},"projects":{"/x":{"mcpServers":{"p":{}}}}}`,
		"outside.md":   "SECRET OUTSIDE",
	})
	// In the dir, to a file in the dir: comes, as a file. Out of it: not.
	os.Symlink(filepath.Join(dir, "CLAUDE.md"), filepath.Join(dir, "commands/alias.md"))
	os.Symlink(filepath.Join(home, "outside.md"), filepath.Join(dir, "agents/escape.md"))
	os.Symlink("/etc", filepath.Join(dir, "skills/etc"))
	os.Symlink("../../../outside.md", filepath.Join(dir, "skills/haiku/rel.md"))

	src, err := Locate(LocateOptions{Env: []string{"HOME=" + home}})
	if err != nil || src.Dir != dir || src.ClaudeJSON != filepath.Join(home, ".claude.json") {
		t.Fatalf("%+v %v", src, err)
	}
	b, ws, err := Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CLAUDE.md", "agents/reviewer.md", "agents/sub/deep.md", "commands/alias.md", "commands/ship.md", "output-styles/terse.md",
		"plugins/cache/m/p/1.0/x.md", "plugins/installed_plugins.json", "skills/haiku/SKILL.md", "skills/haiku/scripts/count.sh"}
	if got := paths(b); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %q\nwant  %q", got, want)
	}
	for _, f := range b.Files {
		wantMode := uint32(0o644)
		if f.Path == "skills/haiku/scripts/count.sh" {
			wantMode = 0o755
		}
		if f.Mode != wantMode {
			t.Errorf("%s: mode %o", f.Path, f.Mode)
		}
		if f.Path == "commands/alias.md" && string(f.Data) != "Always answer in haiku." {
			t.Errorf("alias: %q", f.Data)
		}
	}
	all, _ := json.Marshal(b)
	for _, secret := range []string{"sk-ant", "SECRET OUTSIDE", "transcript", "pass show", "evil", "oauthAccount", "primaryApiKey", "sk-x"} {
		if strings.Contains(string(all), secret) {
			t.Errorf("the bundle holds %q", secret)
		}
	}
	if string(b.Settings) != `{"env":{"DEBUG":"1"},"model":"opus"}` || string(b.MCPServers) != `{"fs":{"command":"mcp-fs","env":{"ROOT":"/"}}}` {
		t.Errorf("settings %s, mcp %s", b.Settings, b.MCPServers)
	}
	w := items(ws)
	for _, want := range []string{"agents/escape.md: skipped: a symlink that leads out of", "skills/etc: skipped: a symlink", "skills/haiku/rel.md: skipped: a symlink that leads out",
		"settings.json: apiKeyHelper: dropped", "settings.json: env.ANTHROPIC_BASE_URL: dropped", ".claude.json: mcpServers.fs.env.API_KEY: dropped"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if _, err := Check(&b); err != nil {
		t.Fatalf("the Runner refuses what Collect made: %v", err)
	}
}

// TestCollectOverCaps: a setup over its cap loses its largest parts, with
// a warning each, and the rest comes; a single file over the cap is
// skipped without being read.
func TestCollectOverCaps(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("p", 3<<20)
	write(t, dir, map[string]string{
		"CLAUDE.md":                       "small",
		"plugins/cache/m/huge/1/a.bin":    big,
		"plugins/cache/m/huge/1/b.bin":    big,
		"plugins/cache/m/medium/1/a.bin":  strings.Repeat("q", 2<<20),
		"plugins/marketplaces/m/data.bin": strings.Repeat("r", 2<<20),
		"skills/s/SKILL.md":               "skill",
	})
	os.WriteFile(filepath.Join(dir, "agents"), nil, 0o644) // a file where a dir should be
	write(t, dir, map[string]string{"commands/ok.md": "ok", "commands/huge.md": ""})
	if err := os.Truncate(filepath.Join(dir, "commands/huge.md"), MaxBytes+1); err != nil { // sparse
		t.Fatal(err)
	}

	b, ws, err := Collect(Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(paths(b), " ")
	want := "CLAUDE.md commands/ok.md plugins/cache/m/medium/1/a.bin plugins/marketplaces/m/data.bin skills/s/SKILL.md"
	if got != want {
		t.Fatalf("files %s\nwant  %s\n%s", got, want, items(ws))
	}
	w := items(ws)
	for _, want := range []string{"plugins/cache/m/huge: skipped: 6.0 MiB in 2 files", "commands/huge.md: skipped: 8.0 MiB", "agents/: skipped: not a directory"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if b.Size() > MaxBytes {
		t.Fatal(b.Size())
	}
	if _, err := Check(&b); err != nil {
		t.Fatal(err)
	}
}

func TestLocate(t *testing.T) {
	home := t.TempDir()
	lookup := func(u string) (string, error) {
		if u == "ada" {
			return "/home/ada", nil
		}
		return "", errors.New("unknown user")
	}
	for _, tc := range []struct {
		name     string
		o        LocateOptions
		dir, cj  string
		wantHome string
		err      bool
	}{
		{"home", LocateOptions{Env: []string{"HOME=/home/x"}}, "/home/x/.claude", "/home/x/.claude.json", "/home/x", false},
		{"config dir", LocateOptions{Env: []string{"HOME=/home/x", "CLAUDE_CONFIG_DIR=/cfg"}}, "/cfg", "/cfg/.claude.json", "/home/x", false},
		{"sudo", LocateOptions{Env: []string{"HOME=/root", "SUDO_USER=ada"}, Root: true, LookupHome: lookup}, "/home/ada/.claude", "/home/ada/.claude.json", "/home/ada", false},
		{"sudo user root", LocateOptions{Env: []string{"HOME=/root", "SUDO_USER=root"}, Root: true, LookupHome: lookup}, "/root/.claude", "/root/.claude.json", "/root", false},
		{"SUDO_USER but not root", LocateOptions{Env: []string{"HOME=/home/x", "SUDO_USER=ada"}, LookupHome: lookup}, "/home/x/.claude", "/home/x/.claude.json", "/home/x", false},
		{"unknown sudo user", LocateOptions{Env: []string{"SUDO_USER=bob"}, Root: true, LookupHome: lookup}, "", "", "", true},
		{"no home", LocateOptions{}, "", "", "", false},
		{"explicit .claude", LocateOptions{Dir: filepath.Join(home, ".claude")}, filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json"), "", false},
		{"explicit other", LocateOptions{Dir: filepath.Join(home, "cfg")}, filepath.Join(home, "cfg"), filepath.Join(home, "cfg", ".claude.json"), "", false},
		{"explicit missing", LocateOptions{Dir: filepath.Join(home, "nope")}, "", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
			os.MkdirAll(filepath.Join(home, "cfg"), 0o755)
			src, err := Locate(tc.o)
			if (err != nil) != tc.err || src.Dir != tc.dir || src.ClaudeJSON != tc.cj || src.Home != tc.wantHome {
				t.Fatalf("%+v %v", src, err)
			}
		})
	}
}
