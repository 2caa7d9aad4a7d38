package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// shAs runs a shell script as u and returns its output and exit code.
func shAs(t *testing.T, u *hostUser, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// idOf is the id of u's session name, from u's own ls.
func (e *env) idOf(u *hostUser, name string) string {
	e.t.Helper()
	var ss []session.Session
	if err := json.Unmarshal([]byte(e.asOK(u, "", "ls", "--json")), &ss); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s.ID
		}
	}
	e.t.Fatalf("%s has no session %s", u.name, name)
	return ""
}

// TestTeamAttacks is a member attacking a colleague and the owner on a
// team server (issue 31), each case done as the attack was:
//
//   - item 2: with credential.fallback_to_owner, a member with no
//     credential of their own asks for direct mode, to have the owner's
//     setup token in the box's environment: refused.
//   - item 3: a member names a session with a colleague's session id (ids
//     show in ps, on every box's command line): refused; the colleague's
//     id reaches nothing for the member; a taken name does not tell the
//     other person's id.
//   - item 7: in a group-writable parent, a member renames a colleague's
//     directory into the path of their own session's workspace and wakes
//     the session, on each backend: refused, and the colleague's files are
//     untouched.
func TestTeamAttacks(t *testing.T) {
	const group = "pdkatk"
	users := makeUsers(t, group, map[string]bool{"pdk-vic": true, "pdk-mal": true})
	vic, mal := users["pdk-vic"], users["pdk-mal"]
	e := newEnvOpts(t, envOpts{fallbackToOwner: true}, "[api]", `group = "`+group+`"`)
	const vicTok = "sk-ant-oat01-fake-vic-token-e2e-00000000"
	e.fake.Credentials = append(e.fake.Credentials, vicTok)
	e.asOK(vic, vicTok+"\n", "credential", "set")

	// Item 2: the lent credential only ever goes through the proxy.
	e.asRefused(mal, "pdk-mal has none of their own", "run", "-d", "--name", "mal-direct", "--backend", "local",
		"--credential-mode", "direct", "--egress", "offline")
	if out, _ := e.as(mal, "", "ls"); strings.Contains(out, "mal-direct") {
		t.Fatalf("a refused direct session was made:\n%s", out)
	}
	for _, r := range e.fake.Requests() {
		if r.Credential != "" && r.Credential != ownerToken && r.Credential != vicTok {
			t.Fatalf("the upstream saw %q", r.Credential)
		}
	}

	// Item 3: the decoy.
	e.asOK(vic, "", "run", "-d", "--name", "vic-s", "--backend", "local")
	e.waitScreen("vic-s", promptReady, 60*time.Second)
	vicID := e.idOf(vic, "vic-s")
	// Any host user can read it off the box's command line (ps): it must
	// mean nothing to them.
	e.asRefused(mal, "would read as a session id", "run", "-d", "--name", vicID, "--backend", "local")
	e.asRefused(mal, "would read as a session id", "run", "-d", "--name", vicID[:6], "--backend", "local")
	out, code := e.as(mal, "", "run", "-d", "--name", "vic-s", "--backend", "local")
	if code == 0 || !strings.Contains(out, "taken by another person's session") || strings.Contains(out, vicID[:8]) {
		t.Fatalf("a taken name, as another person: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"exec", vicID, "--", "id"}, {"sleep", vicID}, {"logs", vicID}, {"exec", vicID[:6], "--", "id"}} {
		e.asRefused(mal, "that you can see", args...)
	}
	if out := e.asOK(vic, "", "exec", "vic-s", "--", "echo", "vic-exec"); !strings.Contains(out, "vic-exec") {
		t.Fatalf("vic's own exec: %s", out)
	}

	// A member's API token is that member, on the web listener: another
	// member's unshared session does not exist for it, by name or id, in
	// the list, or on the event stream; the owner's own token sees it.
	tokenOf := func(u *hostUser) string {
		t.Helper()
		tok := regexp.MustCompile(`pdk_at_[0-9a-f]{12}_[A-Za-z0-9_-]{43}`).FindString(e.asOK(u, "", "token", "create", "--scope", "operate"))
		if tok == "" {
			t.Fatalf("no token for %s", u.name)
		}
		return tok
	}
	login := strings.TrimSpace(e.pd("web"))
	web := &apiClient{t: t, base: login[:strings.Index(login, "/login")]}
	malAPI, vicAPI := tokenOf(mal), tokenOf(vic)
	for _, p := range []string{"/v1/sessions/vic-s", "/v1/sessions/" + vicID, "/v1/sessions/" + vicID + "/turn", "/v1/sessions/" + vicID + "/events"} {
		// 404, saying nothing of the session beyond the words asked with.
		code, b := web.call(malAPI, "GET", p, nil)
		if other := map[bool]string{true: vicID, false: "vic-s"}[strings.Contains(p, "vic-s")]; code != 404 || strings.Contains(string(b), other) || strings.Contains(string(b), "pdk-vic") {
			t.Fatalf("mal's token GET %s: %d %s", p, code, b)
		}
	}
	if code, b := web.call(malAPI, "POST", "/v1/sessions/vic-s/message", map[string]any{"text": "from mal"}); code != 404 {
		t.Fatalf("mal's token sends to vic's session: %d %s", code, b)
	}
	if _, b := web.call(malAPI, "GET", "/v1/sessions", nil); strings.Contains(string(b), vicID) {
		t.Fatalf("mal's token lists vic's session: %s", b)
	}
	if code, b := web.call(vicAPI, "GET", "/v1/sessions/vic-s", nil); code != 200 || !strings.Contains(string(b), vicID) {
		t.Fatalf("vic's own token: %d %s", code, b)
	}
	var malEvents, vicEvents eventLog
	malEvents.follow(t, web.base+"/v1/events", malAPI)
	vicEvents.follow(t, web.base+"/v1/events", vicAPI)
	e.asOK(vic, "", "send", "vic-s", "a turn mal must not see")
	vicEvents.wait(t, "vic-s", 60*time.Second, func(ev events.Event) bool { return ev.Type == events.TurnEnded })
	malEvents.mu.Lock()
	for _, ev := range malEvents.evs {
		if ev.Session == vicID {
			t.Fatalf("mal's event stream has vic's session: %+v", ev)
		}
	}
	malEvents.mu.Unlock()

	// Item 7: the swapped workspace, on each backend.
	grp, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(grp.Gid)
	team := filepath.Join(testenv.TraversableTempDir(t), "team")
	if err := os.Mkdir(team, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(team, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(team, 0o2775); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"local", "docker"} {
		vicWS, malWS := filepath.Join(team, "vic-"+backend), filepath.Join(team, "mal-"+backend)
		if out, code := shAs(t, vic, "set -e; mkdir "+vicWS+"; echo vic-secret > "+vicWS+"/plan.txt; chmod 700 "+vicWS); code != 0 {
			t.Fatalf("vic's directory: %s", out)
		}
		if out, code := shAs(t, mal, "mkdir "+malWS); code != 0 {
			t.Fatalf("mal's directory: %s", out)
		}
		name := "mal-ws-" + backend
		e.asOK(mal, "", "run", "-d", "--name", name, "--backend", backend, "--workspace", malWS)
		e.waitScreen(name, promptReady, 90*time.Second)
		e.asOK(mal, "", "sleep", name)
		if out, code := shAs(t, mal, "set -e; mv "+malWS+" "+malWS+".old; mv "+vicWS+" "+malWS); code != 0 {
			t.Fatalf("mal's swap: %s", out)
		}
		e.asRefused(mal, "now belongs to uid "+strconv.Itoa(int(vic.uid)), "wake", name)
		if b, err := os.ReadFile(filepath.Join(malWS, "plan.txt")); err != nil || string(b) != "vic-secret\n" {
			t.Fatalf("vic's file after the wake: %q %v", b, err)
		}
		entries, _ := os.ReadDir(malWS)
		if len(entries) != 1 {
			t.Fatalf("vic's directory holds %d entries after the refused wake, want her one file", len(entries))
		}
		// Her directory back, his own back: the wake works.
		if out, code := shAs(t, mal, "set -e; mv "+malWS+" "+vicWS+"; mv "+malWS+".old "+malWS); code != 0 {
			t.Fatalf("the swap back: %s", out)
		}
		e.asOK(mal, "", "wake", name)
		e.asOK(mal, "", "rm", "-f", name)
	}
}
