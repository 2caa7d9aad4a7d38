package claudesetup

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
)

// badBundles are bundles the Runner refuses; the fuzz target starts from
// them too.
var badBundles = map[string]string{
	"dotdot":           `{"files":[{"path":"agents/../../.bashrc","mode":420,"data":""}]}`,
	"absolute":         `{"files":[{"path":"/etc/passwd","mode":420,"data":""}]}`,
	"not allowed":      `{"files":[{"path":".credentials.json","mode":420,"data":""}]}`,
	"projects":         `{"files":[{"path":"projects/x.jsonl","mode":420,"data":""}]}`,
	"settings as file": `{"files":[{"path":"settings.json","mode":420,"data":""}]}`,
	"root dir itself":  `{"files":[{"path":"agents","mode":420,"data":""}]}`,
	"unclean":          `{"files":[{"path":"agents//a.md","mode":420,"data":""}]}`,
	"setuid":           `{"files":[{"path":"agents/a","mode":2541,"data":""}]}`,
	"0600":             `{"files":[{"path":"agents/a","mode":384,"data":""}]}`,
	"twice":            `{"files":[{"path":"agents/a","mode":420,"data":""},{"path":"agents/a","mode":420,"data":""}]}`,
	"file and dir":     `{"files":[{"path":"agents/a","mode":420,"data":""},{"path":"agents/a/b","mode":420,"data":""}]}`,
	"control char":     `{"files":[{"path":"agents/a\nb","mode":420,"data":""}]}`,
	"settings array":   `{"settings":[1]}`,
	"mcp string":       `{"mcp_servers":"x"}`,
	"host dir":         `{"host_dir":"relative/dir","files":[{"path":"CLAUDE.md","mode":420,"data":""}]}`,
}

func TestCheckRefuses(t *testing.T) {
	for name, in := range badBundles {
		var b Bundle
		if err := json.Unmarshal([]byte(in), &b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Check(&b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	big := Bundle{Files: []File{{Path: "CLAUDE.md", Mode: 0o644, Data: bytes.Repeat([]byte("x"), MaxBytes+1)}}}
	if _, err := Check(&big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("over the cap: %v", err)
	}
	many := Bundle{}
	for i := 0; i <= MaxFiles; i++ {
		many.Files = append(many.Files, File{Path: "agents/" + strings.Repeat("a", i%50+1) + "/" + string(rune('a'+i%26)) + strings.Repeat("b", i/26), Mode: 0o644})
	}
	if _, err := Check(&many); err == nil {
		t.Error("over the file count: accepted")
	}
}

// TestCheckFiltersAgain: settings and MCP servers from another client are
// filtered by the Runner as by the CLI.
func TestCheckFiltersAgain(t *testing.T) {
	b := Bundle{Settings: json.RawMessage(`{"apiKeyHelper":"x","model":"m"}`), MCPServers: json.RawMessage(`{"s":{"env":{"TOKEN":"t"}}}`)}
	ws, err := Check(&b)
	if err != nil || len(ws) != 2 || string(b.Settings) != `{"model":"m"}` || string(b.MCPServers) != `{"s":{"env":{}}}` {
		t.Fatalf("%v %v %s %s", ws, err, b.Settings, b.MCPServers)
	}
}

func TestPlan(t *testing.T) {
	b := Bundle{HostDir: "/home/ada/.claude", Files: []File{
		{Path: "CLAUDE.md", Mode: 0o644, Data: []byte("/home/ada/.claude/x stays in CLAUDE.md")},
		{Path: "plugins/installed_plugins.json", Mode: 0o644, Data: []byte(`{"v":2,"n":1.50,"p":[{"installPath":"/home/ada/.claude/plugins/cache/m/p","other":"/home/ada/.claudex/y"}]}`)},
		{Path: "plugins/cache/m/p/data.json", Mode: 0o755, Data: []byte(`{"a":"/home/ada/.claude/z"}`)},
	}}
	got := Plan(&b, ".claude", "/home/paddock/.claude")
	if len(got) != 3 || got[0].Path != ".claude/CLAUDE.md" || string(got[0].Data) != "/home/ada/.claude/x stays in CLAUDE.md" {
		t.Fatalf("%+v", got)
	}
	pj := string(got[1].Data)
	if !strings.Contains(pj, `"/home/paddock/.claude/plugins/cache/m/p"`) || !strings.Contains(pj, `"/home/ada/.claudex/y"`) || !strings.Contains(pj, `1.50`) {
		t.Fatalf("installed_plugins.json: %s", pj)
	}
	if string(got[2].Data) != `{"a":"/home/ada/.claude/z"}` || got[2].Mode != 0o755 {
		t.Fatalf("deeper json changed: %s", got[2].Data)
	}
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name, existing, user, want string
	}{
		{"into nothing", "", `{"model":"opus","env":{"A":"1"}}`, `{"env":{"A":"1"},"model":"opus"}`},
		{"user's win over the box's", `{"model":"sonnet","x":1}`, `{"model":"opus"}`, `{"model":"opus","x":1}`},
		{"no user settings", `{"x":1}`, ``, `{"x":1}`},
		{"box file broken: left for the seeding to set aside", `{broken`, `{"model":"opus"}`, `{broken`},
	} {
		got := MergeSettings([]byte(tc.existing), json.RawMessage(tc.user))
		if compact(got) != tc.want {
			t.Errorf("%s: %s", tc.name, got)
		}
	}
	got := MergeClaudeJSON([]byte(`{"numStartups":3,"mcpServers":{"box":{"command":"b"},"fs":{"command":"old"}}}`), json.RawMessage(`{"fs":{"command":"new"}}`))
	if compact(got) != `{"mcpServers":{"box":{"command":"b"},"fs":{"command":"new"}},"numStartups":3}` {
		t.Errorf("claude.json: %s", got)
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// FuzzCheck: whatever a create request carries as a Claude setup, Check
// does not panic; what it accepts fits the caps, has only allowed paths,
// filters to settings and MCP servers with nothing to drop any more, and
// plans into files the box's unpacker accepts.
func FuzzCheck(f *testing.F) {
	for _, in := range badBundles {
		f.Add([]byte(in))
	}
	f.Add([]byte(`{"files":[{"path":"CLAUDE.md","mode":420,"data":"aGk="},{"path":"skills/x/run.sh","mode":493,"data":""}],"settings":{"apiKeyHelper":"x","env":{"HTTPS_PROXY":"p"}},"mcp_servers":{"s":{"headers":{"Authorization":"Bearer x"}}},"host_dir":"/home/a/.claude"}`))
	f.Add([]byte(`{"files":[{"path":"plugins/known_marketplaces.json","mode":420,"data":"eyJhIjoiL2gvLmNsYXVkZS94In0="}],"host_dir":"/h/.claude"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var b Bundle
		if json.Unmarshal(in, &b) != nil {
			return
		}
		ws, err := Check(&b)
		if err != nil {
			return
		}
		for _, w := range ws {
			if w.Item == "" {
				t.Fatal("a warning without an item")
			}
		}
		if b.Size() > MaxBytes || len(b.Files) > MaxFiles {
			t.Fatalf("over the caps: %d bytes, %d files", b.Size(), len(b.Files))
		}
		for _, f := range b.Files {
			if !allowed(f.Path) || strings.Contains(f.Path, "..") && strings.Contains("/"+f.Path+"/", "/../") {
				t.Fatalf("path %q accepted", f.Path)
			}
		}
		if len(b.Settings) > 0 {
			if _, w := FilterSettings(b.Settings); len(w) != 0 {
				t.Fatalf("settings still had %v", w)
			}
		}
		if len(b.MCPServers) > 0 {
			if _, w := FilterMCPServers(b.MCPServers); len(w) != 0 {
				t.Fatalf("mcp servers still had %v", w)
			}
		}
		files := Plan(&b, ".claude", "/home/paddock/.claude")
		for _, f := range files {
			if !strings.HasPrefix(f.Path, ".claude/") {
				t.Fatalf("planned %q", f.Path)
			}
		}
		if _, err := boxfiles.Pack(files); err != nil {
			t.Fatalf("the box would refuse what Check accepted: %v", err)
		}
		// Merging the accepted JSON into any box file never panics.
		_ = MergeSettings(in, b.Settings)
		_ = MergeClaudeJSON(in, b.MCPServers)
	})
}
