package claudecode

import (
	"bytes"
	"encoding/json"
	"io"
	"path"
	"sort"
	"strings"
)

// Paths in the box (under the box user's home, on the session volume).
const (
	// ConfigDir is CLAUDE_CONFIG_DIR: .claude.json, settings.json,
	// projects/<cwd>/<session>.jsonl (the transcripts) live here.
	ConfigDirName = ".claude"
	// TmpDirName is CLAUDE_CODE_TMPDIR (scratchpads, the messaging socket).
	TmpDirName = ".cache/claude-tmp"
)

// ApprovalSuffix is what Claude Code keeps of an approved API key: the
// last 20 characters after trimming.
func ApprovalSuffix(key string) string {
	k := strings.TrimSpace(key)
	if len(k) > 20 {
		return k[len(k)-20:]
	}
	return k
}

// SeedClaudeJSON returns .claude.json with what takes Claude Code straight
// to its prompt: onboarding done, the workspace trusted and, for an API key
// credential, that key approved (by its last 20 characters). Everything
// else already in the file (Claude Code writes much there) is kept, numbers
// digit for digit. approvedKey is "" for other credential kinds.
//
// existing comes from the box, which may have written anything there (or
// been killed while Claude Code wrote it). If it is not a JSON object (and
// not empty), kept is false and the result is seeded from nothing: the
// caller keeps the old file aside, and the session still starts.
func SeedClaudeJSON(existing []byte, workspace, approvedKey string) (out []byte, kept bool, err error) {
	doc, kept := decodeObject(existing)
	doc["hasCompletedOnboarding"] = true
	projects, _ := doc["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	p, _ := projects[workspace].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	p["hasTrustDialogAccepted"] = true
	projects[workspace] = p
	doc["projects"] = projects
	if approvedKey != "" {
		// Only the current key: an earlier session token is revoked anyway.
		doc["customApiKeyResponses"] = map[string]any{"approved": []string{ApprovalSuffix(approvedKey)}, "rejected": []string{}}
	}
	out, err = json.MarshalIndent(doc, "", "  ")
	return out, kept, err
}

// SeedSettings returns settings.json with the bypass-permissions warning
// already accepted, keeping everything else; kept is as for SeedClaudeJSON.
func SeedSettings(existing []byte) (out []byte, kept bool, err error) {
	doc, kept := decodeObject(existing)
	doc["skipDangerousModePermissionPrompt"] = true
	out, err = json.MarshalIndent(doc, "", "  ")
	return out, kept, err
}

// decodeObject decodes b, one JSON object and nothing after it, with its
// numbers kept as written (json.Number). Blank input (JSON whitespace or
// nothing) is an empty object.
// Anything else gives an empty object and false: not JSON, cut short, or
// JSON that is not an object ("null" among them, which would leave a nil
// map).
func decodeObject(b []byte) (map[string]any, bool) {
	if len(bytes.Trim(b, " \t\r\n")) == 0 { // JSON's whitespace only
		return map[string]any{}, true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return map[string]any{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return map[string]any{}, false
	}
	return doc, true
}

// LaunchOptions describe one start of claude in a box.
type LaunchOptions struct {
	Home string // the box user's home
	// BaseURL is ANTHROPIC_BASE_URL ("" for direct mode: the real API).
	BaseURL string
	// CredentialVar and Credential: the variable Claude Code reads (the
	// kind's) and its value: a session token, or in direct mode the
	// owner's setup token. Passed in the environment only.
	CredentialVar, Credential string
	// Root: the box user is root, so --dangerously-skip-permissions needs IS_SANDBOX=1.
	Root bool
	// NonessentialTraffic lifts the CLI's quiet switch, keeping telemetry
	// off: only for a box whose requests to the API host all go through
	// the Runner's direct path, which refuses what it does not allow.
	NonessentialTraffic bool
	// Extra variables (the plan of a setup token, …), "K=V".
	Extra []string
	// Claude's own flags.
	SessionID     string
	Resume        bool
	Model, Effort string
}

// Env is the whole environment claude runs with: never the updater or the
// marketplace's auto-install, and never telemetry. Without
// NonessentialTraffic, the CLI's quiet switch stops everything else it
// would send besides the model's requests too.
func Env(o LaunchOptions) []string {
	env := []string{
		"HOME=" + o.Home,
		"USER=paddock",
		"PATH=/opt/claude/bin:/opt/paddock/bin:/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TERM=xterm-256color",
		"CLAUDE_CONFIG_DIR=" + path.Join(o.Home, ConfigDirName),
		"CLAUDE_CODE_TMPDIR=" + path.Join(o.Home, TmpDirName),
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
	}
	if o.NonessentialTraffic {
		// The CLI's "no-telemetry" level: flags, event logging, metrics and
		// error reports stay off; the usage view and the rest may be asked
		// for (DIRECT-REQUESTS.md), and whoever answers decides.
		env = append(env, "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DO_NOT_TRACK=1")
	} else {
		env = append(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	}
	if o.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+o.BaseURL)
	}
	if o.CredentialVar != "" {
		env = append(env, o.CredentialVar+"="+o.Credential)
	}
	if o.Root {
		env = append(env, "IS_SANDBOX=1")
	}
	env = append(env, o.Extra...)
	sort.Strings(env)
	return env
}

// Args is claude's command line: a first start pins the conversation id,
// later starts resume it.
func Args(o LaunchOptions) []string {
	a := []string{"claude", "--dangerously-skip-permissions"}
	if o.Resume {
		a = append(a, "--resume", o.SessionID)
	} else {
		a = append(a, "--session-id", o.SessionID)
	}
	if o.Model != "" {
		a = append(a, "--model", o.Model)
	}
	if o.Effort != "" {
		a = append(a, "--effort", o.Effort)
	}
	return a
}

// TranscriptPath is where Claude Code keeps a conversation: under
// projects/, in the project directory of the cwd (ProjectDirName).
func TranscriptPath(home, cwd, sessionID string) string {
	return path.Join(home, ConfigDirName, "projects", ProjectDirName(cwd), sessionID+".jsonl")
}

// ProjectDirName is the name of the directory under projects/ where
// Claude Code keeps the conversations had in cwd: cwd with every
// non-alphanumeric character replaced by '-' ("/workspace" is
// "-workspace").
func ProjectDirName(cwd string) string {
	var b strings.Builder
	for _, r := range cwd {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
