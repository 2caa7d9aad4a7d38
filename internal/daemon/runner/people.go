package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// selfPerson is the Runner's own user: the owner of its state, an admin,
// and the one whose credential is "the owner's".
func selfPerson() session.Person {
	uid := uint32(os.Geteuid())
	p := session.Person{UID: uid}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		p.Name = u.Username
	}
	return p
}

// Directory is who may call this Runner (api.group, its admins).
func (r *Runner) Directory() people.Directory {
	return people.Directory{Group: r.opts.Config.API.Group, AdminUID: r.self.UID}
}

// caller is the person a request carries, or the Runner's own user for
// calls made from within (tests, reconciliation).
func (r *Runner) caller(ctx context.Context) session.Person {
	if p, ok := people.From(ctx); ok {
		return session.Person{UID: p.UID, Name: p.Name}
	}
	return r.self
}

// usesOwnersCredential: the Runner's user and root pay with the owner's
// credential; everyone else with their own (or, where allowed, the owner's).
func (r *Runner) usesOwnersCredential(p session.Person) bool {
	return p.UID == r.self.UID || p.UID == 0
}

// ownerOf is a session's owner; the Runner's user for one it cannot find.
// The proxy asks on every request: a session in memory (a running one)
// answers from its slot.
func (r *Runner) ownerOf(id string) session.Person {
	sl := r.slot(id)
	if sl != nil {
		sl.mu.Lock()
		p, ok := sl.owner, sl.ownerKnown
		sl.mu.Unlock()
		if ok {
			return p
		}
	}
	if s, err := r.reload(id); err == nil {
		r.fillOwner(&s)
		if sl != nil {
			sl.mu.Lock()
			sl.owner, sl.ownerKnown = s.Owner, true
			sl.mu.Unlock()
		}
		return s.Owner
	}
	return r.self
}

// fillOwner gives a record from before owners its owner: the Runner's user.
func (r *Runner) fillOwner(s *session.Session) {
	if s.Owner.Name == "" && s.Owner.UID == 0 {
		s.Owner = r.self
	}
}

// userCredFile is where a person's own credential is kept (0600, in a
// 0700 directory of the state directory, which only the Runner reads).
func (r *Runner) userCredFile(uid uint32) credential.File {
	return credential.File{Path: filepath.Join(r.opts.StateDir, "users", strconv.FormatUint(uint64(uid), 10), "credential.json")}
}

// userCredCache keeps each person's stored credential as last read: every
// request of their sessions asks for it, and reading the file each time
// was an open, a read and a JSON parse per request. The Runner is the
// file's only writer (SetUserCredential, RemoveUserCredential, a login),
// and each of them forgets the person's copy; a copy older than
// userCredRecheck is read again anyway, so a file changed by hand is seen
// within that. Only a credential, or its absence, is kept: any other
// error (a damaged file) is met again on the next request.
type userCredCache struct {
	mu sync.Mutex
	m  map[uint32]cachedUserCred
	// now is the clock (tests); nil is time.Now.
	now func() time.Time
}

type cachedUserCred struct {
	c   credential.Credential
	err error // nil or credential.ErrMissing
	at  time.Time
}

const userCredRecheck = 10 * time.Second

func (u *userCredCache) clock() time.Time {
	if u.now != nil {
		return u.now()
	}
	return time.Now()
}

func (u *userCredCache) load(uid uint32, f credential.File) (credential.Credential, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	if c, ok := u.m[uid]; ok && now.Sub(c.at) < userCredRecheck {
		return c.c, c.err
	}
	c, err := f.Load()
	if err == nil || errors.Is(err, credential.ErrMissing) {
		if u.m == nil {
			u.m = map[uint32]cachedUserCred{}
		}
		u.m[uid] = cachedUserCred{c: c, err: err, at: now}
	} else {
		delete(u.m, uid)
	}
	return c, err
}

// forget drops uid's copy: its file was just written or removed.
func (u *userCredCache) forget(uid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, uid)
}

// credentialOfPerson is the credential p's sessions go out with: theirs,
// or the owner's where that is theirs (admins) or the config lends it
// (credential.fallback_to_owner). Its User says whose it is.
func (r *Runner) credentialOfPerson(p session.Person) (credential.Credential, error) {
	if !r.usesOwnersCredential(p) {
		c, err := r.userCreds.load(p.UID, r.userCredFile(p.UID))
		if err == nil {
			c.Source, c.User = "user:"+p.Name, p.Name
			return c, nil
		}
		if !errors.Is(err, credential.ErrMissing) {
			return credential.Credential{}, err
		}
		if a := r.loginOf(p, false); a != nil && a.Present() {
			c, err := a.Current()
			c.User = p.Name
			c.Plan = r.cred.Plan.Merge(c.Plan)
			return c, err
		}
		if !r.opts.Config.Credential.FallbackToOwner {
			return credential.Credential{}, fmt.Errorf("%s has no credential of their own, and this Runner does not lend its owner's (credential.fallback_to_owner is off); %s stores one with paddock credential login or paddock credential set: %w",
				p.Name, p.Name, errdefs.ErrForbidden)
		}
	}
	c, err := r.cred.Current()
	c.User = r.self.Name
	return c, err
}

// lent reports whether c, the credential p's sessions go out with, is
// lent to p rather than p's own: the owner's, through
// credential.fallback_to_owner, for a person who is not an admin. A lent
// credential is only ever used through the proxy; it never enters a box.
func (r *Runner) lent(p session.Person, c credential.Credential) bool {
	return !r.usesOwnersCredential(p) && c.User != p.Name
}

// errLentDirect refuses direct mode to a person whose only credential is
// the owner's, lent.
func errLentDirect(p session.Person) error {
	return fmt.Errorf("credential mode direct puts the session's credential in the box, and %s has none of their own: the owner's is lent through the proxy only (credential.fallback_to_owner); leave out --credential-mode direct, or store your own with paddock credential login or paddock credential set: %w",
		p.Name, errdefs.ErrForbidden)
}

// SetUserCredential stores the caller's own credential (never the
// Runner's user's, who stores theirs with paddock credential set on the
// host). Running sessions of theirs use it from their next request.
func (r *Runner) SetUserCredential(ctx context.Context, kind credential.Kind, s secret.Value) (credential.Status, error) {
	p := r.caller(ctx)
	if r.usesOwnersCredential(p) {
		return credential.Status{}, fmt.Errorf("%s is an admin and uses the owner's credential; store it on the host with paddock credential set --state-dir %s: %w", p.Name, r.opts.StateDir, errdefs.ErrInvalid)
	}
	if strings.TrimSpace(s.Reveal()) == "" {
		return credential.Status{}, fmt.Errorf("an empty credential: %w", errdefs.ErrInvalid)
	}
	f := r.userCredFile(p.UID)
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return credential.Status{}, err
	}
	defer r.userCreds.forget(p.UID) // after the write: no request reads the old one back in
	if err := f.Save(kind, s); err != nil {
		return credential.Status{}, err
	}
	st := credential.Credential{Kind: kind, Secret: s, Source: "user:" + p.Name, User: p.Name}.Status()
	return st, nil
}

// RemoveUserCredential deletes the caller's own credential.
func (r *Runner) RemoveUserCredential(ctx context.Context) error {
	p := r.caller(ctx)
	if r.usesOwnersCredential(p) {
		return fmt.Errorf("%s is an admin and uses the owner's credential; remove it on the host with paddock credential rm: %w", p.Name, errdefs.ErrInvalid)
	}
	defer r.userCreds.forget(p.UID)
	if err := r.userCredFile(p.UID).Remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// checkMaxSessions refuses to start another session of p beyond
// users.max_sessions.
func (r *Runner) checkMaxSessions(ctx context.Context, p session.Person, except string) error {
	max := r.opts.Config.Users.For(p.Name).MaxSessions
	if max <= 0 {
		return nil
	}
	all, err := r.Sessions(ctx)
	if err != nil {
		return err
	}
	return maxSessions(all, p, except, max)
}

// maxSessions refuses another running session of p when p has max (more
// than 0) running or asked to run among all, but for the one named
// except. It does no I/O: the create's plan calls it too.
func maxSessions(all []session.Session, p session.Person, except string, max int) error {
	n := 0
	for _, s := range all {
		if s.Owner.UID == p.UID && s.ID != except && s.Live() && s.Desired == session.Running {
			n++
		}
	}
	if n >= max {
		return fmt.Errorf("%s already has %d sessions running, their limit (users.max_sessions = %d); sleep one (paddock sleep NAME) or remove one first: %w",
			p.Name, n, max, errdefs.ErrLimit)
	}
	return nil
}

// userLimiter applies each session's limits and then its owner's.
type userLimiter struct{ r *Runner }

func (l userLimiter) Admit(id string) (func(), string) {
	rel, why := l.r.usage.Admit(id)
	if why != "" {
		return nil, why
	}
	owner := l.r.ownerOf(id)
	ul := l.r.opts.Config.Users.For(owner.Name)
	rel2, why := l.r.userUsage.Admit(owner.Name, limits.UserLimits{TokensPerDay: ul.TokensPerDay, MaxStreams: ul.MaxStreams})
	if why != "" {
		rel()
		return nil, why
	}
	return func() { rel2(); rel() }, ""
}

func (l userLimiter) Account(id string, tokens int64) {
	l.r.usage.Account(id, tokens)
	l.r.userUsage.Account(l.r.ownerOf(id).Name, tokens)
}

// readUsageToday counts each person's tokens of the current UTC day from
// the decision logs, so users.tokens_per_day holds across restarts.
func (r *Runner) readUsageToday(ctx context.Context) {
	all, err := r.Sessions(ctx)
	if err != nil {
		return
	}
	for _, s := range all {
		l, err := r.decisions.ReadLog(s.ID)
		if err != nil {
			continue
		}
		// The days of rotated-away parts, then the lines still kept.
		for day, t := range l.Carried.Days {
			if at, err := time.Parse(time.DateOnly, day); err == nil {
				r.userUsage.AccountAt(s.Owner.Name, t.Tokens(), at)
			}
		}
		for _, e := range l.Entries {
			r.userUsage.AccountAt(s.Owner.Name, e.InputTokens+e.OutputTokens, e.Time)
		}
	}
}

// Share gives user a role on a session (or changes it). Only the owner
// and admins share (the access checks see to it); sharing with the owner
// or an unknown user is an error.
func (r *Runner) Share(ctx context.Context, ref string, to session.Person, role session.Role) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpShare)
	if err != nil {
		return s, err
	}
	defer unlock()
	if to.UID == s.Owner.UID {
		return s, fmt.Errorf("%s owns session %q already: %w", to.Name, s.Name, errdefs.ErrInvalid)
	}
	kept := s.Shares[:0:0]
	for _, sh := range s.Shares {
		if sh.UID != to.UID {
			kept = append(kept, sh)
		}
	}
	s.Shares = append(kept, session.Share{UID: to.UID, Name: to.Name, Role: role})
	return s, r.save(&s)
}

// Unshare takes a user's role on a session away.
func (r *Runner) Unshare(ctx context.Context, ref string, uid uint32) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpShare)
	if err != nil {
		return s, err
	}
	defer unlock()
	kept := s.Shares[:0:0]
	found := false
	for _, sh := range s.Shares {
		if sh.UID == uid {
			found = true
			continue
		}
		kept = append(kept, sh)
	}
	if !found {
		return s, fmt.Errorf("session %q is not shared with uid %d: %w", s.Name, uid, errdefs.ErrNotFound)
	}
	s.Shares = kept
	return s, r.save(&s)
}
