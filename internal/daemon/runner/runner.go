// Package runner is `paddock serve`: it owns the state directory, the store,
// the owner's credential, the session tokens and the credential proxy, and
// serves the API on an owner-only unix socket.
//
// Start-up order matters: the state directory lock comes first, so a second
// Runner fails before it touches anything (sockets included).
package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/daemon/access"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/apitoken"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/metrics"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/daemon/web"
	"github.com/paddockhq/paddock/internal/daemon/webtls"
	"github.com/paddockhq/paddock/internal/proxy/credproxy"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	servicep "github.com/paddockhq/paddock/internal/proxy/service"
	"github.com/paddockhq/paddock/internal/proxy/tlsterm"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/project"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Options configure a Runner.
type Options struct {
	StateDir string
	Config   config.Config
	// Env is the environment the credential may come from (os.Environ() of
	// `paddock serve`).
	Env []string
	Log *slog.Logger
	// Backends, if set, replaces the backends the Runner would make from
	// its configuration (tests).
	Backends map[string]sandbox.Backend
	// EgressResolver replaces the resolver of the egress proxy (tests).
	EgressResolver egress.Resolver
	// UnsafeEgressLoopbackForTests lets the egress proxy dial loopback
	// addresses, so tests can stand "the internet" up on 127.0.0.1. Only
	// Go code can set it: no flag or config key does.
	UnsafeEgressLoopbackForTests bool
}

// Runner is one running `paddock serve`.
type Runner struct {
	opts      Options
	log       *slog.Logger
	lock      *statedir.Lock
	store     store.Store
	tokens    *sessiontoken.Registry
	decisions *decisionlog.Dir
	cred      *credential.Chain
	proxy     *credproxy.Proxy
	upstream  string
	started   time.Time

	guard       *access.Guard // the API and the web page, roles enforced
	audit       *audit.Log
	webLn       net.Listener
	webAddr     net.Addr      // webLn's TCP address (under its TLS)
	webTLS      webtls.Config // the page's TLS, when it has any
	web         *web.Server   // the page, when webLn is open
	apiLn       net.Listener
	proxyLn     net.Listener
	proxyAt     string
	boxConns    *chanListener // API connections forwarded from boxes' channels
	egressConns *chanListener // egress connections forwarded from boxes' channels
	egress      *egress.Proxy
	usage       *limits.Tracker // per-session limits and the tokens used
	userUsage   *limits.Users   // per-person limits (users.*)
	unpriced    onceEach        // models with no price, warned about once (usage.go)
	priceCache  sync.Map        // model → chargedPrice, up to priceCacheMax (usage.go)
	priceCached atomic.Int32
	userCreds   userCredCache    // people's stored credentials as last read (people.go)
	self        session.Person   // the Runner's own user
	login       *oauth.Authority // paddock's own login, refreshed here alone
	pending     pendingLogins
	ulogins     userLogins      // the members' own logins
	ca          *tlsterm.CA     // terminates TLS for DirectHost (anthropic.direct)
	services    *servicep.Proxy // service credentials' requests (services.go)
	scas        sessionCAs      // each session's CA for its service hosts
	svcKeyring  bool            // the owner's service credentials go to the OS keyring
	metrics     *metrics.Metrics

	// sess holds each session the Runner has in memory, one slot each
	// (live.go, where the lock order is written down).
	sess sessionsState
	act  activityState // changes of claude's activity, broadcast (activity.go)
	// events is the stream the API serves (GET /v1/events): activity,
	// turns, decisions, approvals and lifecycle of every session.
	events *events.Hub
	// apiTokens are people's API tokens for the API on the web listener.
	apiTokens *apitoken.Store
	// ports are the published ports' listeners (ports.go).
	ports portsState
	// projects are the project files people accepted (project.go).
	projects *project.AllowStore
	// id names this Runner's state (meta/runner_id) on shared daemons.
	id string
	// stopping is set when Serve shuts down: channels that end then were
	// ended by the Runner, not lost (see supervise.go).
	stopping atomic.Bool
	// adopted is closed when the start-up reconciliation is done; session
	// operations wait for it, so none races a re-adoption.
	adopted chan struct{}

	bmu      sync.Mutex
	backends map[string]sandbox.Backend

	guestOnce sync.Once  // guestBinary (backends.go)
	imageMu   sync.Mutex // one project image made at a time (projectimage.go)
	guestBin  string
	guestErr  error

	closeOnce sync.Once
}

// New takes the state directory and opens everything, but serves nothing
// until Serve. On error, everything opened so far is released.
func New(opts Options) (_ *Runner, err error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	quietKlog(opts.Log)
	wsmount.SetLogger(opts.Log.With("component", "workspace"))
	r := &Runner{opts: opts, log: opts.Log, started: time.Now().UTC(), boxConns: newChanListener(),
		egressConns: newChanListener(),
		sess:        sessionsState{m: map[string]*slot{}},
		adopted:     make(chan struct{}),
		events:      events.New(),
		backends:    map[string]sandbox.Backend{}}
	for k, v := range opts.Backends {
		r.backends[k] = v
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if err := statedir.Ensure(opts.StateDir); err != nil {
		return nil, err
	}
	if r.lock, err = statedir.Acquire(opts.StateDir); err != nil {
		return nil, err
	}
	if r.store, err = store.OpenBolt(filepath.Join(opts.StateDir, statedir.DBFile)); err != nil {
		return nil, err
	}
	if r.id, err = runnerID(r.store); err != nil {
		return nil, err
	}
	r.apiTokens = apitoken.New(r.store)
	if r.tokens, err = sessiontoken.New(r.store); err != nil {
		return nil, err
	}
	if r.projects, err = project.NewAllowStore(filepath.Join(opts.StateDir, ProjectsDir)); err != nil {
		return nil, err
	}
	if r.decisions, err = decisionlog.OpenDir(filepath.Join(opts.StateDir, statedir.LogsDir)); err != nil {
		return nil, err
	}
	r.decisions.OnError = func(err error) { r.log.Error("decision log", logkey.Error, err) }
	r.decisions.SetRetention(decisionlog.Retention{MaxSize: int64(opts.Config.Logs.MaxSize), MaxAge: opts.Config.Logs.MaxAge.D()})
	cc := opts.Config.Credential
	r.cred = &credential.Chain{
		File:         credential.File{Path: CredentialFile(opts.StateDir)},
		Keyring:      credential.Keyring{Account: opts.StateDir},
		Env:          opts.Env,
		Login:        credential.LoginFile{Path: loginFile(cc.ClaudeLoginFile, opts.Env)},
		Plan:         credential.Plan{SubscriptionType: cc.SubscriptionType, RateLimitTier: cc.RateLimitTier, Scopes: cc.Scopes},
		RecheckEvery: time.Second,
	}
	r.login = &oauth.Authority{Store: oauth.Store{Path: LoginFile(opts.StateDir)},
		Client: &oauth.Client{Endpoints: endpoints(cc.OAuth)}, Log: r.log.With(logkey.Component, "login")}
	r.cred.Paddock = r.login
	r.usage = limits.New()
	r.userUsage = limits.NewUsers()
	r.self = selfPerson()
	r.metrics = metrics.New(r.Sessions)
	r.metrics.LoginStatus(r.login.Status)
	if err := r.openCA(); err != nil {
		return nil, err
	}
	if err := r.openProxy(); err != nil {
		return nil, err
	}
	if r.audit, err = audit.Open(filepath.Join(opts.StateDir, statedir.AuditFile)); err != nil {
		return nil, err
	}
	r.guard = access.New(r, r.Directory(), r.audit, r.log.With(logkey.Component, "access"))
	if g := opts.Config.API.Group; g != "" {
		if _, err := user.LookupGroup(g); err != nil {
			return nil, fmt.Errorf("api.group %q: no such group on this host; create it (sudo groupadd %s) and add its people (sudo usermod -aG %s NAME), or leave api.group out: %w", g, g, g, errdefs.ErrInvalid)
		}
	}
	if u := opts.Config.Users; u.TokensPerDay > 0 || len(u.Limits) > 0 {
		r.readUsageToday(context.Background())
	}
	r.egress = egress.New(egress.Options{
		Policy:                      r.policy,
		Resolver:                    opts.EgressResolver,
		Log:                         r.log.With(logkey.Component, "egress"),
		Decisions:                   metrics.Tee{r.decisions, r.metrics, r.events},
		MaxTunnels:                  opts.Config.Egress.MaxTunnels,
		UnsafeAllowLoopbackForTests: opts.UnsafeEgressLoopbackForTests,
		Terminate:                   r.terminate,
		Intercept:                   r.intercept,
		AskTimeout:                  opts.Config.Egress.AskTimeout.D(),
		MaxPending:                  opts.Config.Egress.MaxPending,
		OnPending:                   r.notifyPending,
	})
	if err := r.openServices(); err != nil {
		return nil, err
	}
	return r, nil
}

// openProxy makes the credential proxy, from the configuration (its
// upstream, relays and bounds) and the Runner's credentials and tokens.
func (r *Runner) openProxy() error {
	up, err := config.ParseUpstream(r.opts.Config.Anthropic.Upstream)
	if err != nil {
		return err
	}
	r.upstream = up.String()
	pc := r.opts.Config.Proxy
	var relays []credproxy.Relay
	for _, rc := range r.opts.Config.Relays {
		rl, err := credproxy.NewRelay(rc.Name, rc.Prefix, rc.Upstream, rc.Header)
		if err != nil {
			return err
		}
		relays = append(relays, rl)
	}
	sink := metrics.Tee{r.decisions, r.metrics, r.events}
	roots, err := upstreamRoots(r.opts.Config.Anthropic.CAFile)
	if err != nil {
		return err
	}
	r.proxy, err = credproxy.New(credproxy.Options{
		UpstreamRoots: roots,
		Limits:        userLimiter{r},
		Relays:        relays,
		RelaySecret: func(id, relay string) (secret.Value, bool) {
			c, err := r.relaySecretFile(id, relay).Load()
			return c.Secret, err == nil
		},
		SessionCredential:     r.credentialOf,
		OnExpired:             r.refreshExpired,
		Upstream:              up,
		Credential:            r.cred,
		Tokens:                r.tokens,
		Log:                   r.log.With(logkey.Component, "credproxy"),
		Decisions:             sink,
		MaxRequestBytes:       pc.MaxRequestBytes,
		ReadTimeout:           pc.ReadTimeout.D(),
		ResponseHeaderTimeout: pc.ResponseHeaderTimeout.D(),
		StreamIdleTimeout:     pc.StreamIdleTimeout.D(),
		MaxIdleConns:          pc.MaxIdleConns,
		UsageView:             r.opts.Config.Anthropic.UsageViewOn(),
	})
	return err
}

// runnerID returns the id kept in the store, making one on first start.
func runnerID(st store.Store) (string, error) {
	if b, err := st.Get(store.BucketMeta, "runner_id"); err == nil {
		return string(b), nil
	} else if !errdefs.Is(err, errdefs.ErrNotFound) {
		return "", err
	}
	id, err := session.NewID()
	if err != nil {
		return "", err
	}
	return id, st.Put(store.BucketMeta, "runner_id", []byte(id))
}

// loginFile picks Claude Code's login file: configured, off, or
// ~/.claude/.credentials.json of the HOME in env.
func loginFile(configured string, env []string) string {
	switch configured {
	case "off":
		return ""
	case "":
		for _, kv := range env {
			if home, ok := strings.CutPrefix(kv, "HOME="); ok && home != "" {
				return filepath.Join(home, ".claude", ".credentials.json")
			}
		}
		return ""
	}
	return configured
}

// CredentialFile is where `paddock credential set` stores the credential.
func CredentialFile(stateDir string) string { return filepath.Join(stateDir, "credential.json") }

// Tokens gives access to the session token registry (sessions, tests).
func (r *Runner) Tokens() *sessiontoken.Registry { return r.tokens }

// Proxy is the credential proxy handler.
func (r *Runner) Proxy() *credproxy.Proxy { return r.proxy }

// ProxyAddr is where the proxy listens on the host, as "unix:/path" or
// "host:port"; empty before Serve or when off.
func (r *Runner) ProxyAddr() string { return r.proxyAt }

// Close releases the store, logs, sockets and lock. Idempotent.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		if r.apiLn != nil {
			r.apiLn.Close()
		}
		if r.proxyLn != nil {
			r.proxyLn.Close()
		}
		r.boxConns.Close()
		r.egressConns.Close()
		r.closeAllPorts()
		if r.services != nil {
			r.services.Close()
		}
		if r.webLn != nil {
			r.webLn.Close()
		}
		if r.web != nil {
			r.web.Close()
		}
		if r.decisions != nil {
			r.decisions.Close()
		}
		if r.audit != nil {
			r.audit.Close()
		}
		if r.store != nil {
			r.store.Close()
		}
		r.lock.Release()
	})
	return nil
}

// Health implements api.Backend.
func (r *Runner) Health(context.Context) (api.Health, error) {
	return api.Health{ID: r.id, Version: version.String(), PID: os.Getpid(), StateDir: r.opts.StateDir,
		Proxy: r.proxyAt, Upstream: r.upstream, Started: r.started}, nil
}

// CredentialStatus implements api.Backend: the caller's credential, the
// one their sessions use.
func (r *Runner) CredentialStatus(ctx context.Context) (credential.Status, error) {
	c, err := r.credentialOfPerson(r.caller(ctx))
	if err != nil {
		return credential.Status{}, err
	}
	return c.Status(), nil
}

// Logs implements api.Backend.
func (r *Runner) Logs(_ context.Context, session string, n int) ([]decisionlog.Entry, error) {
	if session == "" {
		return nil, fmt.Errorf("no session named: %w", errdefs.ErrInvalid)
	}
	// A name or id prefix of a known session, else taken as an id.
	if s, err := r.Session(context.Background(), session); err == nil {
		session = s.ID
	}
	return r.decisions.Read(session, n)
}
