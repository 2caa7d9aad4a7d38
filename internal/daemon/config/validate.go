package config

// validate.go: the checks of every value.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

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
