package claudesetup

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "X-Api-Key": true, "apiKey": true, "Authorization": true, "OPENAI_API_KEY": true,
		"DB_PASSWORD": true, "client_secret": true, "Cookie": true, "GH_PAT": true, "oauthToken": true, "CLIENTSECRET": true,
		"MAX_THINKING_TOKENS": false, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": false, "BASH_DEFAULT_TIMEOUT_MS": false,
		"author": false, "DEBUG": false, "X-Request-Id": false, "keyboard": false, "COMPAT": false,
	} {
		if got := secretName(name); got != want {
			t.Errorf("secretName(%q) = %v", name, got)
		}
	}
}

func TestFilterSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    string   // the filtered object
		dropped []string // the warnings' items, in order
	}{
		{"kept as is", `{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]},"n":12345678901234567891}`,
			`{"hooks":{"Stop":[{"hooks":[{"command":"say done","type":"command"}]}]},"model":"opus","n":12345678901234567891}`, nil},
		{"credential helpers", `{"apiKeyHelper":"pass show k","awsAuthRefresh":"x","awsCredentialExport":"y","otelHeadersHelper":"z","model":"m"}`,
			`{"model":"m"}`, []string{"settings.json: apiKeyHelper", "settings.json: awsAuthRefresh", "settings.json: awsCredentialExport", "settings.json: otelHeadersHelper"}},
		{"login and paddock's own", `{"forceLoginMethod":"console","skipDangerousModePermissionPrompt":false}`, `{}`,
			[]string{"settings.json: forceLoginMethod", "settings.json: skipDangerousModePermissionPrompt"}},
		{"bypass mode", `{"permissions":{"allow":["Bash(ls)"],"disableBypassPermissionsMode":"disable"}}`, `{"permissions":{"allow":["Bash(ls)"]}}`,
			[]string{"settings.json: permissions.disableBypassPermissionsMode"}},
		{"env", `{"env":{"ANTHROPIC_BASE_URL":"http://evil","anthropic_api_key":"x","CLAUDE_CODE_USE_BEDROCK":"1","CLAUDE_CODE_OAUTH_TOKEN":"t",
			"https_proxy":"http://p","HTTP_PROXY":"http://p","No_Proxy":"*","NODE_EXTRA_CA_CERTS":"/ca","CLAUDE_CONFIG_DIR":"/x","GITHUB_TOKEN":"ghp_x",
			"SOME_URL_THING":"sk-ant-abc","MAX_THINKING_TOKENS":"8000","CLAUDE_CODE_MAX_OUTPUT_TOKENS":"100","DEBUG":"1","CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC":"0"}}`,
			`{"env":{"CLAUDE_CODE_MAX_OUTPUT_TOKENS":"100","DEBUG":"1","MAX_THINKING_TOKENS":"8000"}}`,
			[]string{"settings.json: env.ANTHROPIC_BASE_URL", "settings.json: env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "settings.json: env.CLAUDE_CODE_OAUTH_TOKEN",
				"settings.json: env.CLAUDE_CODE_USE_BEDROCK", "settings.json: env.CLAUDE_CONFIG_DIR", "settings.json: env.GITHUB_TOKEN", "settings.json: env.HTTP_PROXY",
				"settings.json: env.NODE_EXTRA_CA_CERTS", "settings.json: env.No_Proxy", "settings.json: env.SOME_URL_THING", "settings.json: env.anthropic_api_key",
				"settings.json: env.https_proxy"}},
		{"env not an object", `{"env":"x"}`, `{}`, []string{"settings.json: env"}},
		{"not an object", `[1]`, ``, []string{"settings.json"}},
		{"broken", `{"a":`, ``, []string{"settings.json"}},
		{"two objects", `{} {}`, ``, []string{"settings.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ws := FilterSettings([]byte(tc.in))
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
			var items []string
			for _, w := range ws {
				items = append(items, w.Item)
				if strings.Contains(w.String(), "evil") || strings.Contains(w.String(), "ghp_") || strings.Contains(w.String(), "pass show") {
					t.Errorf("a value in a warning: %s", w)
				}
			}
			if !reflect.DeepEqual(items, tc.dropped) {
				t.Errorf("warnings %q\nwant %q", items, tc.dropped)
			}
		})
	}
}

func TestFilterMCPServers(t *testing.T) {
	in := `{
	  "github": {"command": "gh-mcp", "args": ["serve"], "env": {"GITHUB_TOKEN": "ghp_abc", "GH_HOST": "github.com", "REF_TOKEN": "${GITHUB_TOKEN}", "OTHER": "sk-ant-xyz"}},
	  "remote": {"type": "http", "url": "https://mcp.example/x", "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k", "X-Team": "core", "X-Any": "Bearer q"}, "headersHelper": "get-token"},
	  "odd": "x",
	  "badenv": {"command": "c", "env": ["A=1"]}
	}`
	out, ws := FilterMCPServers([]byte(in))
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"github": map[string]any{"command": "gh-mcp", "args": []any{"serve"}, "env": map[string]any{"GH_HOST": "github.com", "REF_TOKEN": "${GITHUB_TOKEN}"}},
		"remote": map[string]any{"type": "http", "url": "https://mcp.example/x", "headers": map[string]any{"X-Team": "core"}},
		"badenv": map[string]any{"command": "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	var items []string
	for _, w := range ws {
		items = append(items, w.Item)
		for _, v := range []string{"ghp_abc", "sk-ant", "Bearer", "get-token"} {
			if strings.Contains(w.String(), v) {
				t.Errorf("a value in a warning: %s", w)
			}
		}
	}
	wantItems := []string{".claude.json: mcpServers.badenv.env", ".claude.json: mcpServers.github.env.GITHUB_TOKEN", ".claude.json: mcpServers.github.env.OTHER",
		".claude.json: mcpServers.odd", ".claude.json: mcpServers.remote.headersHelper", ".claude.json: mcpServers.remote.headers.Authorization",
		".claude.json: mcpServers.remote.headers.X-Any", ".claude.json: mcpServers.remote.headers.X-Api-Key"}
	if !reflect.DeepEqual(items, wantItems) {
		t.Fatalf("warnings %q\nwant %q", items, wantItems)
	}
	if out, ws := FilterMCPServers([]byte(`"x"`)); out != nil || len(ws) != 1 {
		t.Fatalf("not an object: %s %v", out, ws)
	}
}
