package config

// parse.go: reading the file, and the errors that name its keys.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Error is a problem with one key of one file. File is empty for values that
// came from flags; Key is the dotted TOML key.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads the file at path over Default. When the file does not exist and
// mustExist is false, Load returns Default. The result is validated.
func Load(path string, mustExist bool) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !mustExist {
		return Default(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data (named name in errors) over Default and validates it.
// It never panics, whatever the bytes.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	cfg.Version = 0 // the file must say which format it is in
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&cfg)
	if err != nil {
		return Config{}, decodeError(name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, 0, len(und))
		for _, k := range und {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		return Config{}, &Error{File: name, Key: keys[0], Msg: "unknown key" + hint(keys[0])}
	}
	if err := pricesComplete(md, &cfg); err != nil {
		err.File = name
		return Config{}, err
	}
	if !md.IsDefined("version") {
		return Config{}, &Error{File: name, Key: "version", Msg: fmt.Sprintf("missing; start the file with version = %d", CurrentVersion)}
	}
	if err := cfg.Validate(); err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File = name
		}
		return Config{}, err
	}
	return cfg, nil
}

// decodeError turns the TOML library's errors into *Error with a key and line.
func decodeError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := pe.Message
		// The library says "incompatible types: TOML value has type string;
		// destination has type integer"; keep that, it is clear.
		return &Error{File: name, Line: pe.Position.Line, Key: pe.LastKey, Msg: msg}
	}
	return &Error{File: name, Msg: err.Error()}
}

// known lists every key, for "did you mean" hints.
var known = []string{
	"version", "log.format", "log.level", "anthropic.upstream",
	"proxy.listen", "proxy.max_request_bytes", "proxy.read_header_timeout", "proxy.read_timeout",
	"proxy.response_header_timeout", "proxy.stream_idle_timeout", "proxy.max_idle_conns",
	"sessions.backend", "sessions.memory_mb", "sessions.pids", "sessions.cpus", "sessions.rpm", "sessions.max_streams",
	"sessions.token_budget", "sessions.budget_usd", "claude.binary", "claude.allowed_versions",
	"sessions.runtime", "sessions.clone", "local.uid_base", "local.runtime", "docker.host", "docker.image", "docker.runtime", "egress.max_tunnels", "egress.policies", "web.listen",
	"kubernetes.kubeconfig", "kubernetes.context", "kubernetes.namespace", "kubernetes.image", "kubernetes.image_pull_policy",
	"kubernetes.storage_class", "kubernetes.home_gb", "kubernetes.workspace_gb", "kubernetes.runtime",
	"kubernetes.cpu_request", "kubernetes.memory_request_mb",
	"kubernetes.node_selector", "kubernetes.tolerations", "kubernetes.unsafe_unenforced_network_policy",
	"credential.claude_login_file", "credential.subscription_type", "credential.rate_limit_tier", "credential.scopes",
	"anthropic.ca_file", "anthropic.direct", "credential.fallback_to_owner", "credential.oauth.authorize_url", "credential.oauth.token_url",
	"credential.oauth.redirect_url", "credential.oauth.client_id", "api.group", "users.tokens_per_day", "users.max_sessions", "users.max_streams", "users.limits",
	"relay.name", "relay.prefix", "relay.upstream", "relay.header",
	"prices.as_of", "prices.models",
}

func hint(key string) string {
	if now, ok := renamed[key]; ok {
		return fmt.Sprintf(" (it is now %q)", now)
	}
	best, bestD := "", 4
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (see docs/CONFIG.md for the keys)"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// renamed are keys of earlier versions and what they are now.
var renamed = map[string]string{"kubernetes.runtime_class": "kubernetes.runtime"}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
