// Package config loads paddock's versioned TOML configuration file.
//
// The file is optional when it is the default one (<state-dir>/paddock.toml)
// and required when named with --config. Every key is known: an unknown key
// or a bad value is an *Error naming the file, the line where known, and the
// dotted key. Command-line flags override the file; see internal/daemon/cli.
//
// The reference of every key is docs/CONFIG.md; keep the two together.
package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// CurrentVersion is the only file format version this build reads.
const CurrentVersion = 1

// Config is the whole file. The zero value is not valid; start from Default.
type Config struct {
	Version    int        `toml:"version"`
	Log        Log        `toml:"log"`
	Anthropic  Anthropic  `toml:"anthropic"`
	Proxy      Proxy      `toml:"proxy"`
	Sessions   Sessions   `toml:"sessions"`
	Claude     Claude     `toml:"claude"`
	Local      Local      `toml:"local"`
	Docker     Docker     `toml:"docker"`
	Kubernetes Kubernetes `toml:"kubernetes"`
	Egress     Egress     `toml:"egress"`
	Web        Web        `toml:"web"`
	API        API        `toml:"api"`
	Users      Users      `toml:"users"`
	Credential Credential `toml:"credential"`
	Relays     []Relay    `toml:"relay"`
	Services   Services   `toml:"services"`
	Notify     Notify     `toml:"notify"`
	Logs       Logs       `toml:"logs"`
	Prices     Prices     `toml:"prices"`
}

// Services configures the proxy of service credentials ([services]:
// paddock secret, paddock run --secret).
type Services struct {
	// CAFile, if set, holds the only roots (PEM) a service host's
	// certificate may chain to: a test server's, or a GitHub Enterprise
	// host's private CA. Unset: the system's roots.
	CAFile string `toml:"ca_file"`
	// MaxPushMB bounds one push through a grant (default 1024).
	MaxPushMB int64 `toml:"max_push_mb"`
	// Sets name lists of grants (NAME[:OWNER/REPO[:read|push]]) that
	// paddock run --secret-set gives at once.
	Sets map[string][]string `toml:"sets"`
}

// API configures who may use the Runner's socket ([api]).
type API struct {
	// Group, if set, opens the API socket to this host group (0660): its
	// members are the Runner's people, each with their own sessions; the
	// Runner's own user and root are its admins. "" keeps the socket the
	// Runner's user's alone (0600).
	Group string `toml:"group"`
}

// Users sets per-person limits ([users]), beside each session's own; 0
// means none. Limits overrides them for named users.
type Users struct {
	UserLimits
	Limits map[string]UserLimits `toml:"limits"`
}

// UserLimits are one person's limits across all their sessions.
type UserLimits struct {
	// TokensPerDay caps input plus output tokens per UTC day.
	TokensPerDay int64 `toml:"tokens_per_day"`
	// MaxSessions caps sessions running at once (asleep ones don't count).
	MaxSessions int `toml:"max_sessions"`
	// MaxStreams caps requests in flight at once, over all sessions.
	MaxStreams int `toml:"max_streams"`
}

// For returns the limits of user: the named ones where set, else the
// defaults, key by key.
func (u Users) For(user string) UserLimits {
	l := u.UserLimits
	if o, ok := u.Limits[user]; ok {
		if o.TokensPerDay != 0 {
			l.TokensPerDay = o.TokensPerDay
		}
		if o.MaxSessions != 0 {
			l.MaxSessions = o.MaxSessions
		}
		if o.MaxStreams != 0 {
			l.MaxStreams = o.MaxStreams
		}
	}
	return l
}

// Notify configures the host command the Runner runs when a session starts
// waiting for a person or its claude exits ([notify]).
type Notify struct {
	// Command runs with /bin/sh -c, with PADDOCK_SESSION, PADDOCK_SESSION_ID,
	// PADDOCK_ACTIVITY, PADDOCK_EXIT_STATUS and PADDOCK_REASON in an
	// environment of its own (never the Runner's, which may hold a
	// credential); "" runs nothing.
	Command string `toml:"command"`
	// Timeout ends the command (SIGKILL) after this long.
	Timeout Duration `toml:"timeout"`
}

// Relay is a further route of the credential proxy ([[relay]]): requests
// under Prefix go to Upstream with the session's secret for this relay in
// Header.
type Relay struct {
	Name     string `toml:"name"`
	Prefix   string `toml:"prefix"`
	Upstream string `toml:"upstream"`
	Header   string `toml:"header"`
}

// Credential configures where the owner's credential may come from besides
// `paddock credential set` and the environment, and its plan.
type Credential struct {
	// ClaudeLoginFile is Claude Code's own login file, read and never
	// refreshed; "" means ~/.claude/.credentials.json of paddock serve's
	// HOME, "off" skips it.
	ClaudeLoginFile string `toml:"claude_login_file"`
	// The plan of a setup token (Claude Code reads it from the
	// environment for model defaults): "pro", "max", …
	SubscriptionType string `toml:"subscription_type"`
	RateLimitTier    string `toml:"rate_limit_tier"`
	// Scopes, space-separated (default: Claude Code's own, user:inference).
	Scopes string `toml:"scopes"`
	// FallbackToOwner lets the sessions of a person with no credential of
	// their own use the owner's (one subscription pays for all). Off, such
	// a person's sessions are refused until they run paddock credential set.
	FallbackToOwner bool `toml:"fallback_to_owner"`
	// OAuth overrides the endpoints of paddock credential login (tests, a
	// staging server); "" keeps Claude Code's own.
	OAuth OAuthEndpoints `toml:"oauth"`
}

// OAuthEndpoints are an OAuth server's addresses and paddock's client id
// there ([credential.oauth]).
type OAuthEndpoints struct {
	AuthorizeURL string `toml:"authorize_url"`
	TokenURL     string `toml:"token_url"`
	RedirectURL  string `toml:"redirect_url"`
	ClientID     string `toml:"client_id"`
}

// Egress configures the egress proxy.
type Egress struct {
	// MaxTunnels caps each session's open egress connections.
	MaxTunnels int `toml:"max_tunnels"`
	// Policies are named allowlists for `paddock run --egress-policy NAME`,
	// attached and detached live with `paddock egress attach|detach`.
	Policies map[string]EgressPolicy `toml:"policies"`
	// AskTimeout is how long a connection of an ask-mode session waits for
	// a person's answer before it is refused.
	AskTimeout Duration `toml:"ask_timeout"`
	// MaxPending caps each session's connections waiting for an answer;
	// past it, the oldest is refused first.
	MaxPending int `toml:"max_pending"`
}

// EgressPolicy is a named allowlist: NAME[:PORT] and *.NAME[:PORT] rules.
type EgressPolicy struct {
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
}

// Sessions sets defaults for new sessions.
type Sessions struct {
	// Backend is the default backend: "local" or "docker".
	Backend string `toml:"backend"`
	// MemoryMB, Pids and CPUs are each box's limits.
	MemoryMB int64   `toml:"memory_mb"`
	Pids     int64   `toml:"pids"`
	CPUs     float64 `toml:"cpus"`
	// RPM, MaxStreams and TokenBudget are each session's credential proxy
	// limits (0: none); paddock run overrides them.
	RPM         int   `toml:"rpm"`
	MaxStreams  int   `toml:"max_streams"`
	TokenBudget int64 `toml:"token_budget"`
	// BudgetUSD is each session's budget in US dollars (0: none), priced
	// with [prices]; paddock run --budget-usd overrides it.
	BudgetUSD float64 `toml:"budget_usd"`
	// FreezeAfter freezes a session that has waited for a person this
	// long (0: never); SleepAfter fully sleeps it (0: never). A frozen
	// session's attach or wake thaws it.
	FreezeAfter Duration `toml:"freeze_after"`
	SleepAfter  Duration `toml:"sleep_after"`
	// Clone makes a session whose workspace is a git repository a clone
	// session (paddock run --clone) unless it asks --no-clone.
	Clone bool `toml:"clone"`
	// Runtime is what a session's box runs on unless paddock run
	// --runtime says (internal/box/runtimes: "gvisor", "runsc", "kata", or
	// a name the backend's engine knows); a backend's own runtime key
	// comes first for that backend. "": each backend's default (bwrap,
	// the Docker daemon's default runtime, the cluster's default).
	Runtime string `toml:"runtime"`
}

// RuntimeFor is the runtime word a session on backend runs with unless
// it asks for one: that backend's runtime key, else sessions.runtime.
func (c *Config) RuntimeFor(backend string) string {
	var own string
	switch backend {
	case "local":
		own = c.Local.Runtime
	case "docker":
		own = c.Docker.Runtime
	case "kubernetes":
		own = c.Kubernetes.Runtime
	}
	if own != "" {
		return own
	}
	return c.Sessions.Runtime
}

// Claude locates the pinned Claude Code CLI.
type Claude struct {
	// Binary, if set, is used instead of installing the pinned version from
	// npm into <state-dir>/cli/<version>; it must report the pinned version.
	Binary string `toml:"binary"`
	// AllowedVersions are the Claude Code versions besides the pinned one
	// that a session may ask for (paddock run --claude-version): the
	// Runner installs them from npm (local) or runs their image (docker).
	// An admin's list; anything else is refused before any install.
	AllowedVersions []string `toml:"allowed_versions"`
}

// Local configures the local (bubblewrap) backend.
type Local struct {
	// UIDBase is the first host uid given to boxes (each live box gets its own).
	UIDBase int `toml:"uid_base"`
	// Runtime is the local backend's runtime: "bwrap" (bubblewrap, the
	// default) or "runsc" (gVisor; "gvisor" names it too).
	Runtime string `toml:"runtime"`
	// Runsc is the runsc program for gVisor boxes ("" = the pinned build
	// `make deps GVISOR=1` makes, if it is there).
	Runsc string `toml:"runsc"`
}

// Docker configures the docker backend.
type Docker struct {
	// Host is the daemon address ("" = DOCKER_HOST or the default socket).
	Host string `toml:"host"`
	// Image is the box image (built with `paddock image build`).
	Image string `toml:"image"`
	// Runtime is the docker backend's runtime: a runtime the daemon has
	// registered ("runsc", "kata"; "gvisor" finds runsc), "" for its default.
	Runtime string `toml:"runtime"`
	// BaseCache keeps the debootstrapped trees of project images' bases
	// ([image] packages of a project file) between runs, so a Docker
	// store that lost a base imports it again without debootstrap; ""
	// is <state-dir>/docker/bases. An absolute path.
	BaseCache string `toml:"base_cache"`
}

// Log configures the Runner's own log.
type Log struct {
	Format string `toml:"format"` // "text" or "json"
	Level  string `toml:"level"`  // "debug", "info", "warn", "error"
}

// Anthropic names the upstream the credential proxy forwards to.
type Anthropic struct {
	// Upstream is the base URL; https always, http only to a loopback address.
	Upstream string `toml:"upstream"`
	// CAFile, if set, holds the only roots (PEM) an https upstream's
	// certificate may chain to: a test server's, or a corporate gateway's.
	CAFile string `toml:"ca_file"`
	// Direct lets the requests Claude Code sends to the API host itself,
	// not to its base URL (fast mode, /status usage, managed settings;
	// docs/DIRECT-REQUESTS.md), through the Runner: it terminates TLS for
	// that host with a CA of its own that boxes trust, forwards only the
	// allowlisted routes with the credential swapped in, and refuses the
	// rest. Off, they are refused as before. Default on.
	Direct *bool `toml:"direct"`
	// UsageView lets a box's /status (and /usage) show the plan's usage
	// limits. The CLI asks for them only without its quiet switch
	// (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC), so boxes then run with the
	// telemetry switches instead (DISABLE_TELEMETRY, DISABLE_ERROR_REPORTING,
	// DO_NOT_TRACK) and the Runner refuses the other requests the CLI then
	// tries on the API host. The CLI then also makes its auxiliary model
	// requests (a quota probe at start, session titles), which the
	// credential proxy forwards and which cost tokens. Needs Direct.
	// Default off.
	UsageView bool `toml:"usage_view"`
}

// DirectOn reports whether anthropic.direct is on (the default).
func (a Anthropic) DirectOn() bool { return a.Direct == nil || *a.Direct }

// UsageViewOn reports whether anthropic.usage_view is on and can be: it
// rides on the direct path.
func (a Anthropic) UsageViewOn() bool { return a.DirectOn() && a.UsageView }

// Proxy tunes the credential proxy.
type Proxy struct {
	// Listen is where the proxy is served on the host besides the boxes'
	// channels: "unix:/path", "127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT",
	// "off", or "" for unix:<state-dir>/proxy.sock. Never a non-loopback address.
	Listen string `toml:"listen"`
	// MaxRequestBytes caps a request body (the Messages API's own cap is 32 MB).
	MaxRequestBytes int64 `toml:"max_request_bytes"`
	// ReadHeaderTimeout bounds how long a client may take to send its headers.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// ReadTimeout bounds how long a client may take to send a whole request
	// body, not counting time the upstream holds a body passed on as it
	// arrives back (ResponseHeaderTimeout bounds that, until the upstream
	// answers).
	ReadTimeout Duration `toml:"read_timeout"`
	// ResponseHeaderTimeout bounds sending a request upstream and waiting for
	// the response headers.
	ResponseHeaderTimeout Duration `toml:"response_header_timeout"`
	// StreamIdleTimeout ends a response that sends no byte for this long.
	StreamIdleTimeout Duration `toml:"stream_idle_timeout"`
	// MaxIdleConns is the size of the upstream keep-alive pool.
	MaxIdleConns int `toml:"max_idle_conns"`
}

// Duration is a time.Duration written as a Go duration string ("30s", "5m").
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"30s\" or \"5m\"", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultUpstream is the Anthropic API.
const DefaultUpstream = "https://api.anthropic.com"

// Default returns the configuration used for every key the file leaves out.
func Default() Config {
	return Config{
		Version:   CurrentVersion,
		Log:       Log{Format: "text", Level: "info"},
		Anthropic: Anthropic{Upstream: DefaultUpstream},
		Proxy: Proxy{
			MaxRequestBytes:       32 << 20,
			ReadHeaderTimeout:     Duration(10 * time.Second),
			ReadTimeout:           Duration(5 * time.Minute),
			ResponseHeaderTimeout: Duration(10 * time.Minute),
			StreamIdleTimeout:     Duration(5 * time.Minute),
			MaxIdleConns:          512,
		},
		Sessions:   Sessions{Backend: "local", MemoryMB: 4096, Pids: 1024, CPUs: 2},
		Local:      Local{UIDBase: 200000},
		Docker:     Docker{Image: "paddock/box:claude-" + claudecode.PinnedVersion},
		Kubernetes: Kubernetes{Namespace: "paddock"},
		Egress:     Egress{MaxTunnels: 64, AskTimeout: Duration(time.Minute), MaxPending: 16},
		Web:        Web{Listen: "127.0.0.1:7777"},
		Notify:     Notify{Timeout: Duration(10 * time.Second)},
		Logs:       Logs{MaxSize: DefaultLogsMaxSize},
		Prices:     DefaultPrices(),
	}
}

// ParseLevel reads a log level name.
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return LevelDebug, nil
	case "info":
		return LevelInfo, nil
	case "warn", "warning":
		return LevelWarn, nil
	case "error":
		return LevelError, nil
	}
	return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
}

// Level mirrors slog's levels without importing slog here.
type Level int

// Levels, equal to slog's.
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// ParseUpstream checks an upstream base URL: https to any host, or http to a
// loopback address only (tests, a local gateway). No user info, query or
// fragment. The path, if any, is kept as a prefix.
func ParseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%q has no host; write it like https://api.anthropic.com", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("%q may not carry user info, a query or a fragment", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("%q: plain http is allowed only to a loopback address; use https", s)
		}
	default:
		return nil, fmt.Errorf("%q: scheme must be https (or http to a loopback address)", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// IsLoopbackHost reports whether host is "localhost" or a loopback IP literal.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback() && a.Zone() == ""
}

// Listen is a parsed proxy.listen value.
type Listen struct {
	Network string // "unix", "tcp" or "" (off / default)
	Address string
	Off     bool
}

// ParseListen checks a proxy.listen value; see Proxy.Listen.
func ParseListen(s string) (Listen, error) {
	switch {
	case s == "":
		return Listen{}, nil
	case s == "off":
		return Listen{Off: true}, nil
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if !strings.HasPrefix(p, "/") {
			return Listen{}, fmt.Errorf("%q: a unix socket path must be absolute", s)
		}
		return Listen{Network: "unix", Address: p}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Listen{}, fmt.Errorf("%q is not unix:/path, host:port or off", s)
	}
	if !IsLoopbackHost(host) {
		return Listen{}, fmt.Errorf("%q is not a loopback address; the proxy is never exposed to a network", s)
	}
	if _, err := netip.ParseAddrPort("127.0.0.1:" + port); err != nil {
		return Listen{}, fmt.Errorf("%q: bad port", s)
	}
	return Listen{Network: "tcp", Address: s}, nil
}
