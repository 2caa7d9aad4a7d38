package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/daemon/web"
	"github.com/paddockhq/paddock/internal/daemon/webtls"
	"github.com/paddockhq/paddock/internal/proxy/credproxy"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

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
	if wc := r.opts.Config.Web; wc.Listen != "off" {
		if r.webLn, err = net.Listen("tcp", wc.Listen); err != nil {
			return fmt.Errorf("web page on %s: %w (set web.listen, or --web-listen off)", wc.Listen, err)
		}
		r.web = web.New(r.guard, r.Directory().Person, r.log.With(logkey.Component, "web"))
		if wc.TLSOn() {
			tc, err := webtls.Load(wc, r.opts.StateDir, wc.Listen, time.Now())
			if err != nil {
				r.webLn.Close()
				return fmt.Errorf("the web page's TLS: %w", err)
			}
			r.webTLS = tc
			r.webAddr = r.webLn.Addr()
			r.webLn = tls.NewListener(r.webLn, tc.TLS)
			r.web.SetTLS(tc.TLS)
		} else {
			r.webAddr = r.webLn.Addr()
		}
		r.web.SetPreviewHost(r.webAddr, wc.Hosts...)
		if pc, ok := r.passkeyConfig(); ok {
			if err := r.web.EnablePasskeys(pc, r.store); err != nil {
				r.webLn.Close()
				return err
			}
		}
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

// WebAddr is the web page's address ("" when off), with no login in it:
// https and the first of web.hosts when it is served over TLS.
func (r *Runner) WebAddr() string {
	if r.webLn == nil {
		return ""
	}
	if r.webTLS.TLS == nil {
		return "http://" + r.webAddr.String()
	}
	host := r.webAddr.(*net.TCPAddr).IP.String()
	if hs := r.opts.Config.Web.Hosts; len(hs) > 0 {
		host = hs[0]
	} else if r.webAddr.(*net.TCPAddr).IP.IsUnspecified() {
		host = "localhost"
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(r.webAddr.(*net.TCPAddr).Port))
}

// Passkeys reports whether the page takes passkeys (paddock web enroll):
// over TLS by a name of web.hosts, or on loopback as localhost.
func (r *Runner) Passkeys() bool {
	if r.web == nil {
		return false
	}
	_, ok := r.passkeyConfig()
	return ok
}

// passkeyConfig is where passkeys work: on the first of web.hosts over
// TLS (every name of web.hosts an origin), or on localhost when the page
// is on loopback without TLS (browsers take http://localhost as secure).
// WebAuthn takes no IP address as the relying party: with neither, there
// are no passkeys.
func (r *Runner) passkeyConfig() (web.PasskeyConfig, bool) {
	port := strconv.Itoa(r.webAddr.(*net.TCPAddr).Port)
	var names []string
	for _, h := range r.opts.Config.Web.Hosts {
		if net.ParseIP(h) == nil {
			names = append(names, h)
		}
	}
	switch {
	case r.webTLS.TLS != nil && len(names) > 0:
		pc := web.PasskeyConfig{RPID: names[0]}
		for _, n := range names {
			pc.Origins = append(pc.Origins, "https://"+net.JoinHostPort(n, port))
		}
		return pc, true
	case r.webTLS.TLS == nil && r.webAddr.(*net.TCPAddr).IP.IsLoopback():
		return web.PasskeyConfig{RPID: "localhost", Origins: []string{"http://localhost:" + port}}, true
	}
	return web.PasskeyConfig{}, false
}

// WebEnroll returns a one-time link that makes a passkey for user (""
// for the caller) on the web page, and logs them in.
func (r *Runner) WebEnroll(ctx context.Context, user string) (string, error) {
	if r.web == nil {
		return "", fmt.Errorf("the web page is off (web.listen = \"off\"); set web.listen and restart the Runner: %w", errdefs.ErrUnavailable)
	}
	uid := r.caller(ctx).UID
	if user != "" {
		p, err := r.Directory().Lookup(user)
		if err != nil {
			return "", err
		}
		uid = p.UID
	}
	pc, ok := r.passkeyConfig()
	if !ok {
		return "", fmt.Errorf("passkeys need the page on a host name over TLS (web.tls and web.hosts), or on loopback without TLS (then open it as localhost): %w", errdefs.ErrUnavailable)
	}
	tok, err := r.web.NewEnrollment(uid)
	if err != nil {
		return "", err
	}
	return pc.Origins[0] + "/enroll?token=" + tok.Reveal(), nil
}

// WebFingerprint is the SHA-256 fingerprint of the page's TLS
// certificate ("" without TLS), and whether it was just made.
func (r *Runner) WebFingerprint() (string, bool) { return r.webTLS.Fingerprint, r.webTLS.Made }

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
		// The API, for programs holding an API token (apitoken.Handler).
		mux.Handle("/v1/", r.apiTokens.Handler(api.Handler(r.guard), r.Directory().Person))
		mux.Handle("/", r.web.Handler())
		webSrv = &http.Server{Handler: web.CheckHost(r.webAddr, mux, r.opts.Config.Web.Hosts...), ReadHeaderTimeout: 10 * time.Second}
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
	for _, sl := range r.sess.m {
		sl.mu.Lock()
		if sl.live != nil && sl.live.link != nil {
			sl.live.link.Close()
		}
		sl.mu.Unlock()
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
