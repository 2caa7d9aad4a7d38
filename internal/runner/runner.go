// Package runner is `paddock serve`: it owns the state directory, the store,
// the owner's credential, the session tokens and the credential proxy, and
// serves the API on an owner-only unix socket.
//
// Start-up order matters: the state directory lock comes first, so a second
// Runner fails before it touches anything (sockets included).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/access"
	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/audit"
	"github.com/paddockhq/paddock/internal/config"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/credproxy"
	"github.com/paddockhq/paddock/internal/credproxy/h1"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/egress"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/limits"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/metrics"
	"github.com/paddockhq/paddock/internal/oauth"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/session"
	"github.com/paddockhq/paddock/internal/sessiontoken"
	"github.com/paddockhq/paddock/internal/statedir"
	"github.com/paddockhq/paddock/internal/store"
	"github.com/paddockhq/paddock/internal/tlsterm"
	"github.com/paddockhq/paddock/internal/version"
	"github.com/paddockhq/paddock/internal/web"
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
	web         *web.Server // the page, when webLn is open
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
	ending      sync.Map         // session id → the session.Op ending its box now (Session.Ending)
	self        session.Person   // the Runner's own user
	owners      owners           // each session's owner, for the proxy
	login       *oauth.Authority // paddock's own login, refreshed here alone
	pending     pendingLogins
	ulogins     userLogins  // the members' own logins
	ca          *tlsterm.CA // terminates TLS for DirectHost (anthropic.direct)
	metrics     *metrics.Metrics
	pmu         sync.Mutex
	noOwnCred   sync.Map                  // session ids known to have no credential of their own
	policies    map[string]*egress.Policy // by session id; none means offline
	expiry      map[string]*time.Timer    // by session id: its next timed approval's end (armExpiryLocked)

	sess sessionsState
	act  activityState // what claude does in each session (activity.go)
	// id names this Runner's state (meta/runner_id) on shared daemons.
	id string
	// stopping is set when Serve shuts down: channels that end then were
	// ended by the Runner, not lost (see watchLink).
	stopping atomic.Bool
	// adopted is closed when the start-up reconciliation is done; session
	// operations wait for it, so none races a re-adoption.
	adopted chan struct{}

	bmu      sync.Mutex
	backends map[string]sandbox.Backend

	guestOnce sync.Once // guestBinary (backends.go)
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
		egressConns: newChanListener(), policies: map[string]*egress.Policy{}, expiry: map[string]*time.Timer{},
		sess:     sessionsState{live: map[string]*live{}, locks: map[string]*sync.Mutex{}},
		adopted:  make(chan struct{}),
		backends: map[string]sandbox.Backend{}}
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
	if r.tokens, err = sessiontoken.New(r.store); err != nil {
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
	up, err := config.ParseUpstream(opts.Config.Anthropic.Upstream)
	if err != nil {
		return nil, err
	}
	r.upstream = up.String()
	pc := opts.Config.Proxy
	var relays []credproxy.Relay
	for _, rc := range opts.Config.Relays {
		rl, err := credproxy.NewRelay(rc.Name, rc.Prefix, rc.Upstream, rc.Header)
		if err != nil {
			return nil, err
		}
		relays = append(relays, rl)
	}
	r.usage = limits.New()
	r.userUsage = limits.NewUsers()
	r.self = selfPerson()
	r.metrics = metrics.New(r.Sessions)
	r.metrics.LoginStatus(r.login.Status)
	sink := metrics.Tee{r.decisions, r.metrics}
	if err := r.openCA(); err != nil {
		return nil, err
	}
	roots, err := upstreamRoots(opts.Config.Anthropic.CAFile)
	if err != nil {
		return nil, err
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
		UsageView:             opts.Config.Anthropic.UsageViewOn(),
	})
	if err != nil {
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
		Decisions:                   metrics.Tee{r.decisions, r.metrics},
		MaxTunnels:                  opts.Config.Egress.MaxTunnels,
		UnsafeAllowLoopbackForTests: opts.UnsafeEgressLoopbackForTests,
		Terminate:                   r.terminate,
		AskTimeout:                  opts.Config.Egress.AskTimeout.D(),
		MaxPending:                  opts.Config.Egress.MaxPending,
		OnPending:                   r.notifyPending,
	})
	return r, nil
}

func (r *Runner) policy(session string) *egress.Policy {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	return r.policies[session]
}

// setPolicy installs a session's egress policy (none for offline).
// Open tunnels the new policy refuses are cut, and connections waiting for
// approval that it now decides are answered; it returns how many tunnels
// it cut.
func (r *Runner) setPolicy(s *session.Session) (int, error) {
	var p *egress.Policy
	if s.Egress != session.EgressOffline {
		sp, err := r.egressSpec(*s)
		if err != nil {
			return 0, err
		}
		if p, err = sp.Policy(); err != nil {
			return 0, err
		}
	}
	r.pmu.Lock()
	if p == nil {
		delete(r.policies, s.ID)
	} else {
		r.policies[s.ID] = p
	}
	r.armExpiryLocked(s.ID, p)
	r.pmu.Unlock()
	return r.egress.Recheck(s.ID), nil
}

// armExpiryLocked has the session's tunnels checked again when the next of
// its timed approvals (egress approve --for) ends: new connections stop
// matching an approval by themselves, and the check cuts a tunnel that it
// alone allowed. One timer per session, replaced with each policy (so a
// Runner started again arms it from the stored approvals), stopped with
// the policy. Under pmu.
func (r *Runner) armExpiryLocked(id string, p *egress.Policy) {
	if t := r.expiry[id]; t != nil {
		t.Stop()
		delete(r.expiry, id)
	}
	if p == nil {
		return
	}
	now := time.Now()
	var next time.Time
	for _, a := range p.Approved {
		if !a.Until.IsZero() && a.Until.After(now) && (next.IsZero() || a.Until.Before(next)) {
			next = a.Until
		}
	}
	if next.IsZero() {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(next)+10*time.Millisecond, func() {
		r.egress.Recheck(id)
		r.pmu.Lock()
		defer r.pmu.Unlock()
		if r.expiry[id] == t { // not replaced meanwhile: on to the next one
			r.armExpiryLocked(id, r.policies[id])
		}
	})
	r.expiry[id] = t
}

// dropPolicy ends a session's egress: its tunnels are cut, its waiting
// connections refused.
func (r *Runner) dropPolicy(id string) {
	r.pmu.Lock()
	delete(r.policies, id)
	r.armExpiryLocked(id, nil)
	r.pmu.Unlock()
	if r.egress != nil {
		r.egress.Recheck(id)
	}
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

// listenUnix replaces a stale socket (safe: we hold the state lock) and
// makes the new one owner-only.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// openToGroup gives the API socket to group, mode 0660: its members may
// connect, and the Runner tells them apart by their uid.
func openToGroup(path, group string) error {
	g, err := user.LookupGroup(group)
	if err != nil {
		return fmt.Errorf("api.group %q: %w", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fmt.Errorf("api.group %q has gid %q", group, g.Gid)
	}
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("give %s to group %s: %w (the Runner's user must be root or in that group)", path, group, err)
	}
	return os.Chmod(path, 0o660)
}

// Listen opens the API socket and the proxy listener. Serve calls it if
// needed; tests call it first to learn the addresses.
func (r *Runner) Listen() error {
	if r.apiLn != nil {
		return nil
	}
	var err error
	if r.apiLn, err = listenUnix(filepath.Join(r.opts.StateDir, statedir.APISocket)); err != nil {
		return err
	}
	if g := r.opts.Config.API.Group; g != "" {
		if err := openToGroup(filepath.Join(r.opts.StateDir, statedir.APISocket), g); err != nil {
			return err
		}
	}
	if wl := r.opts.Config.Web.Listen; wl != "off" {
		if r.webLn, err = net.Listen("tcp", wl); err != nil {
			return fmt.Errorf("web page on %s: %w (set web.listen, or --web-listen off)", wl, err)
		}
		r.web = web.New(r.guard, r.Directory().Person, r.log.With(logkey.Component, "web"))
		// Versions before one-time logins kept the login URL here.
		_ = os.Remove(filepath.Join(r.opts.StateDir, "web-url"))
	}
	l, err := config.ParseListen(r.opts.Config.Proxy.Listen)
	if err != nil {
		return err
	}
	switch {
	case l.Off:
	case l.Network == "tcp":
		if r.proxyLn, err = net.Listen("tcp", l.Address); err != nil {
			return fmt.Errorf("credential proxy: %w", err)
		}
		r.proxyAt = r.proxyLn.Addr().String()
	default:
		p := l.Address
		if p == "" {
			p = filepath.Join(r.opts.StateDir, statedir.ProxySocket)
		}
		if r.proxyLn, err = listenUnix(p); err != nil {
			return fmt.Errorf("credential proxy: %w", err)
		}
		r.proxyAt = "unix:" + p
	}
	return nil
}

// egressIdle bounds how long a box's kept-alive connection to the egress
// proxy may wait for its next request, as the credential proxy's 2 minutes.
var egressIdle = 2 * time.Minute

// newEgressServer serves the egress proxy on the connections boxes forward.
func newEgressServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: egressIdle,
		ConnContext: connContext, MaxHeaderBytes: 64 << 10}
}

// WebAddr is the web page's address ("" when off), with no login in it.
func (r *Runner) WebAddr() string {
	if r.webLn == nil {
		return ""
	}
	return "http://" + r.webLn.Addr().String()
}

// WebLogin returns a fresh one-time login URL of the web page (web.LoginTTL,
// once), bound to the caller: the cookie it becomes is theirs. It is
// answered on the socket to that caller only, and never logged.
func (r *Runner) WebLogin(ctx context.Context) (string, error) {
	if r.web == nil {
		return "", fmt.Errorf("the web page is off (web.listen = \"off\"); set web.listen and restart the Runner: %w", errdefs.ErrUnavailable)
	}
	c := r.caller(ctx)
	tok, err := r.web.NewLogin(c.UID)
	if err != nil {
		return "", err
	}
	return r.WebAddr() + "/login?token=" + tok.Reveal(), nil
}

// Serve serves until ctx is done, then shuts down gracefully (streams get
// a few seconds to finish) and releases everything.
func (r *Runner) Serve(ctx context.Context) error {
	defer r.Close()
	if err := r.Listen(); err != nil {
		return err
	}
	// Every API request is identified by the kernel (SO_PEERCRED) and goes
	// through the access checks.
	apiSrv := &http.Server{Handler: api.Identify(api.Handler(r.guard), r.Directory().Person),
		ConnContext: api.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go r.guard.Watch(wctx, time.Second)
	go r.autoSleep(wctx) // sessions.freeze_after, sessions.sleep_after
	r.runLogins(wctx)    // paddock's own logins, refreshed ahead of expiry
	proxySrv := credproxy.NewServer(r.proxy, r.opts.Config.Proxy.ReadHeaderTimeout.D())
	// The same proxy, for connections that arrive over boxes' channels;
	// each carries its session in its context.
	boxSrv := credproxy.NewServer(r.proxy, r.opts.Config.Proxy.ReadHeaderTimeout.D())
	boxSrv.ConnContext = connContext
	egressSrv := newEgressServer(r.egress)
	errc := make(chan error, 5)
	var webSrv *http.Server
	if r.webLn != nil {
		// /metrics and /healthz carry no secret and need no login, so a
		// Prometheus on this host can scrape them.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", r.metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, "ok")
		})
		mux.Handle("/", r.web.Handler())
		webSrv = &http.Server{Handler: web.CheckHost(r.webLn.Addr(), mux), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- webSrv.Serve(r.webLn) }()
	}
	go func() { errc <- egressSrv.Serve(r.egressConns) }()
	go func() { errc <- apiSrv.Serve(r.apiLn) }()
	go func() { errc <- boxSrv.Serve(r.boxConns) }()
	if r.proxyLn != nil {
		go func() { errc <- proxySrv.Serve(r.proxyLn) }()
	}
	// Re-adopt what still runs; the servers above already answer boxes.
	go func() {
		defer close(r.adopted)
		r.reconcile(ctx)
	}()
	c, _ := r.cred.Current()
	r.log.Info("paddock runner started", logkey.Version, version.String(), logkey.StateDir, r.opts.StateDir,
		logkey.Socket, r.apiLn.Addr().String(), logkey.Listen, r.proxyAt, logkey.Upstream, r.upstream,
		logkey.Kind, string(c.Kind), logkey.Source, c.Source)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The three share the grace period, side by side.
	var wg sync.WaitGroup
	wg.Go(func() { _ = apiSrv.Shutdown(sctx) })
	wg.Go(func() { stopProxyServer(sctx, proxySrv) })
	wg.Go(func() { stopProxyServer(sctx, boxSrv) })
	wg.Wait()
	_ = egressSrv.Close() // tunnels are long-lived; they end with the Runner
	if webSrv != nil {
		_ = webSrv.Close()
	}
	r.proxy.Drain()
	// Boxes keep running; only this Runner's channels to them end.
	r.stopping.Store(true)
	r.sess.mu.Lock()
	for _, lv := range r.sess.live {
		if lv.link != nil {
			lv.link.Close()
		}
	}
	r.sess.mu.Unlock()
	r.log.Info("paddock runner stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// stopProxyServer shuts a proxy server down within ctx; streams still
// running then are cut (Close cancels them and their upstream requests),
// and it waits a little longer for their handlers to unwind, so that the
// proxy's Drain that follows records them.
func stopProxyServer(ctx context.Context, srv *h1.Server) {
	if srv.Shutdown(ctx) == nil {
		return
	}
	_ = srv.Close()
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(wctx)
}

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
		if r.webLn != nil {
			r.webLn.Close()
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
