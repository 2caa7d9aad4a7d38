package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/config"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/oauth"
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
	exp time.Time
}

const loginTTL = 15 * time.Minute

// StartLogin begins paddock credential login: the URL the person opens.
// Its verifier stays in the Runner's memory for 15 minutes.
func (r *Runner) StartLogin(context.Context) (string, error) {
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
	for k, v := range r.pending.m {
		if now.After(v.exp) {
			delete(r.pending.m, k)
		}
	}
	if len(r.pending.m) >= 16 {
		return "", fmt.Errorf("16 logins are started and not finished; finish one, or wait 15 minutes: %w", errdefs.ErrLimit)
	}
	r.pending.m[p.State] = pendingLogin{p: p, exp: now.Add(loginTTL)}
	return r.login.Client.LoginURL(p), nil
}

// FinishLogin takes the code the login page showed ("CODE#STATE"),
// trades it for tokens and makes them the owner's credential: saved, then
// used, and from now on refreshed by this Runner. A credential stored
// with paddock credential set is removed (one stored credential).
func (r *Runner) FinishLogin(ctx context.Context, pasted string) (oauth.Status, error) {
	_, state, _ := cutHash(pasted)
	r.pending.mu.Lock()
	pl, ok := r.pending.m[state]
	if ok {
		delete(r.pending.m, state) // one try per login: a code is single-use anyway
	}
	r.pending.mu.Unlock()
	if !ok || time.Now().After(pl.exp) {
		return oauth.Status{}, fmt.Errorf("no login waits for that code (each is good for 15 minutes, once); start again with paddock credential login: %w", errdefs.ErrInvalid)
	}
	code, err := oauth.ParseCode(pasted, pl.p)
	if err != nil {
		return oauth.Status{}, err
	}
	t, err := r.login.Client.Exchange(ctx, code, pl.p)
	if err != nil {
		return oauth.Status{}, fmt.Errorf("log in: %w; start again with paddock credential login", err)
	}
	if err := r.login.Install(t); err != nil {
		return oauth.Status{}, err
	}
	if err := (credential.File{Path: CredentialFile(r.opts.StateDir)}).Remove(); err != nil {
		r.log.Warn("paddock's login: could not remove the stored credential file", "error", err)
	}
	r.cred.Invalidate()
	return r.login.Status(), nil
}

func cutHash(s string) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '#' {
			return s[:i], trimSpace(s[i+1:]), true
		}
	}
	return s, "", false
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}

// LoginStatus is paddock's login's state (never a token).
func (r *Runner) LoginStatus(context.Context) (oauth.Status, error) { return r.login.Status(), nil }

// Logout forgets paddock's login.
func (r *Runner) Logout(context.Context) error {
	err := r.login.Logout()
	r.cred.Invalidate()
	return err
}

// refreshExpired is the proxy's OnExpired: when the API calls the token a
// request went out with expired, and that token is paddock's login, one
// refresh (however many requests ask), then the new token.
func (r *Runner) refreshExpired(ctx context.Context, used credential.Credential) (credential.Credential, bool) {
	if len(used.Source) < len(credential.PaddockLoginSource) || used.Source[:len(credential.PaddockLoginSource)] != credential.PaddockLoginSource {
		return credential.Credential{}, false
	}
	if err := r.login.RefreshNow(ctx, used.Secret); err != nil {
		return credential.Credential{}, false
	}
	c, err := r.login.Current()
	if err != nil || c.Secret.Equal(used.Secret) {
		return credential.Credential{}, false
	}
	c.Plan = r.cred.Plan.Merge(c.Plan)
	c.User = used.User
	return c, true
}
