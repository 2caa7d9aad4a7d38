package claudesetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// droppedSettings are the keys of settings.json that never come along, each
// with why: they would authenticate claude some other way than with the
// box's session token, send it elsewhere, or turn off the bypass mode the
// box runs in.
var droppedSettings = map[string]string{
	"apiKeyHelper":        "a credential helper; the box authenticates with paddock's session token",
	"awsAuthRefresh":      "a credential helper",
	"awsCredentialExport": "a credential helper",
	"gcpAuthRefresh":      "a credential helper",
	"otelHeadersHelper":   "a credential helper",
	"forceLoginMethod":    "a login setting; the box authenticates with paddock's session token",
	"forceLoginOrgUUID":   "a login setting; the box authenticates with paddock's session token",
	// paddock's own: the Runner sets it.
	"skipDangerousModePermissionPrompt": "paddock sets it",
}

// droppedPermissions are the keys of settings.json's "permissions" that
// never come along.
var droppedPermissions = map[string]string{
	"disableBypassPermissionsMode": "it would stop claude's bypass mode, which the box runs in",
}

// paddockEnv are variables paddock sets for claude itself
// (claudecode.Env); settings.json's env would override them.
var paddockEnv = map[string]bool{
	"HOME": true, "USER": true, "PATH": true, "LANG": true, "TERM": true, "IS_SANDBOX": true,
	"CLAUDE_CONFIG_DIR": true, "DISABLE_AUTOUPDATER": true,
}

// secretWords are the words of a name that say it holds a secret;
// secretEnds also count at the end of a word (APIKEY, OAUTH, CLIENTSECRET).
var (
	secretWords = []string{"SECRETS", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTHORIZATION", "COOKIE", "PAT", "PRIVATE"}
	secretEnds  = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "AUTH"}
)

// secretName reports whether a variable, header or field is named like a
// secret, word by word (split at every non-alphanumeric and at each
// lower-to-upper case change): GITHUB_TOKEN, X-Api-Key, apiKey and
// Authorization are; MAX_THINKING_TOKENS is not.
func secretName(name string) bool {
	var words []string
	start := 0
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		switch {
		case !alnum:
			words = append(words, name[start:i])
			start = i + 1
		case r >= 'A' && r <= 'Z' && i > start && name[i-1] >= 'a' && name[i-1] <= 'z':
			words = append(words, name[start:i])
			start = i
		}
	}
	words = append(words, name[start:])
	for _, w := range words {
		w = strings.ToUpper(w)
		for _, s := range secretEnds {
			if strings.HasSuffix(w, s) {
				return true
			}
		}
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	return false
}

// secretValue matches a value that looks like a secret whatever its name:
// the prefixes of common API keys and tokens, and HTTP credentials.
var secretValue = regexp.MustCompile(`^(?i:bearer |basic )|^(sk-|sk_|pk_|rk_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abpors]-|AKIA|ASIA|AIza|ya29\.|npm_|hf_|pdk_)`)

// envReference is a value that only names a variable of claude's own
// environment (${NAME} or ${NAME:-default}): no secret in it.
var envReference = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}$`)

// envDropReason says why a variable of settings.json's env never comes
// along, or "" if it does.
func envDropReason(name string) string {
	up := strings.ToUpper(name)
	switch {
	case strings.HasPrefix(up, "ANTHROPIC_"):
		return "ANTHROPIC_* variables point claude at another API or credential"
	case up == "HTTP_PROXY" || up == "HTTPS_PROXY" || up == "NO_PROXY" || up == "ALL_PROXY":
		return "the box's network path is paddock's"
	case up == "NODE_EXTRA_CA_CERTS" || up == "NODE_TLS_REJECT_UNAUTHORIZED" || up == "SSL_CERT_FILE" || up == "SSL_CERT_DIR":
		return "the box's TLS trust is paddock's"
	case strings.HasPrefix(up, "CLAUDE_CODE_"):
		// paddock's own, and those that pick a provider, a credential or
		// an endpoint.
		if strings.Contains(up, "TMPDIR") || strings.Contains(up, "NONESSENTIAL") || strings.Contains(up, "AUTOINSTALL") ||
			strings.HasPrefix(up, "CLAUDE_CODE_USE_") || strings.HasPrefix(up, "CLAUDE_CODE_SKIP_") ||
			strings.HasPrefix(up, "CLAUDE_CODE_CLIENT_") || strings.Contains(up, "URL") || secretName(up) {
			return "it picks claude's credential, provider or endpoint, or paddock sets it"
		}
	case paddockEnv[up]:
		return "paddock sets it"
	}
	if secretName(name) {
		return "named like a secret"
	}
	return ""
}

// decode reads one JSON object, numbers kept as written.
func decode(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the JSON object")
	}
	return m, nil
}

// sortedKeys lists m's keys in order, so warnings come out the same each time.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// FilterSettings returns settings.json without what never comes into a box
// (droppedSettings, droppedPermissions, and the env entries envDropReason
// names), with one warning per key dropped; values are never in a warning.
// Everything else, hooks among it, is kept as it was. Input that is not a
// JSON object gives nil and a warning.
func FilterSettings(raw []byte) (json.RawMessage, []Warning) {
	doc, err := decode(raw)
	if err != nil {
		return nil, []Warning{{Item: "settings.json", Reason: "not a JSON object (" + err.Error() + "); skipped"}}
	}
	var ws []Warning
	for _, k := range sortedKeys(doc) {
		if why, ok := droppedSettings[k]; ok {
			delete(doc, k)
			ws = append(ws, Warning{Item: "settings.json: " + k, Reason: "dropped: " + why})
		}
	}
	if p, ok := doc["permissions"].(map[string]any); ok {
		for _, k := range sortedKeys(p) {
			if why, ok := droppedPermissions[k]; ok {
				delete(p, k)
				ws = append(ws, Warning{Item: "settings.json: permissions." + k, Reason: "dropped: " + why})
			}
		}
	}
	if e, ok := doc["env"]; ok {
		env, isObj := e.(map[string]any)
		if !isObj {
			delete(doc, "env")
			ws = append(ws, Warning{Item: "settings.json: env", Reason: "dropped: not an object"})
		}
		for _, k := range sortedKeys(env) {
			if why := envDropReason(k); why != "" {
				delete(env, k)
				ws = append(ws, Warning{Item: "settings.json: env." + k, Reason: "dropped: " + why})
			} else if s, _ := env[k].(string); secretValue.MatchString(s) {
				delete(env, k)
				ws = append(ws, Warning{Item: "settings.json: env." + k, Reason: "dropped: its value looks like a secret"})
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil { // cannot happen for what decode made
		return nil, []Warning{{Item: "settings.json", Reason: "cannot re-encode; skipped"}}
	}
	return out, ws
}

// FilterMCPServers returns the user-scope MCP servers (the value of
// .claude.json's "mcpServers") with every server kept but, in its "env"
// and "headers", each entry named like a secret (token, key, secret,
// password, auth, cookie, session, credential, …) or whose value looks
// like one (sk-…, ghp_…, "Bearer …") dropped — unless its value only
// names a variable (${NAME}) — and its "headersHelper" (a credential
// helper) dropped; one warning per drop. A server that is not an object
// is dropped whole. Input that is not an object gives nil and a warning.
func FilterMCPServers(raw []byte) (json.RawMessage, []Warning) {
	doc, err := decode(raw)
	if err != nil {
		return nil, []Warning{{Item: ".claude.json: mcpServers", Reason: "not a JSON object (" + err.Error() + "); skipped"}}
	}
	var ws []Warning
	for _, name := range sortedKeys(doc) {
		srv, ok := doc[name].(map[string]any)
		item := ".claude.json: mcpServers." + name
		if !ok {
			delete(doc, name)
			ws = append(ws, Warning{Item: item, Reason: "dropped: not an object"})
			continue
		}
		if _, ok := srv["headersHelper"]; ok {
			delete(srv, "headersHelper")
			ws = append(ws, Warning{Item: item + ".headersHelper", Reason: "dropped: a credential helper"})
		}
		for _, field := range []string{"env", "headers"} {
			v, ok := srv[field]
			if !ok {
				continue
			}
			m, isObj := v.(map[string]any)
			if !isObj {
				delete(srv, field)
				ws = append(ws, Warning{Item: item + "." + field, Reason: "dropped: not an object"})
				continue
			}
			for _, k := range sortedKeys(m) {
				s, isStr := m[k].(string)
				switch {
				case isStr && envReference.MatchString(s):
				case secretName(k):
					delete(m, k)
					ws = append(ws, Warning{Item: item + "." + field + "." + k, Reason: "dropped: named like a secret (the server may need it set again in the box)"})
				case isStr && secretValue.MatchString(s):
					delete(m, k)
					ws = append(ws, Warning{Item: item + "." + field + "." + k, Reason: "dropped: its value looks like a secret (the server may need it set again in the box)"})
				}
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, []Warning{{Item: ".claude.json: mcpServers", Reason: "cannot re-encode; skipped"}}
	}
	return out, ws
}
