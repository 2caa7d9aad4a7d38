package runner

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// LoginFile is where paddock's own login (paddock credential login) is
// kept, 0600; the Runner alone refreshes and rewrites it.
func LoginFile(stateDir string) string { return filepath.Join(stateDir, "login.json") }

// endpoints are Claude Code's, with the config's overrides.
func endpoints(o config.OAuthEndpoints) oauth.Endpoints {
	e := oauth.Claude
	e.Scopes = append([]string(nil), e.Scopes...)
	if o.AuthorizeURL != "" {
		e.AuthorizeURL = o.AuthorizeURL
	}
	if o.TokenURL != "" {
		e.TokenURL = o.TokenURL
	}
	if o.RedirectURL != "" {
		e.RedirectURL = o.RedirectURL
	}
	if o.ClientID != "" {
		e.ClientID = o.ClientID
	}
	return e
}

// pendingLogins are logins started (an authorize URL handed out) and not
// finished: their PKCE verifiers, by state, for loginTTL.
type pendingLogins struct {
	mu sync.Mutex
	m  map[string]pendingLogin
}

type pendingLogin struct {
	p   oauth.PKCE
	uid uint32 // who started it: only they finish it
	exp time.Time
}

// userLogins are the members' own logins on a team server, each with its
// own Authority (users/<uid>/login.json), refreshed by this Runner too.
type userLogins struct {
	mu  sync.Mutex
	m   map[uint32]*oauth.Authority
	ctx context.Context // Serve's: each Authority's Run ends with it
}

// loginOf is p's login: the owner's for admins, else their own (made
// when create, or when a login of theirs is stored).
func (r *Runner) loginOf(p session.Person, create bool) *oauth.Authority {
	if r.usesOwnersCredential(p) {
		return r.login
	}
	r.ulogins.mu.Lock()
	defer r.ulogins.mu.Unlock()
	if a := r.ulogins.m[p.UID]; a != nil {
		return a
	}
	path := filepath.Join(r.opts.StateDir, "users", strconv.FormatUint(uint64(p.UID), 10), "login.json")
	if !create {
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	a := &oauth.Authority{Store: oauth.Store{Path: path}, Client: r.login.Client, Log: r.log.With(logkey.Component, "login", "user", p.Name)}
	if r.ulogins.m == nil {
		r.ulogins.m = map[uint32]*oauth.Authority{}
	}
	r.ulogins.m[p.UID] = a
	if r.ulogins.ctx != nil {
		go a.Run(r.ulogins.ctx)
	}
	return a
}

// runLogins starts refreshing the owner's login and every member's
// stored one, until ctx ends.
func (r *Runner) runLogins(ctx context.Context) {
	go r.login.Run(ctx)
	r.ulogins.mu.Lock()
	r.ulogins.ctx = ctx
	for _, a := range r.ulogins.m {
		go a.Run(ctx)
	}
	r.ulogins.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(r.opts.StateDir, "users", "*", "login.json"))
	for _, f := range files {
		uid, err := strconv.ParseUint(filepath.Base(filepath.Dir(f)), 10, 32)
		if err != nil {
			continue
		}
		p := session.Person{UID: uint32(uid)}
		if u, err := user.LookupId(strconv.FormatUint(uid, 10)); err == nil {
			p.Name = u.Username
		}
		r.loginOf(p, false)
	}
}

// allLogins is the owner's login and the members'.
func (r *Runner) allLogins() []*oauth.Authority {
	r.ulogins.mu.Lock()
	defer r.ulogins.mu.Unlock()
	out := []*oauth.Authority{r.login}
	for _, a := range r.ulogins.m {
		out = append(out, a)
	}
	return out
}

const (
	loginTTL = 15 * time.Minute
	// loginsPerPerson is the most logins one person may have started and
	// not finished: each holds a verifier in memory for loginTTL.
	loginsPerPerson = 4
	// loginsAtAll is the most for everyone together, far above what a
	// few people reach, so that no one is held up by another's.
	loginsAtAll = 256
)

// StartLogin begins paddock credential login for the caller (the owner's
// login for admins, their own for a team server's members): the URL the
// person opens. Its verifier stays in the Runner's memory for 15 minutes.
// Each person may have loginsPerPerson of them waiting, everyone together
// loginsAtAll.
func (r *Runner) StartLogin(ctx context.Context) (string, error) {
	who := r.caller(ctx)
	p, err := oauth.NewPKCE()
	if err != nil {
		return "", err
	}
	r.pending.mu.Lock()
	defer r.pending.mu.Unlock()
	now := time.Now()
	if r.pending.m == nil {
		r.pending.m = map[string]pendingLogin{}
	}
	mine := 0
	var mineFirst, allFirst time.Time // the soonest expiries
	for k, v := range r.pending.m {
		if now.After(v.exp) {
			delete(r.pending.m, k)
			continue
		}
		if allFirst.IsZero() || v.exp.Before(allFirst) {
			allFirst = v.exp
		}
		if v.uid == who.UID {
			mine++
			if mineFirst.IsZero() || v.exp.Before(mineFirst) {
				mineFirst = v.exp
			}
		}
	}
	if mine >= loginsPerPerson {
		return "", fmt.Errorf("you have %d logins started and not finished (paddock credential login, or the web page's); "+
			"finish one by pasting the code its page showed, or start again once the oldest expires at %s: %w",
			mine, expiry(mineFirst, now), errdefs.ErrLimit)
	}
	if len(r.pending.m) >= loginsAtAll {
		return "", fmt.Errorf("this Runner holds %d logins started and not finished, by everyone together (yours: %d); "+
			"start again once the oldest expires at %s, and tell an admin (paddock audit shows who is busy): %w",
			len(r.pending.m), mine, expiry(allFirst, now), errdefs.ErrLimit)
	}
	r.pending.m[p.State] = pendingLogin{p: p, uid: who.UID, exp: now.Add(loginTTL)}
	return r.login.Client.LoginURL(p), nil
}

// expiry is when a login waiting until at expires, for people: the clock
// time and how long from now.
func expiry(at, now time.Time) string {
	return fmt.Sprintf("%s (in %s)", at.Format("15:04:05 MST"), at.Sub(now).Round(time.Second))
}

// FinishLogin takes the code the login page showed ("CODE#STATE"),
// trades it for tokens and makes them the owner's credential: saved, then
// used, and from now on refreshed by this Runner. A credential stored
// with paddock credential set is removed (one stored credential).
func (r *Runner) FinishLogin(ctx context.Context, pasted string) (oauth.Status, error) {
	_, state, err := oauth.SplitCode(pasted)
	if err != nil {
		return oauth.Status{}, err
	}
	r.pending.mu.Lock()
	pl, ok := r.pending.m[state]
	if ok {
		delete(r.pending.m, state) // one try per login: a code is single-use anyway
	}
	r.pending.mu.Unlock()
	who := r.caller(ctx)
	if !ok || time.Now().After(pl.exp) || pl.uid != who.UID {
		return oauth.Status{}, fmt.Errorf("no login of yours waits for that code (each is good for 15 minutes, once); start again with paddock credential login: %w", errdefs.ErrInvalid)
	}
	code, err := oauth.ParseCode(pasted, pl.p)
	if err != nil {
		return oauth.Status{}, err
	}
	t, err := r.login.Client.Exchange(ctx, code, pl.p)
	if err != nil {
		return oauth.Status{}, fmt.Errorf("log in: %w; start again with paddock credential login", err)
	}
	a := r.loginOf(who, true)
	if err := os.MkdirAll(filepath.Dir(a.Store.Path), 0o700); err != nil {
		return oauth.Status{}, err
	}
	if err := a.Install(t); err != nil {
		return oauth.Status{}, err
	}
	// One stored credential per person: the login replaces a set one.
	stored := credential.File{Path: CredentialFile(r.opts.StateDir)}
	if a != r.login {
		stored = r.userCredFile(who.UID)
		defer r.userCreds.forget(who.UID)
	}
	if err := stored.Remove(); err != nil {
		r.log.Warn("paddock's login: could not remove the stored credential file", "error", err)
	}
	r.cred.Invalidate()
	return a.Status(), nil
}

// LoginStatus is the caller's login's state (never a token).
func (r *Runner) LoginStatus(ctx context.Context) (oauth.Status, error) {
	if a := r.loginOf(r.caller(ctx), false); a != nil {
		return a.Status(), nil
	}
	return oauth.Status{}, nil
}

// Logout forgets the caller's login.
func (r *Runner) Logout(ctx context.Context) error {
	a := r.loginOf(r.caller(ctx), false)
	if a == nil {
		return nil
	}
	err := a.Logout()
	r.cred.Invalidate()
	return err
}

// refreshExpired is the proxy's OnExpired: when the API calls the token a
// request went out with expired, and that token is paddock's login, one
// refresh (however many requests ask), then the new token.
func (r *Runner) refreshExpired(ctx context.Context, used credential.Credential) (credential.Credential, bool) {
	if !strings.HasPrefix(used.Source, credential.PaddockLoginSource) {
		return credential.Credential{}, false
	}
	for _, a := range r.allLogins() {
		if used.Source != credential.PaddockLoginSource+a.Store.Path {
			continue
		}
		if err := a.RefreshNow(ctx, used.Secret); err != nil {
			return credential.Credential{}, false
		}
		c, err := a.Current()
		if err != nil || c.Secret.Equal(used.Secret) {
			return credential.Credential{}, false
		}
		c.Plan = r.cred.Plan.Merge(c.Plan)
		c.User = used.User
		return c, true
	}
	return credential.Credential{}, false
}
