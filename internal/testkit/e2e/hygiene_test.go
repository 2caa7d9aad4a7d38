package e2e

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// TestSecretHygiene runs a whole session on each backend — prompt, tool
// call, sleep, wake, prompt — and then searches everywhere a secret could
// leak for the owner's credential and for every session token issued:
//
//   - in the box: every file (for the local backend, all but /usr, which is
//     the host's own /usr mounted read-only and ~6 GB to read), and the
//     environment and arguments of every process. The owner's credential
//     appears nowhere; the live token only in process environments; the
//     token revoked at sleep nowhere.
//   - on the host: every file under the state directory (store, logs,
//     decision logs, volumes), the Runner's log, the API's answers through
//     the CLI, the arguments of every host process, and for the docker
//     backend the container's record and log in Docker's data directory.
//     No token appears in any of them; the owner's credential neither (it
//     reaches the Runner from its own environment here).
func TestSecretHygiene(t *testing.T) {
	e := newEnv(t)
	// A service credential, granted to each session: it stays in its
	// 0600 file, and the box holds only its placeholder.
	const serviceToken = "ghp_hygiene_service_token_5d2e9b"
	var out strings.Builder
	if code := mainWithStdin(context.Background(), e, serviceToken+"\n", &out, "secret", "set", "gh", "--kind", "github"); code != 0 {
		t.Fatalf("secret set: %s", out.String())
	}
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			name := "hyg-" + backend
			id, tok1 := e.chat(name, backend, "--secret", "gh:o/r:push")
			e.typeLine(name, "TOOLTEST: echo hello > /workspace/proof.txt")
			e.waitScreen(name, "The tool ran. Done.", 30*time.Second)
			e.pd("sleep", name)
			e.pd("wake", name)
			e.waitScreen(name, promptReady, 30*time.Second)
			tok2 := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
			e.typeLine(name, "and now")
			e.waitScreen(name, "(turn 3)", 30*time.Second)
			if !strings.HasPrefix(tok1, "pdk_st_") || !strings.HasPrefix(tok2, "pdk_st_") || tok1 == tok2 {
				t.Fatalf("tokens %q %q", tok1, tok2)
			}
			secrets := map[string]string{"the owner's credential": ownerToken, "the revoked token": tok1, "the live token": tok2, "the service token": serviceToken}

			// The box's files. The patterns go in on stdin (grep -f -), so
			// they are in no file and no argument in the box.
			skip := "/proc|/sys|/dev"
			if backend == "local" {
				skip += "|/usr"
			}
			// A planted canary proves the search finds what is there.
			const canary = "paddock-hygiene-canary-7f3a"
			e.pd("exec", name, "--", "sh", "-c", "echo "+canary+" > /workspace/.canary")
			patterns := ownerToken + "\n" + tok1 + "\n" + tok2 + "\n" + serviceToken + "\n" + canary + "\n"
			hits := e.execStdin(name, patterns, "sh", "-c",
				"p=$(cat); for r in /* /.[!.]*; do case $r in "+skip+") continue;; esac; [ -e \"$r\" ] || continue; "+
					"printf '%s\\n' \"$p\" | grep -rlsF -f - \"$r\"; done; true")
			found := false
			for _, l := range strings.Fields(hits) {
				if l == "/workspace/.canary" {
					found = true
					continue
				}
				t.Errorf("a secret is in the box's file %s", l)
			}
			if !found {
				t.Fatalf("the search of the box's files missed the canary: %q", hits)
			}
			// Every process in the box: environment and arguments.
			procs := e.pd("exec", name, "--", "sh", "-c",
				`for p in /proc/[0-9]*; do printf 'ENV %s ' "${p#/proc/}"; tr '\0' ' ' < $p/environ 2>/dev/null; echo; printf 'ARGS %s ' "${p#/proc/}"; tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`)
			nproc, liveInEnv := 0, 0
			for _, l := range strings.Split(procs, "\n") {
				if strings.HasPrefix(l, "ARGS ") {
					nproc++
				}
				for what, s := range secrets {
					if !strings.Contains(l, s) {
						continue
					}
					if what == "the live token" && strings.HasPrefix(l, "ENV ") {
						liveInEnv++
						continue // where it belongs
					}
					kind, pid, _ := strings.Cut(l, " ")
					pid, _, _ = strings.Cut(pid, " ")
					t.Errorf("%s is in the %s of box process %s", what, map[string]string{"ENV": "environment", "ARGS": "arguments"}[kind], pid)
				}
			}
			if nproc < 3 || liveInEnv == 0 || !strings.Contains(procs, "claude") {
				t.Fatalf("saw %d box processes, not claude's:\n%s", nproc, procs)
			}

			// The host.
			var places []string
			check := func(where string, b []byte) {
				places = append(places, where)
				for what, s := range secrets {
					if strings.Contains(string(b), s) {
						t.Errorf("%s is in %s", what, where)
					}
				}
			}
			filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return nil
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return nil
				}
				if filepath.Base(p) == "secrets.json" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "users" {
					// Where the service token is kept: 0600, and nothing else in it.
					if fi, _ := d.Info(); fi == nil || fi.Mode().Perm() != 0o600 {
						t.Errorf("%s is not 0600", p)
					}
					b = []byte(strings.ReplaceAll(string(b), serviceToken, ""))
				}
				check("state file "+p, b)
				return nil
			})
			e.mu.Lock()
			check("the Runner's log", []byte(e.log.String()))
			e.mu.Unlock()
			for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"logs", name}, {"logs", name, "--json"}, {"logs", name, "--egress"}, {"logs", name, "--services"}, {"secret", "ls"},
				{"ledger", name, "--with-transcript"}, {"ledger", name, "--format", "csv"}, {"credential", "status"}, {"doctor"}, {"set", name, "--budget", "1000000"}, {"wake", name}, {"exec", name, "--", "nope-not-a-command"}} {
				out, _ := e.pdCode(args...)
				check("`paddock "+strings.Join(args, " ")+"`", []byte(out))
			}
			ents, _ := os.ReadDir("/proc")
			for _, d := range ents {
				if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil {
					check("host process arguments", b)
				}
			}
			for _, o := range e.objectsOf(id) {
				if backend != "docker" {
					break
				}
				var dirs []string
				switch o.Kind {
				case sandbox.KindBox:
					dirs = []string{"/var/lib/docker/containers/" + o.ID}
					if out, err := exec.Command("docker", "inspect", o.ID).CombinedOutput(); err == nil {
						check("docker inspect", out)
					} else {
						t.Errorf("docker inspect %s: %v %s", o.ID, err, out)
					}
				case sandbox.KindVolume:
					dirs = []string{"/var/lib/docker/volumes/" + o.ID}
				}
				for _, dir := range dirs {
					filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
						if err == nil && d.Type().IsRegular() {
							if b, err := os.ReadFile(p); err == nil {
								check("docker's file "+p, b)
							}
						}
						return nil
					})
				}
			}
			t.Logf("searched the box (%d processes) and %d places on the host", nproc, len(places))
			e.pd("rm", "-f", name)
		})
	}
}

// TestWebLoginTokenNowhere: a login URL from `paddock web` reaches the
// person who asked and nothing else: no file under the state directory
// holds its token (the Runner keeps only a hash, in memory), nor does
// anything the Runner printed; and no file there that others could read
// holds any secret-looking login at all.
func TestWebLoginTokenNowhere(t *testing.T) {
	e := newEnv(t)
	login := strings.TrimSpace(e.pd("web"))
	u, err := url.Parse(login)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("paddock web printed %q", login)
	}
	tok := u.Query().Get("token")
	if again := strings.TrimSpace(e.pd("web")); again == login {
		t.Fatal("paddock web printed the same URL twice")
	}
	if strings.Contains(e.log.String(), tok) {
		t.Fatal("the Runner's output holds the login token")
	}
	err = filepath.Walk(e.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if strings.Contains(string(b), tok) {
			t.Errorf("%s (%v) holds the login token", p, fi.Mode())
		}
		if fi.Mode().Perm()&0o044 != 0 && strings.Contains(string(b), "login?token=") {
			t.Errorf("%s, readable by others (%v), holds a login URL", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
