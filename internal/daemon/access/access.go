// Package access is who may do what on a multi-user Runner: the one place
// its roles are enforced, for the socket API and the web page alike.
//
// Guard wraps the Runner. Every call must carry a people.Person in its
// context (the socket's SO_PEERCRED, or a web login bound to a user);
// one without is refused, so a transport that forgets to identify its
// caller gets nothing. A session is visible to its owner, to those it is
// shared with (observer, driver, operator) and to admins; to anyone else
// it does not exist. session.Need says which role each operation needs.
// Each change and each attach is written to the audit log with who did it;
// an admin acting on someone else's session is marked so.
//
// Streams (terminal attaches, execs) are re-checked while they run
// (Recheck, and Watch every second): unsharing a session, or removing a
// user from the Runner's group, cuts theirs at once.
package access

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Inner is what the Guard wraps: the Runner, which reads the caller from
// the context only to record a new session's owner and to pick whose
// credential a call is about.
type Inner interface {
	api.Backend
	api.ActivityWaiter
	api.WebLoginer
	Share(ctx context.Context, ref string, to session.Person, role session.Role) (session.Session, error)
	Unshare(ctx context.Context, ref string, uid uint32) (session.Session, error)
	SetUserCredential(ctx context.Context, kind credential.Kind, s secret.Value) (credential.Status, error)
	RemoveUserCredential(ctx context.Context) error
	api.Loginer
}

// Directory resolves users; people.Directory implements it.
type Directory interface {
	Person(uid uint32) (people.Person, error)
	Lookup(name string) (people.Person, error)
}

// Guard enforces roles on every call to Inner.
type Guard struct {
	inner Inner
	dir   Directory
	audit *audit.Log
	log   *slog.Logger

	mu      sync.Mutex
	streams map[*stream]struct{}
}

// New returns a guard over inner; a nil audit log records nothing.
func New(inner Inner, dir Directory, log *audit.Log, lg *slog.Logger) *Guard {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Guard{inner: inner, dir: dir, audit: log, log: lg, streams: map[*stream]struct{}{}}
}

// ErrNoCaller is wrapped when a call carries no person.
var ErrNoCaller = fmt.Errorf("the caller is not identified: %w", errdefs.ErrForbidden)

func caller(ctx context.Context) (people.Person, error) {
	p, ok := people.From(ctx)
	if !ok {
		return people.Person{}, ErrNoCaller
	}
	return p, nil
}

// roleOf is p's role on s: their own one, else admin for admins.
func roleOf(p people.Person, s *session.Session) session.Role {
	r := s.RoleOf(p.UID)
	if r == session.RoleNone && p.Admin {
		return session.RoleAdmin
	}
	return r
}

// visible copies s for p, with p's role; ok false when p may not see it.
func visible(p people.Person, s session.Session) (session.Session, bool) {
	r := roleOf(p, &s)
	if r == session.RoleNone {
		return session.Session{}, false
	}
	s.YourRole = r
	return s, true
}

var opWords = map[session.Op]string{
	session.OpView: "seeing it", session.OpObserve: "watching its terminal", session.OpDrive: "typing into its terminal",
	session.OpSleep: "sleeping it", session.OpWake: "waking it", session.OpSet: "changing its settings",
	session.OpExec: "running commands in it", session.OpRemove: "removing it", session.OpShare: "sharing it",
	session.OpExport: "exporting it (its conversation comes along)",
	session.OpDiff:   "seeing its change", session.OpFetch: "fetching its branch into the host repository",
	session.OpMerge:   "merging its branch into the owner's repository",
	session.OpMessage: "sending a message to its claude",
	session.OpPR:      "pushing its branch and opening a pull request",
	session.OpPort:    "publishing its ports on the host", session.OpPreview: "opening its previews",
}

// find resolves ref among the sessions p may see, and only those: a
// name, id or prefix of someone else's session means nothing to p, so
// neither a decoy named like another's id nor an ambiguous prefix can
// turn p's call to a session p did not mean.
func (g *Guard) find(ctx context.Context, p people.Person, ref string) (session.Session, error) {
	all, err := g.inner.Sessions(ctx)
	if err != nil {
		return session.Session{}, err
	}
	mine := all[:0:0]
	for _, s := range all {
		if roleOf(p, &s) != session.RoleNone {
			mine = append(mine, s)
		}
	}
	s, err := session.Resolve(mine, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return s, fmt.Errorf("no session %q that you can see (another person's session shows only once they share it with you: paddock share): %w", ref, errdefs.ErrNotFound)
	}
	return s, err
}

// resolve finds ref for p and checks p may do op on it.
func (g *Guard) resolve(ctx context.Context, ref string, op session.Op) (people.Person, session.Session, error) {
	p, err := caller(ctx)
	if err != nil {
		return p, session.Session{}, err
	}
	s, err := g.find(ctx, p, ref)
	if err != nil {
		return p, session.Session{}, err
	}
	role := roleOf(p, &s)
	if need := session.Need[op]; !role.AtLeast(need) {
		hint := fmt.Sprintf("; %s can give it: paddock share %s %s --role %s", s.Owner.Name, s.Name, p.Name, need)
		if need == session.RoleOwner {
			hint = "; only " + s.Owner.Name + " (or an admin) may"
		}
		return p, session.Session{}, fmt.Errorf("%s is %s %s of session %q, and %s needs %s%s: %w",
			p, article(role), role, s.Name, opWords[op], need, hint, errdefs.ErrForbidden)
	}
	s.YourRole = role
	return p, s, nil
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

func article(r session.Role) string {
	if strings.IndexByte("aeiou", r[0]) >= 0 {
		return "an"
	}
	return "a"
}

// record writes an audit entry about s (nil: none) by p.
func (g *Guard) record(p people.Person, action string, s *session.Session, err error, fill func(*audit.Entry)) {
	if g.audit == nil {
		return
	}
	e := audit.Entry{User: p.Name, UID: p.UID, Action: action, Via: p.Via}
	if s != nil && s.ID != "" {
		e.Session, e.SessionName, e.Owner = s.ID, s.Name, s.Owner.Name
		e.Admin = p.Admin && s.RoleOf(p.UID) == session.RoleNone
	}
	if err != nil {
		e.Error = err.Error()
	}
	if fill != nil {
		fill(&e)
	}
	if werr := g.audit.Record(e); werr != nil {
		g.log.Error("audit log", "error", werr)
	}
}

// act runs one change on a session: resolve and check, call f with the
// session's id, and record it (refusals too, but not of sessions p
// cannot see at all).
func (g *Guard) act(ctx context.Context, ref string, op session.Op, action string, fill func(*audit.Entry),
	f func(id string) (session.Session, error)) (session.Session, error) {
	p, s, err := g.resolve(ctx, ref, op)
	if err != nil {
		if errors.Is(err, errdefs.ErrForbidden) && s.ID == "" {
			if s2, err2 := g.find(ctx, p, ref); err2 == nil {
				g.record(p, action, &s2, err, fill)
			}
		}
		return session.Session{}, err
	}
	out, err := f(s.ID)
	g.record(p, action, &s, err, fill)
	if err != nil {
		return out, err
	}
	out, _ = visible(p, out)
	return out, nil
}

// Health implements api.Backend.
func (g *Guard) Health(ctx context.Context) (api.Health, error) {
	if _, err := caller(ctx); err != nil {
		return api.Health{}, err
	}
	return g.inner.Health(ctx)
}

// CredentialStatus is the caller's credential: their own, or the one
// their sessions would use.
func (g *Guard) CredentialStatus(ctx context.Context) (credential.Status, error) {
	if _, err := caller(ctx); err != nil {
		return credential.Status{}, err
	}
	return g.inner.CredentialStatus(ctx)
}

// Logs are the session's decisions, for observers and up.
func (g *Guard) Logs(ctx context.Context, ref string, n int) ([]decisionlog.Entry, error) {
	_, s, err := g.resolve(ctx, ref, session.OpView)
	if err != nil {
		return nil, err
	}
	return g.inner.Logs(ctx, s.ID, n)
}

// CreateSession creates a session owned by the caller. A workspace must
// be the caller's own directory (admins excepted): the Runner may run as
// root, and must not mount for anyone what they could not open.
func (g *Guard) CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	p, err := caller(ctx)
	if err != nil {
		return session.Session{}, err
	}
	if req.Workspace != "" && !p.Admin {
		ws, err := OwnWorkspace(req.Workspace, p.UID)
		if err != nil {
			g.record(p, audit.ActionCreate, nil, err, func(e *audit.Entry) { e.SessionName = req.Name; e.Detail = "workspace " + req.Workspace })
			return session.Session{}, err
		}
		req.Workspace = ws
	}
	s, err := g.inner.CreateSession(ctx, req)
	g.record(p, audit.ActionCreate, &s, err, func(e *audit.Entry) {
		if e.SessionName == "" {
			e.SessionName = req.Name
		}
		backend, egress, ws := s.Backend, s.Egress, s.Workspace
		if s.ID == "" { // refused before it was made: what was asked
			backend, egress, ws = req.Backend, req.Egress, req.Workspace
		}
		e.Detail = fmt.Sprintf("backend=%s egress=%s", dashIfEmpty(backend), dashIfEmpty(egress))
		if ws != "" {
			e.Detail += " workspace=" + ws
		}
		if req.Resume != nil && portable.CheckConversationID(req.Resume.ID) == nil { // a host conversation (run --resume-host)
			e.Detail += " resume-host=" + req.Resume.ID
		}
	})
	if err != nil {
		return s, err
	}
	s, _ = visible(p, s)
	return s, nil
}

// Sessions lists what the caller owns or was shared, each with their role.
func (g *Guard) Sessions(ctx context.Context) ([]session.Session, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := g.inner.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]session.Session, 0, len(all))
	for _, s := range all {
		if s.RoleOf(p.UID) == session.RoleNone {
			continue
		}
		if v, ok := visible(p, s); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// AllSessions lists every person's sessions, for admins only.
func (g *Guard) AllSessions(ctx context.Context) ([]session.Session, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Admin {
		return nil, fmt.Errorf("only admins (root and the Runner's own user) see every person's sessions; %s sees their own and those shared with them: %w", p, errdefs.ErrForbidden)
	}
	all, err := g.inner.Sessions(ctx)
	for i := range all {
		all[i].YourRole = roleOf(p, &all[i])
	}
	return all, err
}

// Session resolves ref among what the caller may see.
func (g *Guard) Session(ctx context.Context, ref string) (session.Session, error) {
	_, s, err := g.resolve(ctx, ref, session.OpView)
	return s, err
}

// Freeze freezes a session (operators and up, as sleep), if the Runner
// has the freeze tier.
func (g *Guard) Freeze(ctx context.Context, ref string) (session.Session, error) {
	fz, ok := g.inner.(api.Freezer)
	if !ok {
		return session.Session{}, fmt.Errorf("this Runner has no freeze tier: %w", errdefs.ErrUnavailable)
	}
	return g.act(ctx, ref, session.OpSleep, audit.ActionFreeze, nil, func(id string) (session.Session, error) { return fz.Freeze(ctx, id) })
}

// Sleep needs operator.
func (g *Guard) Sleep(ctx context.Context, ref string) (session.Session, error) {
	return g.act(ctx, ref, session.OpSleep, audit.ActionSleep, nil, func(id string) (session.Session, error) { return g.inner.Sleep(ctx, id) })
}

// Wake needs operator.
func (g *Guard) Wake(ctx context.Context, ref string) (session.Session, error) {
	return g.act(ctx, ref, session.OpWake, audit.ActionWake, nil, func(id string) (session.Session, error) { return g.inner.Wake(ctx, id) })
}

// RemoveSession needs operator.
func (g *Guard) RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error) {
	fill := func(e *audit.Entry) {
		if keepVolume {
			e.Detail = "keep-volume"
		}
	}
	return g.act(ctx, ref, session.OpRemove, audit.ActionRemove, fill, func(id string) (session.Session, error) {
		return g.inner.RemoveSession(ctx, id, keepVolume)
	})
}

// Set needs operator.
func (g *Guard) Set(ctx context.Context, ref string, req api.SetRequest) (session.Session, error) {
	fill := func(e *audit.Entry) {
		var parts []string
		if req.Model != nil {
			parts = append(parts, "model="+*req.Model)
		}
		if req.Effort != nil {
			parts = append(parts, "effort="+*req.Effort)
		}
		if req.TokenBudget != nil {
			parts = append(parts, fmt.Sprintf("budget=%d", *req.TokenBudget))
		}
		if req.BudgetUSD != nil {
			parts = append(parts, fmt.Sprintf("budget_usd=%g", *req.BudgetUSD))
		}
		if req.Egress != nil {
			parts = append(parts, "egress="+*req.Egress)
		}
		if req.Allow != nil {
			parts = append(parts, "allow="+strings.Join(*req.Allow, ","))
		}
		if req.Deny != nil {
			parts = append(parts, "deny="+strings.Join(*req.Deny, ","))
		}
		if req.Ask != nil {
			parts = append(parts, fmt.Sprintf("ask=%v", *req.Ask))
		}
		for _, a := range req.Attach {
			parts = append(parts, "attach="+a)
		}
		for _, d := range req.Detach {
			parts = append(parts, "detach="+d)
		}
		e.Detail = strings.Join(parts, " ")
	}
	return g.act(ctx, ref, session.OpSet, audit.ActionSet, fill, func(id string) (session.Session, error) { return g.inner.Set(ctx, id, req) })
}

// Prune is for admins: it may remove any person's leftovers.
func (g *Guard) Prune(ctx context.Context, volumes bool) (api.PruneResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return api.PruneResult{}, err
	}
	if !p.Admin {
		err := fmt.Errorf("only admins (root and the Runner's own user) prune: %w", errdefs.ErrForbidden)
		g.record(p, audit.ActionPrune, nil, err, nil)
		return api.PruneResult{}, err
	}
	res, err := g.inner.Prune(ctx, volumes)
	g.record(p, audit.ActionPrune, nil, err, func(e *audit.Entry) { e.Detail = fmt.Sprintf("removed %d objects", len(res.Removed)) })
	return res, err
}

// StartExec needs operator; the command line is recorded.
func (g *Guard) StartExec(ctx context.Context, ref string, req api.ExecRequest, stdout, stderr io.Writer) (*channel.Process, error) {
	var proc *channel.Process
	var sid string
	fill := func(e *audit.Entry) { e.Argv = req.Argv }
	_, err := g.act(ctx, ref, session.OpExec, audit.ActionExec, fill, func(id string) (session.Session, error) {
		var err error
		sid = id
		proc, err = g.inner.StartExec(ctx, id, req, stdout, stderr)
		return session.Session{ID: id}, err
	})
	if err != nil {
		return nil, err
	}
	p, _ := people.From(ctx)
	st := g.track(p.UID, sid, session.RoleOperator, func() { proc.Close() })
	go func() {
		_, _ = proc.Wait()
		g.untrack(st)
	}()
	return proc, nil
}

// WaitActivity needs observer.
func (g *Guard) WaitActivity(ctx context.Context, ref string, want activity.State) (session.Session, bool, error) {
	p, s, err := g.resolve(ctx, ref, session.OpView)
	if err != nil {
		return s, false, err
	}
	out, met, err := g.inner.WaitActivity(ctx, s.ID, want)
	out, _ = visible(p, out)
	return out, met, err
}

// WebLogin is a login URL for the caller, bound to them.
func (g *Guard) WebLogin(ctx context.Context) (string, error) {
	p, err := caller(ctx)
	if err != nil {
		return "", err
	}
	u, err := g.inner.WebLogin(ctx)
	g.record(p, audit.ActionWebLogin, nil, err, nil)
	return u, err
}

// Whoami is the caller as the Runner sees them.
func (g *Guard) Whoami(ctx context.Context) (people.Person, error) { return caller(ctx) }

// Share gives user a role on the session; owner or admin only.
func (g *Guard) Share(ctx context.Context, ref, user, role string) (session.Session, error) {
	r, err := session.ParseShareRole(role)
	if err != nil {
		return session.Session{}, err
	}
	fill := func(e *audit.Entry) { e.Target, e.Role = user, role }
	return g.act(ctx, ref, session.OpShare, audit.ActionShare, fill, func(id string) (session.Session, error) {
		to, err := g.dir.Lookup(user)
		if err != nil {
			return session.Session{}, fmt.Errorf("cannot share with %q: %w", user, err)
		}
		out, err := g.inner.Share(ctx, id, session.Person{UID: to.UID, Name: to.Name}, r)
		if err == nil {
			g.Recheck(ctx) // a lower role cuts a stream it no longer allows
		}
		return out, err
	})
}

// Unshare takes user's role away and cuts their open streams at once.
func (g *Guard) Unshare(ctx context.Context, ref, user string) (session.Session, error) {
	fill := func(e *audit.Entry) { e.Target = user }
	return g.act(ctx, ref, session.OpShare, audit.ActionUnshare, fill, func(id string) (session.Session, error) {
		s, err := g.inner.Session(ctx, id)
		if err != nil {
			return s, err
		}
		// By the name recorded: the user may be gone from the host.
		for _, sh := range s.Shares {
			if sh.Name == user {
				out, err := g.inner.Unshare(ctx, id, sh.UID)
				if err == nil {
					g.Recheck(ctx)
				}
				return out, err
			}
		}
		return s, fmt.Errorf("session %q is not shared with %q: %w", s.Name, user, errdefs.ErrNotFound)
	})
}

// Audit streams the audit log: an admin's all of it, anyone else's only
// the entries about their own actions and their own sessions.
func (g *Guard) Audit(ctx context.Context, q api.AuditQuery, fn func(audit.Entry) error) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	if g.audit == nil {
		return fmt.Errorf("this Runner keeps no audit log: %w", errdefs.ErrUnavailable)
	}
	f := audit.Filter{Session: q.Session, User: q.User}
	if !p.Admin {
		f.Visible = func(e audit.Entry) bool { return e.UID == p.UID || e.Owner == p.Name || e.Target == p.Name }
	}
	if !q.Follow {
		es, _, err := g.audit.Read(f, q.N)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	return g.audit.ReadFollow(ctx, f, q.N, fn)
}
