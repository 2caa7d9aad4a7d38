package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// ErrLoginNeeded is wrapped when the login cannot give a usable token any
// more: revoked, or expired and not refreshed. The proxy answers boxes 401
// with its message, which says to run paddock credential login.
var ErrLoginNeeded = fmt.Errorf("paddock's login needs renewing: %w", credential.ErrExpired)

// Status is what credential status, doctor, the web page and /metrics
// say of the login. It never holds a token.
type Status struct {
	LoggedIn    bool      `json:"logged_in"`
	Expires     time.Time `json:"expires,omitzero"`
	Obtained    time.Time `json:"obtained,omitzero"`
	LastRefresh time.Time `json:"last_refresh,omitzero"`
	Refreshes   int       `json:"refreshes"`
	// Failing: the last refresh failed; LastError says why, NextAttempt
	// when the next one is. Dead: the server refused the refresh token
	// (revoked, or rotated elsewhere): only a new login helps.
	Failing      bool      `json:"failing,omitempty"`
	Dead         bool      `json:"dead,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	FailingSince time.Time `json:"failing_since,omitzero"`
	NextAttempt  time.Time `json:"next_attempt,omitzero"`
}

// Authority is the one refresher of a login: the Runner's. Current gives
// the access token; Run refreshes it ahead of expiry, retrying failures
// with backoff; RefreshNow refreshes at once for a token the API called
// expired, once however many requests ask. Safe for concurrent use.
//
// A refresh runs on a context of its own, bounded by RefreshTimeout, never
// on the context of the request (or of Run) that asked for it: once the
// server has rotated the refresh token, its answer holds the only live one,
// and a refresh cut off there would sign the login out. So the answer is
// always read and stored, whoever has stopped waiting for it.
type Authority struct {
	Store  Store
	Client *Client
	// Lead is how long before expiry to refresh (0: 5 minutes, or a tenth
	// of the token's life if that is shorter).
	Lead time.Duration
	// MaxBackoff caps the wait between failed refreshes (0: 5 minutes).
	MaxBackoff time.Duration
	// RefreshTimeout bounds one refresh, from asking the server to the
	// rotated token on disk (0: 1 minute).
	RefreshTimeout time.Duration
	Log            *slog.Logger
	Now            func() time.Time
	// OnChange, if set, is called (outside locks) after every refresh,
	// failed or not, and every login or logout.
	OnChange func(Status)

	refreshMu sync.Mutex // one refresh at a time

	mu     sync.Mutex // guards the fields below
	tok    Token
	loaded bool
	st     Status
	wake   chan struct{}
	flight *flight // RefreshNow's refresh under way, if any
}

// flight is one refresh RefreshNow started for the access token seen;
// every RefreshNow for the same token while it is under way waits for it
// and gets its result. err is set before done is closed.
type flight struct {
	seen secret.Value
	done chan struct{}
	err  error
}

func (a *Authority) refreshTimeout() time.Duration {
	if a.RefreshTimeout > 0 {
		return a.RefreshTimeout
	}
	return time.Minute
}

func (a *Authority) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Authority) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.New(slog.DiscardHandler)
}

// load reads the store once; a.mu held.
func (a *Authority) load() {
	if a.loaded {
		return
	}
	t, err := a.Store.Load()
	a.loaded = true
	if err != nil {
		if !errors.Is(err, ErrNoLogin) {
			a.st.Failing, a.st.LastError = true, err.Error()
		}
		return
	}
	a.tok = t
	a.st.LoggedIn, a.st.Expires, a.st.Obtained = true, t.Expires, t.Obtained
}

func (a *Authority) notify() {
	a.mu.Lock()
	st := a.st
	if a.wake != nil {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
	a.mu.Unlock()
	if a.OnChange != nil {
		a.OnChange(st)
	}
}

// Status is the login's state now.
func (a *Authority) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.load()
	return a.st
}

// Present reports whether a login is stored.
func (a *Authority) Present() bool { return a.Status().LoggedIn }

// Current is the login's access token as an oauth credential: ErrNoLogin
// without a login, ErrLoginNeeded when it is dead or expired.
func (a *Authority) Current() (credential.Credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.load()
	if !a.st.LoggedIn {
		if a.st.Failing {
			return credential.Credential{}, fmt.Errorf("%s; run paddock credential login: %w", a.st.LastError, ErrLoginNeeded)
		}
		return credential.Credential{}, ErrNoLogin
	}
	if a.st.Dead {
		return credential.Credential{}, fmt.Errorf("the OAuth server refused paddock's login (%s): run paddock credential login on the Runner's host: %w", a.st.LastError, ErrLoginNeeded)
	}
	if !a.tok.Expires.IsZero() && !a.now().Before(a.tok.Expires) {
		why := "not refreshed yet"
		if a.st.Failing {
			why = "refreshing fails: " + a.st.LastError + "; paddock keeps trying"
		}
		return credential.Credential{}, fmt.Errorf("paddock's login expired at %s (%s); or run paddock credential login: %w",
			a.tok.Expires.Format(time.RFC3339), why, ErrLoginNeeded)
	}
	return credential.Credential{Kind: credential.KindOAuth, Secret: a.tok.Access, Source: credential.PaddockLoginSource + a.Store.Path,
		Expires: a.tok.Expires, Plan: credential.Plan{Scopes: joinScopes(a.tok.Scopes)}}, nil
}

func joinScopes(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// Install makes t the login (after paddock credential login): saved
// first, then used.
func (a *Authority) Install(t Token) error {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if err := a.Store.Save(t); err != nil {
		return err
	}
	a.mu.Lock()
	a.loaded, a.tok = true, t
	a.st = Status{LoggedIn: true, Expires: t.Expires, Obtained: t.Obtained}
	a.mu.Unlock()
	a.notify()
	return nil
}

// Logout forgets the login, here and on disk.
func (a *Authority) Logout() error {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if err := a.Store.Remove(); err != nil {
		return err
	}
	a.mu.Lock()
	a.loaded, a.tok, a.st = true, Token{}, Status{}
	a.mu.Unlock()
	a.notify()
	return nil
}

// RefreshNow refreshes at once unless the token is no longer seen (the
// one a request went out with): then someone refreshed already, and this
// returns at once. So N requests that meet an expired token cause one
// refresh: the first starts it, the others wait for it and share its
// result, failure included.
//
// The refresh does not run on ctx: a caller whose ctx ends (a box that
// hung up, an interrupted turn) stops waiting and gets ctx's error, while
// the refresh goes on to its end and its tokens are stored for the next
// request.
func (a *Authority) RefreshNow(ctx context.Context, seen secret.Value) error {
	a.mu.Lock()
	a.load()
	if !a.tok.Access.Equal(seen) {
		a.mu.Unlock()
		return nil
	}
	f := a.flight
	if f == nil || !f.seen.Equal(seen) {
		f = &flight{seen: seen, done: make(chan struct{})}
		a.flight = f
		go a.fly(context.WithoutCancel(ctx), f)
	}
	a.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("stopped waiting for the refresh of paddock's login, which goes on: %w", ctx.Err())
	}
}

// fly does f's refresh on ctx (which is never cancelled) with its own
// timeout, unless the token changed meanwhile (Run refreshed, a new
// login was installed).
func (a *Authority) fly(ctx context.Context, f *flight) {
	defer func() {
		a.mu.Lock()
		if a.flight == f {
			a.flight = nil
		}
		a.mu.Unlock()
		close(f.done)
	}()
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	a.mu.Lock()
	cur := a.tok.Access
	a.mu.Unlock()
	if !cur.Equal(f.seen) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, a.refreshTimeout())
	defer cancel()
	f.err = a.refreshLocked(rctx, "the API said the token expired")
}

// refreshLocked does one refresh; a.refreshMu held. ctx must be the
// refresh's own (never a request's): cut off after the server rotated, the
// answer and with it the only live refresh token would be lost. The
// rotated token is on disk before it is used; a refused or failed refresh
// keeps the stored token.
func (a *Authority) refreshLocked(ctx context.Context, why string) error {
	a.mu.Lock()
	a.load()
	old := a.tok
	in := a.st.LoggedIn
	a.mu.Unlock()
	if !in {
		return ErrNoLogin
	}
	start := a.now()
	nt, err := a.Client.Refresh(ctx, old.Refresh)
	if err == nil {
		if serr := a.Store.Save(nt); serr != nil {
			// The server has rotated: the old refresh token is dead. Keep
			// the new one in memory so paddock goes on, and retry saving.
			err = fmt.Errorf("the refreshed login could not be saved (%w); paddock uses it and retries", serr)
			a.mu.Lock()
			a.tok = nt
			a.st.Expires = nt.Expires
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	if err != nil {
		if !a.st.Failing {
			a.st.FailingSince = start
		}
		a.st.Failing, a.st.LastError = true, err.Error()
		a.st.Dead = IsPermanent(err)
		a.st.NextAttempt = start.Add(a.backoff(start))
	} else {
		a.tok = nt
		a.st.Expires, a.st.LastRefresh = nt.Expires, start
		a.st.Refreshes++
		a.st.Failing, a.st.Dead, a.st.LastError, a.st.FailingSince, a.st.NextAttempt = false, false, "", time.Time{}, time.Time{}
	}
	st := a.st
	a.mu.Unlock()
	if err != nil {
		a.log().Warn("paddock's login: refresh failed", "reason", why, "error", err, "dead", st.Dead, "next_attempt", st.NextAttempt)
	} else {
		a.log().Info("paddock's login refreshed", "reason", why, "expires", st.Expires)
	}
	a.notify()
	return err
}

// backoff is the wait after a failure: 1 s doubling per minute of failure
// since FailingSince, with jitter, at most MaxBackoff; a.mu held.
func (a *Authority) backoff(now time.Time) time.Duration {
	max := a.MaxBackoff
	if max <= 0 {
		max = 5 * time.Minute
	}
	d := time.Second
	for elapsed := now.Sub(a.st.FailingSince); elapsed > d && d < max; {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

// due is when the next refresh should happen; a.mu held.
func (a *Authority) due() (time.Time, bool) {
	if !a.st.LoggedIn || a.st.Dead {
		return time.Time{}, false
	}
	if a.st.Failing {
		return a.st.NextAttempt, true
	}
	if a.tok.Expires.IsZero() {
		return time.Time{}, false
	}
	lead := a.Lead
	if lead <= 0 {
		lead = 5 * time.Minute
		if life := a.tok.Expires.Sub(a.tok.Obtained); life > 0 && life/10 < lead {
			lead = life / 10
		}
	}
	return a.tok.Expires.Add(-lead), true
}

// Run refreshes ahead of expiry until ctx is done. Install, Logout and
// refreshes wake it to recompute when.
func (a *Authority) Run(ctx context.Context) {
	// What a crash left mid-save beside the login: removed under the
	// refresh lock, so that no save of this process is under way.
	a.refreshMu.Lock()
	a.Store.removeStale()
	a.refreshMu.Unlock()
	a.mu.Lock()
	a.wake = make(chan struct{}, 1)
	wake := a.wake
	a.mu.Unlock()
	for {
		a.mu.Lock()
		a.load()
		at, ok := a.due()
		a.mu.Unlock()
		var timer <-chan time.Time
		var t *time.Timer
		if ok {
			t = time.NewTimer(max(at.Sub(a.now()), 0))
			timer = t.C
		}
		fired := false
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer:
			fired = true
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if !fired {
			continue
		}
		a.refreshMu.Lock()
		a.mu.Lock()
		at2, ok2 := a.due()
		a.mu.Unlock()
		if ok2 && !a.now().Before(at2) { // not already done by RefreshNow
			// Not cut off by ctx (the Runner stopping): see refreshLocked.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.refreshTimeout())
			_ = a.refreshLocked(rctx, "ahead of expiry")
			cancel()
		}
		a.refreshMu.Unlock()
	}
}

// ErrNotOAuth is wrapped when an operation needs paddock's login and the
// credential in use is another.
var ErrNotOAuth = fmt.Errorf("the credential in use is not paddock's login: %w", errdefs.ErrInvalid)
