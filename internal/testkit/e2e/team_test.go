package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// rawAttachEnv makes the test binary a helper process (TestMain): it
// attaches to a session as whoever runs it, over the API as any client
// could, sends keys whatever role it got, and prints that role. So the
// test can show the Runner drops an observer's keys itself, not only
// paddock attach.
const rawAttachEnv = "PADDOCK_E2E_RAW_ATTACH"

// rawAttach is the helper: socket, session, role and keys come as JSON.
func rawAttach() int {
	var a struct{ Socket, Ref, Role, Keys string }
	if err := json.Unmarshal([]byte(os.Getenv(rawAttachEnv)), &a); err != nil {
		fmt.Println("error:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	es, err := api.NewClient(a.Socket).Attach(ctx, a.Ref, api.AttachRequest{Role: a.Role, Rows: 50, Cols: 200})
	if err != nil {
		fmt.Println("error:", err)
		return 3
	}
	fmt.Println("role=" + es.Role)
	go es.Copy(io.Discard, io.Discard)
	if _, err := es.Write([]byte(a.Keys)); err != nil {
		fmt.Println("error:", err)
		return 4
	}
	time.Sleep(1500 * time.Millisecond)
	es.Close()
	return 0
}

// hostUser is a host user made for the test.
type hostUser struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32 // supplementary groups when made (a login's, kept)
	home   string
}

// makeUsers makes a group and users (in it where asked), and removes them
// all when the test ends.
func makeUsers(t *testing.T, group string, names map[string]bool) map[string]*hostUser {
	t.Helper()
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	clean := func() {
		for n := range names {
			exec.Command("userdel", n).Run()
		}
		exec.Command("groupdel", group).Run()
	}
	clean()
	t.Cleanup(clean)
	run("groupadd", group)
	homes := testenv.TraversableTempDir(t)
	out := map[string]*hostUser{}
	for n, member := range names {
		run("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", n)
		if member {
			run("usermod", "-aG", group, n)
		}
		u, err := user.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		hu := &hostUser{name: n, uid: uint32(uid), gid: uint32(gid), home: filepath.Join(homes, n)}
		ids, _ := u.GroupIds()
		for _, g := range ids {
			v, _ := strconv.Atoi(g)
			hu.groups = append(hu.groups, uint32(v))
		}
		if err := os.MkdirAll(filepath.Join(hu.home, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{hu.home, filepath.Join(hu.home, "ws")} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		out[n] = hu
	}
	return out
}

// as runs the paddock binary as u, with u's groups as they were at login
// (a removal from the group does not change a running login's).
func (e *env) as(u *hostUser, stdin string, args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"--state-dir", e.dir}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home, "USER=" + u.name}
	cmd.Dir = u.home
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(out), code
}

// asOK is as, failing the test unless it succeeds.
func (e *env) asOK(u *hostUser, stdin string, args ...string) string {
	e.t.Helper()
	out, code := e.as(u, stdin, args...)
	if code != 0 {
		e.t.Fatalf("paddock %s as %s: exit %d\n%s", strings.Join(args, " "), u.name, code, out)
	}
	return out
}

// asRefused is as, failing unless it fails and says want.
func (e *env) asRefused(u *hostUser, want string, args ...string) {
	e.t.Helper()
	out, code := e.as(u, "", args...)
	if code == 0 || !strings.Contains(out, want) {
		e.t.Fatalf("paddock %s as %s: exit %d, want a refusal saying %q:\n%s", strings.Join(args, " "), u.name, code, want, out)
	}
}

// rawAttachAs attaches as u with the helper process; it returns the role
// the Runner gave, or the refusal.
func (e *env) rawAttachAs(u *hostUser, ref, role, keys string) string {
	e.t.Helper()
	arg, _ := json.Marshal(map[string]string{"Socket": filepath.Join(e.dir, "paddock.sock"), "Ref": ref, "Role": role, "Keys": keys})
	cmd := exec.Command(e.helper)
	cmd.Env = []string{rawAttachEnv + "=" + string(arg), "HOME=" + u.home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestTeamServer: one Runner (root's) serving a group. Two people each
// see only their own sessions, pay with their own credential, and share:
// an observer's keys never reach the pane, a driver's do, an operator
// sleeps and wakes; an unshared user's attach, exec, logs and web
// terminal are refused; a user outside the group is refused at connect
// and one taken out loses access at once while their session runs on; the
// web page in Chromium shows each their own list; the audit log has every
// action with the right user.
func TestTeamServer(t *testing.T) {
	const group = "pdkteam"
	users := makeUsers(t, group, map[string]bool{"pdk-ann": true, "pdk-ben": true, "pdk-cy": false})
	ann, ben, cy := users["pdk-ann"], users["pdk-ben"], users["pdk-cy"]
	e := newEnv(t, "[api]", `group = "`+group+`"`, "[users.limits.pdk-ben]", "max_sessions = 1")
	e.helper = copyExecutable(t)
	const annTok, benTok = "sk-ant-oat01-fake-ann-token-e2e-00000000", "sk-ant-oat01-fake-ben-token-e2e-00000000"
	e.fake.Credentials = append(e.fake.Credentials, annTok, benTok)
	if fi, err := os.Stat(filepath.Join(e.dir, "paddock.sock")); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("the socket of a team server: %v %v", fi, err)
	}

	// Outside the group: refused at connect, told which group and how.
	e.asRefused(cy, `members of group "pdkteam"`, "ls")
	e.asRefused(cy, "sudo usermod -aG pdkteam pdk-cy", "ls")

	// Credentials: each stores their own; without one (and no fallback)
	// a person's session is refused, saying what to do.
	if out := e.asOK(ann, annTok+"\n", "credential", "set"); !strings.Contains(out, "stored your own oauth credential") {
		t.Fatalf("ann's credential set: %s", out)
	}
	e.asRefused(ben, "pdk-ben has no credential of their own", "run", "-d", "--name", "ben-s", "--backend", "local")
	e.asOK(ben, benTok+"\n", "credential", "set")
	if out := e.asOK(ben, "", "credential", "status"); !strings.Contains(out, "whose:       pdk-ben") || strings.Contains(out, benTok) {
		t.Fatalf("ben's credential status: %s", out)
	}

	// A workspace must be one's own.
	e.asRefused(ann, "only a directory you own", "run", "-d", "--name", "ann-x", "--backend", "local", "--workspace", ben.home+"/ws")
	e.asOK(ann, "", "run", "-d", "--name", "ann-s", "--backend", "local", "--workspace", ann.home+"/ws")
	e.asOK(ben, "", "run", "-d", "--name", "ben-s", "--backend", "local")
	e.asRefused(ben, "users.max_sessions = 1", "run", "-d", "--name", "ben-2", "--backend", "local")
	e.waitScreen("ann-s", promptReady, 60*time.Second)
	e.waitScreen("ben-s", promptReady, 60*time.Second)

	// Each sees their own.
	lsOf := func(u *hostUser) string { return e.asOK(u, "", "ls") }
	if out := lsOf(ann); !strings.Contains(out, "ann-s") || strings.Contains(out, "ben-s") || !strings.Contains(out, "pdk-ann") {
		t.Fatalf("ann's ls:\n%s", out)
	}
	if out := lsOf(ben); !strings.Contains(out, "ben-s") || strings.Contains(out, "ann-s") {
		t.Fatalf("ben's ls:\n%s", out)
	}
	e.asRefused(ben, "only admins", "ls", "--all-users")
	if out := e.pd("ls", "--all-users"); !strings.Contains(out, "ann-s") || !strings.Contains(out, "ben-s") {
		t.Fatalf("root's ls --all-users:\n%s", out)
	}
	// A forged user name in a request body changes nothing: the fields are
	// unknown and the request refused, or the kernel's word stands.
	if out := e.rawAttachAs(ann, "ann-s", "driver", "say hi\r"); out != "role=driver" {
		t.Fatalf("ann drives her own session: %s", out)
	}
	e.waitScreen("ann-s", "hi from the fake server (turn 1)", 60*time.Second)
	if out := e.rawAttachAs(ben, "ben-s", "", "say hi\r"); out != "role=driver" {
		t.Fatalf("ben drives his own session: %s", out)
	}
	e.waitScreen("ben-s", "hi from the fake server (turn 1)", 60*time.Second)
	paid := map[string]bool{}
	for _, r := range e.fake.Requests() {
		if r.Path == "/v1/messages" {
			paid[r.Credential] = true
		}
	}
	if !paid[annTok] || !paid[benTok] {
		t.Fatalf("the upstream saw neither person's own credential: %v", paid)
	}
	var es []decisionlog.Entry
	for _, l := range strings.Split(strings.TrimSpace(e.pd("logs", "ann-s", "--json")), "\n") {
		var d decisionlog.Entry
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("ann's log: %v: %s", err, l)
		}
		es = append(es, d)
	}
	for _, d := range es {
		if d.Decision == "forwarded" && d.CredentialUser != "pdk-ann" {
			t.Fatalf("a request of ann's session paid by %q", d.CredentialUser)
		}
	}

	// Unshared: ben can reach nothing of ann's.
	for _, args := range [][]string{{"attach", "ann-s"}, {"exec", "ann-s", "--", "id"}, {"logs", "ann-s"}, {"sleep", "ann-s"}, {"inspect", "ann-s"}} {
		e.asRefused(ben, `no session "ann-s" that you can see`, args...)
	}
	if out := e.rawAttachAs(ben, "ann-s", "observer", "x"); !strings.Contains(out, "that you can see") {
		t.Fatalf("ben's raw attach to ann's session: %s", out)
	}

	// Observer: watches; the Runner drops his keys (he sends them anyway).
	e.asOK(ann, "", "share", "ann-s", "pdk-ben", "--role", "observer")
	if out := e.rawAttachAs(ben, "ann-s", "driver", "x"); !strings.Contains(out, "pdk-ben is an observer") {
		t.Fatalf("an observer asking to drive: %s", out)
	}
	if out := e.rawAttachAs(ben, "ann-s", "", "OBSERVER-WAS-HERE"); out != "role=observer" {
		t.Fatalf("an observer's attach: %s", out)
	}
	if s := e.screen("ann-s"); strings.Contains(s, "OBSERVER-WAS-HERE") {
		t.Fatalf("an observer's keys reached the pane:\n%s", s)
	}
	e.asRefused(ben, "needs operator", "sleep", "ann-s")
	if out := e.asOK(ben, "", "ls"); !strings.Contains(out, "observer") || !strings.Contains(out, "pdk-ann") {
		t.Fatalf("ben's ls with ann's session shared:\n%s", out)
	}

	// Driver: his keys reach the pane.
	e.asOK(ann, "", "share", "ann-s", "pdk-ben", "--role", "driver")
	if out := e.rawAttachAs(ben, "ann-s", "", "DRIVER-WAS-HERE"); out != "role=driver" {
		t.Fatalf("a driver's attach: %s", out)
	}
	e.waitScreen("ann-s", "DRIVER-WAS-HERE", 10*time.Second)
	e.pd("exec", "ann-s", "--", "tmux", "-L", "paddock", "send-keys", "-t", "claude", "C-u")

	// Operator: sleeps, wakes, sets, execs.
	e.asOK(ann, "", "share", "ann-s", "pdk-ben", "--role", "operator")
	e.asOK(ben, "", "sleep", "ann-s")
	e.asOK(ben, "", "wake", "ann-s")
	e.asOK(ben, "", "set", "ann-s", "--budget", "1000000")
	if out := e.asOK(ben, "", "exec", "ann-s", "--", "echo", "operator-exec"); !strings.Contains(out, "operator-exec") {
		t.Fatalf("an operator's exec: %s", out)
	}
	e.asRefused(ben, "only pdk-ann", "share", "ann-s", "pdk-cy")
	e.asRefused(ann, `no user "pdk-nobody"`, "share", "ann-s", "pdk-nobody")
	e.asRefused(ann, `not in group "pdkteam"`, "share", "ann-s", "pdk-cy")
	e.waitScreen("ann-s", promptReady, 60*time.Second)
	e.asOK(ann, "", "unshare", "ann-s", "pdk-ben")
	if out := e.asOK(ben, "", "ls"); strings.Contains(out, "ann-s") {
		t.Fatalf("ben still sees ann's session after unshare:\n%s", out)
	}
	e.asRefused(ben, "that you can see", "exec", "ann-s", "--", "id")

	// The web page: each person's login is theirs.
	webAs(t, e, ann, ben)

	// Taken out of the group: his login keeps its groups, the Runner does
	// not; his session runs on.
	if out, err := exec.Command("gpasswd", "-d", ben.name, group).CombinedOutput(); err != nil {
		t.Fatalf("gpasswd: %v %s", err, out)
	}
	e.asRefused(ben, `pdk-ben is not in group "pdkteam"`, "ls")
	var all []session.Session
	if err := json.Unmarshal([]byte(e.pd("ls", "--all-users", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == "ben-s" && s.Observed != session.Running {
			t.Fatalf("ben's session stopped with his access: %s", s.Observed)
		}
	}
	e.asOK(ann, "", "rm", "-f", "ann-s")

	// The audit log: every action, by the right user.
	var entries []audit.Entry
	for _, l := range strings.Split(strings.TrimSpace(e.pd("audit", "--json")), "\n") {
		a, err := audit.ParseLine([]byte(l))
		if err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		entries = append(entries, a)
	}
	has := func(user, action, name, role string, refused bool, argv string) bool {
		for _, a := range entries {
			if a.User == user && a.Action == action && (name == "" || a.SessionName == name) && (role == "" || a.Role == role) &&
				(a.Error != "") == refused && (argv == "" || strings.Join(a.Argv, " ") == argv) {
				return true
			}
		}
		return false
	}
	for _, w := range []struct {
		user, action, name, role string
		refused                  bool
		argv                     string
	}{
		{"pdk-ann", audit.ActionCredentialSet, "", "", false, ""},
		{"pdk-ben", audit.ActionCredentialSet, "", "", false, ""},
		{"pdk-ben", audit.ActionCreate, "ben-s", "", true, ""},
		{"pdk-ann", audit.ActionCreate, "ann-x", "", true, ""},
		{"pdk-ann", audit.ActionCreate, "ann-s", "", false, ""},
		{"pdk-ben", audit.ActionCreate, "ben-s", "", false, ""},
		{"pdk-ann", audit.ActionAttach, "ann-s", "driver", false, ""},
		{"pdk-ann", audit.ActionDetach, "ann-s", "driver", false, ""},
		{"pdk-ann", audit.ActionShare, "ann-s", "observer", false, ""},
		{"pdk-ben", audit.ActionAttach, "ann-s", "driver", true, ""},
		{"pdk-ben", audit.ActionAttach, "ann-s", "observer", false, ""},
		{"pdk-ben", audit.ActionDetach, "ann-s", "observer", false, ""},
		{"pdk-ben", audit.ActionSleep, "ann-s", "", true, ""},
		{"pdk-ann", audit.ActionShare, "ann-s", "driver", false, ""},
		{"pdk-ben", audit.ActionAttach, "ann-s", "driver", false, ""},
		{"pdk-ann", audit.ActionShare, "ann-s", "operator", false, ""},
		{"pdk-ben", audit.ActionSleep, "ann-s", "", false, ""},
		{"pdk-ben", audit.ActionWake, "ann-s", "", false, ""},
		{"pdk-ben", audit.ActionSet, "ann-s", "", false, ""},
		{"pdk-ben", audit.ActionExec, "ann-s", "", false, "echo operator-exec"},
		{"pdk-ann", audit.ActionUnshare, "ann-s", "", false, ""},
		{"pdk-ann", audit.ActionWebLogin, "", "", false, ""},
		{"pdk-ben", audit.ActionWebLogin, "", "", false, ""},
		{"pdk-ann", audit.ActionRemove, "ann-s", "", false, ""},
		{"root", audit.ActionExec, "ann-s", "", false, ""},
	} {
		if !has(w.user, w.action, w.name, w.role, w.refused, w.argv) {
			t.Errorf("the audit log lacks %+v", w)
		}
	}
	for _, a := range entries {
		if a.User == "root" && a.SessionName == "ann-s" && !a.Admin {
			t.Errorf("root's action on ann's session not marked an admin's: %+v", a)
		}
		if a.User == "pdk-ann" && a.Admin {
			t.Errorf("ann's action marked an admin's: %+v", a)
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(e.dir, "audit.jsonl")); bytes.Contains(raw, []byte(annTok)) || bytes.Contains(raw, []byte(benTok)) {
		t.Fatal("a credential in the audit log")
	}
	// ann's own view: her actions and sessions, not ben's own.
	for _, l := range strings.Split(strings.TrimSpace(e.asOK(ann, "", "audit", "--json")), "\n") {
		a, _ := audit.ParseLine([]byte(l))
		if a.User != "pdk-ann" && a.Owner != "pdk-ann" && a.Target != "pdk-ann" {
			t.Fatalf("ann sees an entry not about her: %s", l)
		}
	}
	if out := e.asOK(ann, "", "audit", "--session", "ann-s"); !strings.Contains(out, "pdk-ben") || !strings.Contains(out, "as observer") {
		t.Fatalf("ann's audit of her session:\n%s", out)
	}
}

// copyExecutable puts this test binary where the test's users can run it
// (the rawAttach helper).
func copyExecutable(t *testing.T) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(testenv.TraversableTempDir(t), "e2e-helper")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// webAs logs two people into the page in Chromium, in separate browser
// contexts: each sees their own list; ben's cookie cannot open the
// terminal of ann's session.
func webAs(t *testing.T, e *env, ann, ben *hostUser) {
	chromium := testenv.LookPath(t, "chromium")
	annURL := strings.TrimSpace(e.asOK(ann, "", "web"))
	benURL := strings.TrimSpace(e.asOK(ben, "", "web"))
	base := annURL[:strings.Index(annURL, "/login")]
	bctx := newBrowser(t, chromium)
	if err := chromedp.Do(bctx); err != nil { // the browser itself
		t.Fatal(err)
	}
	list := func(login, user, mine, theirs, shot string) {
		ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext()) // cookies of its own
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="`+mine+`"]`))); err != nil {
			t.Fatalf("%s's list: %v", mine, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#sessions")))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, theirs) || !strings.Contains(text, "owner") {
			t.Fatalf("the page of %s's owner shows:\n%s", mine, text)
		}
		if who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#me"))); err != nil || !strings.Contains(who, user) {
			t.Fatalf("the page says it is %q, not %s (%v)", who, user, err)
		}
		screenshot(t, ctx, shot)
	}
	list(annURL, ann.name, "ann-s", "ben-s", "web-team-ann.png")
	list(benURL, ben.name, "ben-s", "ann-s", "web-team-ben.png")

	// ben's login (cookie and key), on the terminal of ann's session:
	// refused before any join.
	hc, key := webLogin(t, strings.TrimSpace(e.asOK(ben, "", "web")))
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/api/sessions/ann-s/terminal?role=observer"
	_, resp, err := websocket.Dial(context.Background(), wsURL, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"paddock", "paddock.key." + key}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("ben's web terminal on ann's session: %d %v", code, err)
	}
}
