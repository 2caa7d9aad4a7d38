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
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/egress"
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

// Kubernetes configures the kubernetes backend ([kubernetes]): boxes as
// pods in one namespace of a cluster the Runner reaches with a kubeconfig
// (or in-cluster config), needing there the Role of
// contrib/kubernetes/role.yaml.
type Kubernetes struct {
	// Kubeconfig is an absolute path; "" uses the in-cluster config.
	Kubeconfig string `toml:"kubeconfig"`
	// Context names a kubeconfig context; "" uses its current one.
	Context string `toml:"context"`
	// Namespace holds every object the backend makes (it must exist).
	Namespace string `toml:"namespace"`
	// Image is the box image. Unless ImagePullPolicy is "Never" (an image
	// already on the nodes), it must be pinned by digest
	// (repo@sha256:…, as `paddock image build --push REPO` prints).
	Image string `toml:"image"`
	// ImagePullPolicy: "" (IfNotPresent), "IfNotPresent", "Always", "Never".
	ImagePullPolicy string `toml:"image_pull_policy"`
	// StorageClass of the claims ("" = the cluster's default class).
	StorageClass string `toml:"storage_class"`
	// HomeGB and WorkspaceGB size the claims (0 = 10).
	HomeGB      int `toml:"home_gb"`
	WorkspaceGB int `toml:"workspace_gb"`
	// CPURequest and MemoryRequestMB are what the scheduler reserves for
	// each box (0 = 0.1 CPU and 256 MiB; never above the session's limits,
	// sessions.cpus and sessions.memory_mb).
	CPURequest      float64 `toml:"cpu_request"`
	MemoryRequestMB int     `toml:"memory_request_mb"`
	// Runtime is the kubernetes backend's runtime: a RuntimeClass of
	// the cluster (gVisor, Kata) for the pods, "" for the cluster's default.
	Runtime string `toml:"runtime"`
	// NodeSelector and Tolerations place the pods.
	NodeSelector map[string]string `toml:"node_selector"`
	Tolerations  []Toleration      `toml:"tolerations"`
	// UnsafeUnenforcedNetworkPolicy runs boxes on a cluster where paddock
	// cannot prove that NetworkPolicy is enforced: their pods are then as
	// isolated as the cluster's network makes them, nothing more.
	// ProjectRegistry is a repository (registry.example.com/team/paddock)
	// the cluster pulls from, where the Runner pushes the images of
	// project files ([image] of .paddock.toml), built on its host's
	// Docker, with the login docker login stored for its user; pods name
	// them by digest. "": a project file with [image] is refused on this
	// backend.
	ProjectRegistry               string `toml:"project_registry"`
	UnsafeUnenforcedNetworkPolicy bool   `toml:"unsafe_unenforced_network_policy"`
}

// Toleration is a pod toleration (the fields of Kubernetes' own).
type Toleration struct {
	Key      string `toml:"key"`
	Operator string `toml:"operator"` // "Equal" (default) or "Exists"
	Value    string `toml:"value"`
	Effect   string `toml:"effect"` // "", "NoSchedule", "PreferNoSchedule", "NoExecute"
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

// Validate checks every value. Errors are *Error with Key set and File empty.
func (c Config) Validate() error {
	if c.Version != CurrentVersion {
		return &Error{Key: "version", Msg: fmt.Sprintf("this paddock reads version %d, the file says %d", CurrentVersion, c.Version)}
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return &Error{Key: "log.format", Msg: fmt.Sprintf("%q is not one of text, json", c.Log.Format)}
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		return &Error{Key: "log.level", Msg: err.Error()}
	}
	if _, err := ParseUpstream(c.Anthropic.Upstream); err != nil {
		return &Error{Key: "anthropic.upstream", Msg: err.Error()}
	}
	if _, err := ParseListen(c.Proxy.Listen); err != nil {
		return &Error{Key: "proxy.listen", Msg: err.Error()}
	}
	if c.Proxy.MaxRequestBytes < 1024 || c.Proxy.MaxRequestBytes > 1<<30 {
		return &Error{Key: "proxy.max_request_bytes", Msg: fmt.Sprintf("%d is outside 1024..1073741824", c.Proxy.MaxRequestBytes)}
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{
		{"proxy.read_header_timeout", c.Proxy.ReadHeaderTimeout},
		{"proxy.read_timeout", c.Proxy.ReadTimeout},
		{"proxy.response_header_timeout", c.Proxy.ResponseHeaderTimeout},
		{"proxy.stream_idle_timeout", c.Proxy.StreamIdleTimeout},
	} {
		if d.v <= 0 {
			return &Error{Key: d.key, Msg: fmt.Sprintf("%s must be positive", time.Duration(d.v))}
		}
	}
	if err := c.Prices.validate(); err != nil {
		return err
	}
	if err := c.Logs.validate(); err != nil {
		return err
	}
	if c.Proxy.MaxIdleConns < 1 || c.Proxy.MaxIdleConns > 65536 {
		return &Error{Key: "proxy.max_idle_conns", Msg: fmt.Sprintf("%d is outside 1..65536", c.Proxy.MaxIdleConns)}
	}
	switch c.Sessions.Backend {
	case "local", "docker", "kubernetes":
	default:
		return &Error{Key: "sessions.backend", Msg: fmt.Sprintf("%q is not one of local, docker, kubernetes", c.Sessions.Backend)}
	}
	if c.Sessions.MemoryMB < 64 || c.Sessions.MemoryMB > 1<<20 {
		return &Error{Key: "sessions.memory_mb", Msg: fmt.Sprintf("%d is outside 64..1048576", c.Sessions.MemoryMB)}
	}
	if c.Sessions.Pids < 32 || c.Sessions.Pids > 1<<22 {
		return &Error{Key: "sessions.pids", Msg: fmt.Sprintf("%d is outside 32..4194304", c.Sessions.Pids)}
	}
	if c.Sessions.CPUs < 0.1 || c.Sessions.CPUs > 1024 {
		return &Error{Key: "sessions.cpus", Msg: fmt.Sprintf("%g is outside 0.1..1024", c.Sessions.CPUs)}
	}
	if c.Sessions.RPM < 0 || c.Sessions.MaxStreams < 0 || c.Sessions.TokenBudget < 0 {
		return &Error{Key: "sessions", Msg: "rpm, max_streams and token_budget must be 0 (no limit) or more"}
	}
	if b := c.Sessions.BudgetUSD; !(b >= 0 && b <= MaxBudgetUSD) { // NaN too
		return &Error{Key: "sessions.budget_usd", Msg: fmt.Sprintf("%g is outside 0 (no budget)..%g", b, float64(MaxBudgetUSD))}
	}
	if c.Claude.Binary != "" && !strings.HasPrefix(c.Claude.Binary, "/") {
		return &Error{Key: "claude.binary", Msg: fmt.Sprintf("%q must be an absolute path", c.Claude.Binary)}
	}
	for _, v := range c.Claude.AllowedVersions {
		if !claudecode.IsExactVersion(v) {
			return &Error{Key: "claude.allowed_versions", Msg: fmt.Sprintf("%q is not an exact version like %s (never a range or latest)", v, claudecode.PinnedVersion)}
		}
	}
	if c.Local.UIDBase < 1000 || c.Local.UIDBase > 1<<31-1<<20 {
		return &Error{Key: "local.uid_base", Msg: fmt.Sprintf("%d is outside 1000..%d", c.Local.UIDBase, 1<<31-1<<20)}
	}
	if c.Docker.Image == "" {
		return &Error{Key: "docker.image", Msg: "must name an image (see paddock image build)"}
	}
	if c.Docker.BaseCache != "" && !strings.HasPrefix(c.Docker.BaseCache, "/") {
		return &Error{Key: "docker.base_cache", Msg: fmt.Sprintf("%q must be an absolute path", c.Docker.BaseCache)}
	}
	if err := c.Kubernetes.validate(); err != nil {
		return err
	}
	if c.Egress.MaxTunnels < 1 || c.Egress.MaxTunnels > 100000 {
		return &Error{Key: "egress.max_tunnels", Msg: fmt.Sprintf("%d is outside 1..100000", c.Egress.MaxTunnels)}
	}
	if d := c.Notify.Timeout.D(); d < 100*time.Millisecond || d > 10*time.Minute {
		return &Error{Key: "notify.timeout", Msg: fmt.Sprintf("%v is outside 100ms..10m", d)}
	}
	if strings.ContainsRune(c.Notify.Command, 0) || len(c.Notify.Command) > 4096 {
		return &Error{Key: "notify.command", Msg: "must be a shell command of at most 4096 bytes, without NUL"}
	}
	if d := c.Egress.AskTimeout.D(); d < time.Second || d > time.Hour {
		return &Error{Key: "egress.ask_timeout", Msg: fmt.Sprintf("%v is outside 1s..1h", d)}
	}
	fa, sa := c.Sessions.FreezeAfter.D(), c.Sessions.SleepAfter.D()
	for _, kd := range []struct {
		k string
		d time.Duration
	}{{"sessions.freeze_after", fa}, {"sessions.sleep_after", sa}} {
		if kd.d != 0 && (kd.d < 10*time.Second || kd.d > 30*24*time.Hour) {
			return &Error{Key: kd.k, Msg: fmt.Sprintf("%v is outside 10s..720h (or 0: never)", kd.d)}
		}
	}
	if fa != 0 && sa != 0 && fa >= sa {
		return &Error{Key: "sessions.freeze_after", Msg: fmt.Sprintf("%v is not shorter than sessions.sleep_after (%v): sessions would sleep before they froze; make it shorter, or 0 (never freeze)", fa, sa)}
	}
	if c.Egress.MaxPending < 1 || c.Egress.MaxPending > 1000 {
		return &Error{Key: "egress.max_pending", Msg: fmt.Sprintf("%d is outside 1..1000", c.Egress.MaxPending)}
	}
	for name, p := range c.Egress.Policies {
		if _, err := egress.NewPolicy("allowlist", p.Allow, p.Deny); err != nil {
			return &Error{Key: "egress.policies." + name, Msg: err.Error()}
		}
	}
	if f := c.Credential.ClaudeLoginFile; f != "" && f != "off" && !strings.HasPrefix(f, "/") {
		return &Error{Key: "credential.claude_login_file", Msg: fmt.Sprintf("%q must be an absolute path, or off", f)}
	}
	for k, v := range map[string]string{"credential.subscription_type": c.Credential.SubscriptionType, "credential.rate_limit_tier": c.Credential.RateLimitTier} {
		if v != "" && !regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`).MatchString(v) {
			return &Error{Key: k, Msg: fmt.Sprintf("%q is not a plan name", v)}
		}
	}
	if v := c.Credential.Scopes; v != "" && !regexp.MustCompile(`^[a-z0-9_.:-]+( [a-z0-9_.:-]+)*$`).MatchString(v) {
		return &Error{Key: "credential.scopes", Msg: fmt.Sprintf("%q is not a space-separated list of scopes", v)}
	}
	names := map[string]bool{}
	for i, rl := range c.Relays {
		key := fmt.Sprintf("relay[%d]", i)
		switch {
		case !regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`).MatchString(rl.Name) || names[rl.Name]:
			return &Error{Key: key + ".name", Msg: fmt.Sprintf("%q must be a unique lowercase name", rl.Name)}
		case !regexp.MustCompile(`^/[a-z0-9][a-z0-9_.-]*/$`).MatchString(rl.Prefix) || strings.HasPrefix(rl.Prefix, "/v1/") || rl.Prefix == "/api/":
			return &Error{Key: key + ".prefix", Msg: fmt.Sprintf("%q must look like /mod/ and not shadow the API", rl.Prefix)}
		case !regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`).MatchString(rl.Header):
			return &Error{Key: key + ".header", Msg: fmt.Sprintf("%q is not a header name", rl.Header)}
		}
		if _, err := ParseUpstream(rl.Upstream); err != nil {
			return &Error{Key: key + ".upstream", Msg: err.Error()}
		}
		names[rl.Name] = true
	}
	if err := c.Web.validate(); err != nil {
		return err
	}
	if f := c.Anthropic.CAFile; f != "" && !strings.HasPrefix(f, "/") {
		return &Error{Key: "anthropic.ca_file", Msg: fmt.Sprintf("%q must be an absolute path", f)}
	}
	if f := c.Services.CAFile; f != "" && !strings.HasPrefix(f, "/") {
		return &Error{Key: "services.ca_file", Msg: fmt.Sprintf("%q must be an absolute path", f)}
	}
	if c.Services.MaxPushMB < 0 {
		return &Error{Key: "services.max_push_mb", Msg: "must not be negative"}
	}
	for name, grants := range c.Services.Sets {
		if !regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`).MatchString(name) {
			return &Error{Key: "services.sets." + name, Msg: "a set's name is lower-case letters, digits and dashes"}
		}
		if len(grants) == 0 {
			return &Error{Key: "services.sets." + name, Msg: "an empty set"}
		}
		for _, g := range grants {
			if _, err := service.ParseGrant(g); err != nil {
				return &Error{Key: "services.sets." + name, Msg: err.Error()}
			}
		}
	}
	o := c.Credential.OAuth
	for k, v := range map[string]string{"credential.oauth.authorize_url": o.AuthorizeURL, "credential.oauth.token_url": o.TokenURL, "credential.oauth.redirect_url": o.RedirectURL} {
		if v != "" {
			if _, err := ParseUpstream(v); err != nil {
				return &Error{Key: k, Msg: err.Error()}
			}
		}
	}
	if v := o.ClientID; v != "" && !regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`).MatchString(v) {
		return &Error{Key: "credential.oauth.client_id", Msg: fmt.Sprintf("%q is not a client id", v)}
	}
	if g := c.API.Group; g != "" && !regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`).MatchString(g) {
		return &Error{Key: "api.group", Msg: fmt.Sprintf("%q is not a group name", g)}
	}
	for name, l := range c.Users.Limits {
		if !regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`).MatchString(name) {
			return &Error{Key: "users.limits", Msg: fmt.Sprintf("%q is not a user name", name)}
		}
		if l.TokensPerDay < 0 || l.MaxSessions < 0 || l.MaxStreams < 0 {
			return &Error{Key: "users.limits." + name, Msg: "limits are 0 (none) or more"}
		}
	}
	if u := c.Users.UserLimits; u.TokensPerDay < 0 || u.MaxSessions < 0 || u.MaxStreams < 0 {
		return &Error{Key: "users", Msg: "limits are 0 (none) or more"}
	}
	for _, r := range []struct{ key, v string }{{"sessions.runtime", c.Sessions.Runtime}, {"local.runtime", c.Local.Runtime},
		{"docker.runtime", c.Docker.Runtime}, {"kubernetes.runtime", c.Kubernetes.Runtime}} {
		if r.v != "" {
			if err := runtimes.Valid(r.v); err != nil {
				return &Error{Key: r.key, Msg: err.Error()}
			}
		}
	}
	if rt := c.Local.Runtime; rt != "" && rt != runtimes.Bwrap && runtimes.KindOf(rt, "") != runtimes.GVisor {
		return &Error{Key: "local.runtime", Msg: fmt.Sprintf("%q is not a runtime of the local backend: it runs bwrap (bubblewrap) or runsc (gVisor); for a VM per box use the docker or kubernetes backend", rt)}
	}
	if p := c.Local.Runsc; p != "" && !filepath.IsAbs(p) {
		return &Error{Key: "local.runsc", Msg: fmt.Sprintf("%q: give runsc's absolute path", p)}
	}
	return nil
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

var (
	// dnsLabel is a namespace's name (RFC 1123 label).
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// dnsSubdomain is a storage or runtime class's name.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	// labelKey is a label key: [prefix/]name.
	labelKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	// labelVal is a label value (may be empty).
	labelVal = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	// pinnedImage is an image named by digest.
	pinnedImage = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
)

// validate checks [kubernetes]; an empty image is refused only when the
// backend is used (the Runner says so then).
func (k *Kubernetes) validate() error {
	if k.Kubeconfig != "" && !strings.HasPrefix(k.Kubeconfig, "/") {
		return &Error{Key: "kubernetes.kubeconfig", Msg: fmt.Sprintf("%q must be an absolute path", k.Kubeconfig)}
	}
	if !dnsLabel.MatchString(k.Namespace) {
		return &Error{Key: "kubernetes.namespace", Msg: fmt.Sprintf("%q is not a namespace name (lower-case letters, digits, '-')", k.Namespace)}
	}
	switch k.ImagePullPolicy {
	case "", "IfNotPresent", "Always", "Never":
	default:
		return &Error{Key: "kubernetes.image_pull_policy", Msg: fmt.Sprintf("%q is not one of IfNotPresent, Always, Never", k.ImagePullPolicy)}
	}
	if k.Image != "" && k.ImagePullPolicy != "Never" && !pinnedImage.MatchString(k.Image) {
		return &Error{Key: "kubernetes.image", Msg: fmt.Sprintf("%q is not pinned by digest: name it repo@sha256:<digest> (paddock image build --push REPO prints it), or set image_pull_policy = \"Never\" for an image already on the nodes", k.Image)}
	}
	for _, c := range []struct{ key, v string }{{"kubernetes.storage_class", k.StorageClass}, {"kubernetes.runtime", k.Runtime}} {
		if c.v != "" && !dnsSubdomain.MatchString(c.v) {
			return &Error{Key: c.key, Msg: fmt.Sprintf("%q is not a Kubernetes object name", c.v)}
		}
	}
	for _, c := range []struct {
		key string
		v   int
	}{{"kubernetes.home_gb", k.HomeGB}, {"kubernetes.workspace_gb", k.WorkspaceGB}} {
		if c.v < 0 || c.v > 65536 {
			return &Error{Key: c.key, Msg: fmt.Sprintf("%d is outside 0 (default 10)..65536", c.v)}
		}
	}
	if k.CPURequest < 0 || k.CPURequest > 1024 {
		return &Error{Key: "kubernetes.cpu_request", Msg: fmt.Sprintf("%g is outside 0 (default 0.1)..1024", k.CPURequest)}
	}
	if k.MemoryRequestMB < 0 || k.MemoryRequestMB > 1<<20 {
		return &Error{Key: "kubernetes.memory_request_mb", Msg: fmt.Sprintf("%d is outside 0 (default 256)..1048576", k.MemoryRequestMB)}
	}
	for key, v := range k.NodeSelector {
		if !labelKey.MatchString(key) || !labelVal.MatchString(v) {
			return &Error{Key: "kubernetes.node_selector", Msg: fmt.Sprintf("%q = %q is not a label", key, v)}
		}
	}
	for i, t := range k.Tolerations {
		bad := func(msg string) error {
			return &Error{Key: "kubernetes.tolerations", Msg: fmt.Sprintf("toleration %d: %s", i+1, msg)}
		}
		if t.Key != "" && !labelKey.MatchString(t.Key) {
			return bad(fmt.Sprintf("key %q is not a label key", t.Key))
		}
		switch t.Operator {
		case "", "Equal":
			if t.Key == "" {
				return bad("operator Equal needs a key")
			}
		case "Exists":
			if t.Value != "" {
				return bad("operator Exists takes no value")
			}
		default:
			return bad(fmt.Sprintf("operator %q is not Equal or Exists", t.Operator))
		}
		if !labelVal.MatchString(t.Value) {
			return bad(fmt.Sprintf("value %q is not a label value", t.Value))
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			return bad(fmt.Sprintf("effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
		}
	}
	return nil
}
