package access

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

var (
	root = people.Person{UID: 0, Name: "root", Admin: true}
	ann  = people.Person{UID: 2001, Name: "ann"}
	ben  = people.Person{UID: 2002, Name: "ben"}
	cy   = people.Person{UID: 2003, Name: "cy"}
)

// fakeDir is the host's users; out holds those taken out of the group.
type fakeDir struct {
	mu  sync.Mutex
	out map[uint32]bool
}

func (d *fakeDir) Person(uid uint32) (people.Person, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range []people.Person{root, ann, ben, cy} {
		if p.UID == uid {
			if d.out[uid] {
				return people.Person{}, fmt.Errorf("%s is not in group \"team\": %w", p.Name, errdefs.ErrForbidden)
			}
			return p, nil
		}
	}
	return people.Person{}, fmt.Errorf("uid %d: %w", uid, errdefs.ErrForbidden)
}

func (d *fakeDir) Lookup(name string) (people.Person, error) {
	for _, p := range []people.Person{root, ann, ben, cy} {
		if p.Name == name {
			return d.Person(p.UID)
		}
	}
	return people.Person{}, fmt.Errorf("no user %q on this host: %w", name, errdefs.ErrNotFound)
}

type fakePart struct {
	left chan struct{}
	once sync.Once
}

func (p *fakePart) Read(ctx context.Context) ([]byte, error) {
	select {
	case <-p.left:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (p *fakePart) Send(context.Context, []byte) error     { return nil }
func (p *fakePart) Resize(context.Context, int, int) error { return nil }
func (p *fakePart) Leave()                                 { p.once.Do(func() { close(p.left) }) }
func (p *fakePart) gone() bool {
	select {
	case <-p.left:
		return true
	default:
		return false
	}
}

// fakeInner is a Runner with sessions in memory; it records what it was
// asked to do, by whom.
type fakeInner struct {
	mu       sync.Mutex
	sessions []session.Session
	did      []string
	joins    []*fakePart
}

func (f *fakeInner) note(ctx context.Context, what string) {
	p, _ := people.From(ctx)
	f.mu.Lock()
	f.did = append(f.did, p.Name+" "+what)
	f.mu.Unlock()
}

func (f *fakeInner) Health(context.Context) (api.Health, error) { return api.Health{ID: "x"}, nil }
func (f *fakeInner) CredentialStatus(context.Context) (credential.Status, error) {
	return credential.Status{}, nil
}
func (f *fakeInner) Logs(ctx context.Context, id string, n int) ([]decisionlog.Entry, error) {
	f.note(ctx, "logs "+id)
	return nil, nil
}
func (f *fakeInner) CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	p, _ := people.From(ctx)
	s := session.Session{ID: fmt.Sprintf("id%010d", len(f.sessions)), Name: req.Name, Owner: session.Person{UID: p.UID, Name: p.Name}, Observed: session.Running, Workspace: req.Workspace}
	f.mu.Lock()
	f.sessions = append(f.sessions, s)
	f.mu.Unlock()
	return s, nil
}
func (f *fakeInner) Sessions(context.Context) ([]session.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]session.Session(nil), f.sessions...), nil
}
func (f *fakeInner) Session(ctx context.Context, ref string) (session.Session, error) {
	all, _ := f.Sessions(ctx)
	return session.Resolve(all, ref)
}
func (f *fakeInner) Sleep(ctx context.Context, id string) (session.Session, error) {
	f.note(ctx, "sleep "+id)
	return f.Session(ctx, id)
}
func (f *fakeInner) Wake(ctx context.Context, id string) (session.Session, error) {
	f.note(ctx, "wake "+id)
	return f.Session(ctx, id)
}
func (f *fakeInner) RemoveSession(ctx context.Context, id string, _ bool) (session.Session, error) {
	f.note(ctx, "rm "+id)
	return f.Session(ctx, id)
}
func (f *fakeInner) Set(ctx context.Context, id string, _ api.SetRequest) (session.Session, error) {
	f.note(ctx, "set "+id)
	return f.Session(ctx, id)
}
func (f *fakeInner) Prune(ctx context.Context, _ bool) (api.PruneResult, error) {
	f.note(ctx, "prune")
	return api.PruneResult{}, nil
}
func (f *fakeInner) StartExec(ctx context.Context, id string, req api.ExecRequest, _, _ io.Writer) (*channel.Process, error) {
	f.note(ctx, "exec "+id)
	return nil, fmt.Errorf("no box here: %w", errdefs.ErrUnavailable)
}
func (f *fakeInner) Attach(ctx context.Context, id string, req api.AttachRequest) (api.Participant, error) {
	f.note(ctx, "attach "+id+" "+req.Role)
	p := &fakePart{left: make(chan struct{})}
	f.mu.Lock()
	f.joins = append(f.joins, p)
	f.mu.Unlock()
	return p, nil
}
func (f *fakeInner) WaitActivity(ctx context.Context, id string, _ activity.State) (session.Session, bool, error) {
	s, err := f.Session(ctx, id)
	return s, true, err
}
func (f *fakeInner) WebLogin(context.Context) (string, error) { return "http://x/login?token=t", nil }

// edit changes session id's shares under the lock: f gets them without uid.
func (f *fakeInner) edit(id string, uid uint32, add *session.Share) (session.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.sessions {
		if s := &f.sessions[i]; s.ID == id {
			kept := s.Shares[:0:0]
			for _, sh := range s.Shares {
				if sh.UID != uid {
					kept = append(kept, sh)
				}
			}
			if add != nil {
				kept = append(kept, *add)
			}
			s.Shares = kept
			return *s, nil
		}
	}
	return session.Session{}, errdefs.ErrNotFound
}
func (f *fakeInner) Share(_ context.Context, id string, to session.Person, role session.Role) (session.Session, error) {
	return f.edit(id, to.UID, &session.Share{UID: to.UID, Name: to.Name, Role: role})
}
func (f *fakeInner) Unshare(_ context.Context, id string, uid uint32) (session.Session, error) {
	return f.edit(id, uid, nil)
}
func (f *fakeInner) SetUserCredential(ctx context.Context, kind credential.Kind, _ secret.Value) (credential.Status, error) {
	f.note(ctx, "credential-set")
	return credential.Status{Present: true, Kind: kind}, nil
}
func (f *fakeInner) RemoveUserCredential(ctx context.Context) error {
	f.note(ctx, "credential-rm")
	return nil
}

// auditPaths holds each test's audit log file (auditPath).
var auditPaths sync.Map

// auditPath is the audit log's file of the test.
func auditPath(t *testing.T) string {
	p, _ := auditPaths.LoadOrStore(t, filepath.Join(t.TempDir(), "audit.jsonl"))
	return p.(string)
}

func setup(t *testing.T) (*Guard, *fakeInner, *fakeDir, *audit.Log) {
	t.Helper()
	in := &fakeInner{}
	dir := &fakeDir{out: map[uint32]bool{}}
	t.Cleanup(func() { auditPaths.Delete(t) })
	lg, err := audit.Open(auditPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	return New(in, dir, lg, nil), in, dir, lg
}

func as(p people.Person) context.Context { return people.With(context.Background(), p) }

func mustCreate(t *testing.T, g *Guard, p people.Person, name string) session.Session {
	t.Helper()
	s, err := g.CreateSession(as(p), api.CreateRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if s.Owner.Name != p.Name || s.YourRole != session.RoleOwner {
		t.Fatalf("created by %s: owner %+v, role %q", p, s.Owner, s.YourRole)
	}
	return s
}

func names(ss []session.Session) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name+":"+string(s.YourRole))
	}
	return strings.Join(n, ",")
}

func TestNoCallerNoAccess(t *testing.T) {
	g, _, _, _ := setup(t)
	ctx := context.Background()
	if _, err := g.Sessions(ctx); !errors.Is(err, ErrNoCaller) {
		t.Fatalf("Sessions without a caller: %v", err)
	}
	if _, err := g.CreateSession(ctx, api.CreateRequest{Name: "x"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("create without a caller: %v", err)
	}
	if _, err := g.Health(ctx); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("health without a caller: %v", err)
	}
}

func TestEachSeesTheirOwn(t *testing.T) {
	g, in, _, _ := setup(t)
	mustCreate(t, g, ann, "ann-work")
	mustCreate(t, g, ben, "ben-work")
	if ss, _ := g.Sessions(as(ann)); names(ss) != "ann-work:owner" {
		t.Fatalf("ann sees %s", names(ss))
	}
	if ss, _ := g.Sessions(as(ben)); names(ss) != "ben-work:owner" {
		t.Fatalf("ben sees %s", names(ss))
	}
	// Admins list their own by default, everyone's when they ask.
	if ss, _ := g.Sessions(as(root)); len(ss) != 0 {
		t.Fatalf("root's own list: %s", names(ss))
	}
	if ss, err := g.AllSessions(as(root)); err != nil || names(ss) != "ann-work:admin,ben-work:admin" {
		t.Fatalf("root's all-users list: %s %v", names(ss), err)
	}
	if _, err := g.AllSessions(as(ann)); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "only admins") {
		t.Fatalf("ann's all-users list: %v", err)
	}
	// ben cannot reach ann's session by any route; it does not exist for him.
	ctx := as(ben)
	checks := map[string]error{}
	_, checks["session"] = g.Session(ctx, "ann-work")
	_, checks["logs"] = g.Logs(ctx, "ann-work", 0)
	_, checks["attach"] = g.Attach(ctx, "ann-work", api.AttachRequest{Role: "observer"})
	_, checks["exec"] = g.StartExec(ctx, "ann-work", api.ExecRequest{Argv: []string{"id"}}, io.Discard, io.Discard)
	_, checks["sleep"] = g.Sleep(ctx, "ann-work")
	_, checks["rm"] = g.RemoveSession(ctx, "ann-work", false)
	_, _, checks["wait"] = g.WaitActivity(ctx, "ann-work", activity.Waiting)
	_, checks["share"] = g.Share(ctx, "ann-work", "ben", "operator")
	for what, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "you can see") {
			t.Errorf("ben's %s on ann's session: %v", what, err)
		}
	}
	for _, d := range in.did {
		if strings.HasPrefix(d, "ben ") {
			t.Errorf("ben reached the Runner: %s", d)
		}
	}
	if _, err := g.Prune(as(ann), false); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("ann prunes: %v", err)
	}
}

func TestRoles(t *testing.T) {
	g, in, _, lg := setup(t)
	s := mustCreate(t, g, ann, "work")
	ctx := as(ben)

	// Observer: sees and watches; never drives, sleeps or execs.
	if _, err := g.Share(as(ann), "work", "ben", "observer"); err != nil {
		t.Fatal(err)
	}
	if got, err := g.Session(ctx, "work"); err != nil || got.YourRole != session.RoleObserver {
		t.Fatalf("ben's view: %q %v", got.YourRole, err)
	}
	p, err := g.Attach(ctx, "work", api.AttachRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.(interface{ JoinedAs() string }).JoinedAs(); r != "observer" {
		t.Fatalf("an observer with no role asked joined as %q", r)
	}
	p.Leave()
	if _, err := g.Attach(ctx, "work", api.AttachRequest{Role: "driver"}); !errors.Is(err, errdefs.ErrForbidden) ||
		!strings.Contains(err.Error(), "ben is an observer") || !strings.Contains(err.Error(), "paddock share work ben --role driver") {
		t.Fatalf("an observer asking to drive: %v", err)
	}
	if _, err := g.Sleep(ctx, "work"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "needs operator") {
		t.Fatalf("an observer sleeping: %v", err)
	}
	if _, err := g.StartExec(ctx, "work", api.ExecRequest{Argv: []string{"id"}}, io.Discard, io.Discard); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("an observer's exec: %v", err)
	}
	if _, err := g.Share(ctx, "work", "cy", "observer"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "only ann") {
		t.Fatalf("an observer sharing: %v", err)
	}

	// Driver: drives by default.
	if _, err := g.Share(as(ann), "work", "ben", "driver"); err != nil {
		t.Fatal(err)
	}
	p, err = g.Attach(ctx, "work", api.AttachRequest{})
	if err != nil || p.(interface{ JoinedAs() string }).JoinedAs() != "driver" {
		t.Fatalf("a driver joins: %v", err)
	}
	p.Leave()
	if _, err := g.Wake(ctx, "work"); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a driver wakes: %v", err)
	}

	// Operator: sleeps and wakes; still cannot share.
	if _, err := g.Share(as(ann), "work", "ben", "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Sleep(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Wake(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Share(ctx, "work", "cy", "observer"); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("an operator sharing: %v", err)
	}
	// Admins may do everything, and it is marked.
	if _, err := g.Sleep(as(root), "work"); err != nil {
		t.Fatal(err)
	}

	// Bad shares: unknown user, bad role, the owner.
	if _, err := g.Share(as(ann), "work", "nobody", "observer"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `no user "nobody"`) {
		t.Fatalf("share with an unknown user: %v", err)
	}
	if _, err := g.Share(as(ann), "work", "cy", "admin"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("share as admin: %v", err)
	}

	want := []string{"ben sleep " + s.ID, "ben wake " + s.ID, "root sleep " + s.ID}
	got := strings.Join(in.did, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the Runner was not asked %q:\n%s", w, got)
		}
	}
	es, _, err := lg.Read(audit.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	adminMarked := false
	for _, e := range es {
		l := e.User + " " + e.Action + " " + e.Role + " " + e.Target
		if e.Error != "" {
			l += " refused"
		}
		lines = append(lines, l)
		if e.User == "root" && e.Action == audit.ActionSleep {
			adminMarked = e.Admin && e.Owner == "ann"
		}
		if e.User == "ann" && e.Admin {
			t.Errorf("the owner's own action marked admin: %+v", e)
		}
	}
	all := strings.Join(lines, "\n")
	for _, w := range []string{"ann create", "ann share observer ben", "ben attach observer", "ben detach observer",
		"ben attach driver  refused", "ben sleep   refused", "ben sleep", "ben wake", "ann share operator ben", "root sleep",
		"ann share observer nobody refused"} {
		if !strings.Contains(all, w) {
			t.Errorf("the audit log lacks %q:\n%s", w, all)
		}
	}
	if !adminMarked {
		t.Errorf("root's sleep of ann's session is not marked as an admin's:\n%s", all)
	}
}

func TestUnshareAndGroupRemovalCutStreams(t *testing.T) {
	g, in, dir, _ := setup(t)
	mustCreate(t, g, ann, "work")
	if _, err := g.Share(as(ann), "work", "ben", "driver"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Share(as(ann), "work", "cy", "observer"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Attach(as(ben), "work", api.AttachRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Attach(as(cy), "work", api.AttachRequest{}); err != nil {
		t.Fatal(err)
	}
	benP, cyP := in.joins[0], in.joins[1]
	// Lowering ben to observer cuts his driving stream.
	if _, err := g.Share(as(ann), "work", "ben", "observer"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, benP)
	if cyP.gone() {
		t.Fatal("cy's stream was cut by ben's change")
	}
	// cy taken out of the group: the next recheck cuts hers.
	dir.mu.Lock()
	dir.out[cy.UID] = true
	dir.mu.Unlock()
	g.Recheck(context.Background())
	waitGone(t, cyP)
	if _, err := g.Unshare(as(ann), "work", "nobody"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unshare of a user it is not shared with: %v", err)
	}
	if _, err := g.Unshare(as(ann), "work", "ben"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Session(as(ben), "work"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ben after unshare: %v", err)
	}
}

func waitGone(t *testing.T, p *fakePart) {
	t.Helper()
	select {
	case <-p.left:
	case <-t.Context().Done():
	}
	if !p.gone() {
		t.Fatal("the stream was not cut")
	}
}

func TestAuditVisibility(t *testing.T) {
	g, _, _, _ := setup(t)
	mustCreate(t, g, ann, "a1")
	mustCreate(t, g, ben, "b1")
	if _, err := g.SetCredential(as(ben), credential.KindAPIKey, secret.New("sk-ant-api-secret-value")); err != nil {
		t.Fatal(err)
	}
	read := func(p people.Person, q api.AuditQuery) []audit.Entry {
		var es []audit.Entry
		if err := g.Audit(as(p), q, func(e audit.Entry) error { es = append(es, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return es
	}
	for _, e := range read(ann, api.AuditQuery{}) {
		if e.User != "ann" && e.Owner != "ann" {
			t.Errorf("ann sees another's entry: %+v", e)
		}
	}
	if es := read(root, api.AuditQuery{User: "ben"}); len(es) != 2 || es[1].Action != audit.ActionCredentialSet {
		t.Fatalf("root's view of ben: %+v", es)
	}
	b, _ := os.ReadFile(auditPath(t))
	if strings.Contains(string(b), "secret-value") {
		t.Fatal("a credential reached the audit log")
	}
}

func TestOwnWorkspace(t *testing.T) {
	d := t.TempDir()
	mine := uint32(os.Geteuid())
	if got, err := OwnWorkspace(d, mine); err != nil || got == "" {
		t.Fatalf("own directory: %q %v", got, err)
	}
	if _, err := OwnWorkspace(d, mine+1); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "only a directory you own") {
		t.Fatalf("another's directory: %v", err)
	}
	// A link of one's own to another's directory is judged by its target.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	if _, err := OwnWorkspace(link, mine+1); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a link to /etc: %v", err)
	}
	if _, err := OwnWorkspace("relative/dir", mine); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a relative path: %v", err)
	}
	f := filepath.Join(d, "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := OwnWorkspace(f, mine); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a file: %v", err)
	}
}

func (f *fakeInner) StartLogin(ctx context.Context) (string, error) {
	f.note(ctx, "login-start")
	return "https://example.invalid/authorize", nil
}
func (f *fakeInner) FinishLogin(ctx context.Context, _ string) (oauth.Status, error) {
	f.note(ctx, "login-finish")
	return oauth.Status{LoggedIn: true}, nil
}
func (f *fakeInner) LoginStatus(context.Context) (oauth.Status, error) { return oauth.Status{}, nil }
func (f *fakeInner) Logout(ctx context.Context) error {
	f.note(ctx, "logout")
	return nil
}

// TestEachLogsInAsThemselves: paddock credential login is the caller's:
// the owner's login for an admin, a member's own for anyone else; the
// audit log says whose, never a token.
func TestEachLogsInAsThemselves(t *testing.T) {
	g, in, _, lg := setup(t)
	if _, err := g.StartLogin(context.Background()); !errors.Is(err, ErrNoCaller) {
		t.Fatalf("a login without a caller: %v", err)
	}
	for _, p := range []people.Person{ann, root} {
		if _, err := g.StartLogin(as(p)); err != nil {
			t.Fatal(err)
		}
		if _, err := g.FinishLogin(as(p), "code#state"); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Logout(as(ann)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(in.did, ","); got != "ann login-start,ann login-finish,root login-start,root login-finish,ann logout" {
		t.Fatalf("the Runner was asked: %s", got)
	}
	es, _, _ := lg.Read(audit.Filter{}, 0)
	var got []string
	for _, e := range es {
		got = append(got, e.User+" "+e.Action+" "+e.Target)
	}
	if want := "ann credential-login ann,root credential-login owner,ann credential-logout ann"; strings.Join(got, ",") != want {
		t.Fatalf("the audit log: %s", strings.Join(got, ","))
	}
}

// TestRefsResolveAmongWhatYouSee (issue 31, item 3): a reference means
// only the sessions the caller may see: a prefix that another person's
// session id shares neither turns ambiguous nor reaches theirs, and the
// audit names the session the caller meant.
func TestRefsResolveAmongWhatYouSee(t *testing.T) {
	g, in, _, _ := setup(t)
	a := mustCreate(t, g, ann, "ann-work")
	b := mustCreate(t, g, ben, "ben-work")
	// The fake's ids share the prefix "id0000000".
	s, err := g.Session(as(ben), b.ID[:len(b.ID)-1])
	if err != nil || s.ID != b.ID {
		t.Fatalf("ben's prefix, with ann's id sharing it: %v %v", s.ID, err)
	}
	if _, err := g.Sleep(as(ben), a.ID); !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), a.Name) {
		t.Fatalf("ben by ann's exact id: %v", err)
	}
	for _, d := range in.did {
		if strings.Contains(d, a.ID) {
			t.Fatalf("ben's call reached ann's session: %s", d)
		}
	}
}
