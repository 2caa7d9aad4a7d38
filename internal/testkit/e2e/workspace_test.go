package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/daemon/cli"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// ownedRepo makes a host git repository owned by sandboxtest.WorkspaceOwner
// (not root), with one tracked file and a repository hook: a
// .claude/settings.json whose PostToolUse hook leaves a marker file.
func ownedRepo(t *testing.T) string {
	t.Helper()
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	files := map[string]string{
		"main.txt":              "hello world\n",
		".claude/settings.json": `{"hooks":{"PostToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo fired > /workspace/hook-fired"}]}]}}` + "\n",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An unusual mode, which the box's edit must keep.
	if err := os.Chmod(filepath.Join(ws, "main.txt"), 0o750); err != nil {
		t.Fatal(err)
	}
	commitAsOwner(t, ws)
	return ws
}

// gitPerson is the environment of a person whose git config names Ada
// Owner as them (and a pager, which must not come along into a box).
func gitPerson(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ada Owner\n\temail = ada@example.org\n[core]\n\tpager = evil-pager\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=/usr/bin:/bin", "HOME=" + home}
}

// hostGit runs git on the host as root, on a repository of another user's.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
	// No optional locks: git status as root would otherwise rewrite the
	// index, and the test checks that every file is the owner's.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestWorkspaceGitTurn is the daily job on each backend: a host repository
// of a user's (not root's), the real Claude Code in the box, and one turn
// in which the model edits a tracked file (Read, Edit) and commits it with
// Bash. On the host afterwards: the edit is in the file, the commit is in
// the history with the person's git identity, every file the box made or
// changed belongs to the repository's owner, and the repository's own hook
// (.claude/settings.json) ran in the box. local-gvisor and docker-gvisor:
// the same on runsc (run by the local backend, or Docker's runtime), where the sentry makes files as root (the workspace's
// idmap maps it for that instant) and works through its gofer.
func TestWorkspaceGitTurn(t *testing.T) {
	e := newEnv(t)
	person := gitPerson(t)
	for _, label := range []string{"local", "local-gvisor", "docker", "docker-gvisor"} {
		backend, runtime, _ := strings.Cut(label, "-")
		t.Run(label, func(t *testing.T) {
			e.t = t
			ws := ownedRepo(t)
			e.fake.SetSteps([]fakeapi.Step{
				{Name: "Read", Input: map[string]any{"file_path": "/workspace/main.txt"}},
				{Name: "Edit", Input: map[string]any{"file_path": "/workspace/main.txt", "old_string": "hello world", "new_string": "hello paddock"}},
				{Name: "Bash", Input: map[string]any{"command": "cd /workspace && git commit -qam 'edit from the box' && git log -1 --format=%an", "description": "commit the edit"}},
			})
			defer e.fake.SetSteps(nil)
			name := "git-" + label
			args := []string{"run", "-d", "--name", name, "--backend", backend, "--workspace", ws}
			if runtime != "" {
				args = append(args, "--runtime", runtime)
			}
			e.pdAs(person, args...)
			defer e.pdRun("rm", "-f", name)
			e.waitScreen(name, promptReady, 30*time.Second)
			e.typeLine(name, fakeapi.StepsKeyword+" edit and commit")
			e.waitScreen(name, fakeapi.StepsDone, 60*time.Second)

			if b, _ := os.ReadFile(filepath.Join(ws, "main.txt")); string(b) != "hello paddock\n" {
				t.Fatalf("main.txt on the host: %q\n%s", b, e.screen(name))
			}
			if fi, err := os.Stat(filepath.Join(ws, "main.txt")); err != nil || fi.Mode().Perm() != 0o750 {
				t.Errorf("the edited file's mode: %v %v, want 0750 as before", fi.Mode(), err)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s")); got != "Ada Owner <ada@example.org>|Ada Owner <ada@example.org>|edit from the box" {
				t.Fatalf("the last commit on the host: %q", got)
			}
			// The box's index reaches the host's .git within a round of the
			// Runner's carry (wsmount.SyncInterval), not at once.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				st := hostGit(t, ws, "status", "--porcelain", "--untracked-files=no")
				if st == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the commit left changes: %q", st)
				}
			}
			// The repository's own hook ran in the box (after the Bash call).
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(ws, "hook-fired")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the repository's PostToolUse hook did not run in the box")
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Only the identity came from the person's git config.
			if out, _ := e.pdCode("exec", name, "--", "git", "config", "--global", "--get", "core.pager"); out != "" {
				t.Errorf("more than the identity came along: core.pager=%q", out)
			}
			filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
				if err != nil {
					return nil
				}
				st := fi.Sys().(*syscall.Stat_t)
				if st.Uid != sandboxtest.WorkspaceOwner || st.Gid != sandboxtest.WorkspaceOwner {
					t.Errorf("%s is %d:%d on the host, not the owner's", p, st.Uid, st.Gid)
				}
				return nil
			})
		})
	}
}

// TestWorkspaceRefusedAtRun: a workspace paddock cannot bind as its owner
// is refused by `paddock run` with the reason and what to do, and nothing
// of the session is made.
func TestWorkspaceRefusedAtRun(t *testing.T) {
	e := newEnv(t)
	dir := testenv.TraversableTempDir(t)
	rootOwned := filepath.Join(dir, "root-owned")
	os.Mkdir(rootOwned, 0o755)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(sandboxtest.OwnedWorkspace(t, dir), link)
	for _, c := range []struct{ ws, want string }{
		{rootOwned, "belongs to root"},
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "not a directory"},
		{link, "is a symlink"},
	} {
		out, code := e.pdCode("run", "-d", "--name", "refused", "--workspace", c.ws)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("run --workspace %s: exit %d %q, want %q", c.ws, code, out, c.want)
		}
	}
	if out := e.pd("ls", "--json"); strings.Contains(out, `"refused"`) {
		t.Fatalf("a refused run left a session: %s", out)
	}
}

// TestWorkspaceReleasedWhenBoxDies: a box killed behind paddock's back
// does not leave its workspace view and placeholders in the owner's
// directory until the next wake: the Runner releases them when it sees
// the box gone. wake makes them again.
func TestWorkspaceReleasedWhenBoxDies(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			ws := ownedRepo(t)
			name := "dies-" + backend
			id := strings.TrimSpace(e.pd("run", "-d", "--name", name, "--backend", backend, "--workspace", ws))
			defer e.pdRun("rm", "-f", name)
			e.waitScreen(name, promptReady, 30*time.Second)
			if mi, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(mi), "/workspaces/"+id) && !strings.Contains(string(mi), e.inspect(name).BoxID+"/workspace") {
				t.Fatal("the check below would see no mount even while the box runs")
			}
			placeholder := filepath.Join(ws, ".vscode")
			if _, err := os.Stat(placeholder); err != nil {
				t.Fatalf("no placeholder while the box runs: %v", err)
			}
			e.killBox(id, backend)
			e.waitAsleep(name)
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := os.Lstat(placeholder); os.IsNotExist(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the placeholder stayed in the owner's directory after the box died")
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Local mounts it in the box's directory, Docker under the
			// session's id.
			box := e.inspect(name).BoxID
			if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), "/workspaces/"+id) || strings.Contains(string(mi), box+"/workspace") {
				t.Fatalf("the workspace view of %s is still mounted", name)
			}
			e.pd("wake", name)
			e.waitScreen(name, promptReady, 30*time.Second)
			if _, err := os.Stat(placeholder); err != nil {
				t.Fatalf("no placeholder after wake: %v", err)
			}
			// As docker: ls -q prints ids; rm of a running session needs -f.
			if ids := e.pd("ls", "-q"); !strings.Contains(ids, id+"\n") || strings.Contains(ids, "NAME") {
				t.Fatalf("ls -q: %q", ids)
			}
			// Shell completion offers the session's name (cobra's scripts
			// call __complete).
			if out := e.pd("__complete", "rm", name[:3]); !strings.HasPrefix(out, name+"\n") {
				t.Fatalf("completion of rm %s: %q", name[:3], out)
			}
			if out, code := e.pdCode("rm", name); code != 5 || !strings.Contains(out, "is running") || !strings.Contains(out, "rm -f "+name) {
				t.Fatalf("rm of a running session without -f: exit %d %q", code, out)
			}
			if st := e.inspect(name); st.Observed != "running" {
				t.Fatalf("rm without -f touched the session: %s", st.Observed)
			}
		})
	}
}

// TestLogsFollow: `paddock logs -f` prints what was there, then each new
// decision as it comes, and ends by itself once the session is removed.
func TestLogsFollow(t *testing.T) {
	e := newEnv(t)
	name := "follow"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	var out testenv.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(context.Background(), []string{"--state-dir", e.dir, "logs", "-f", name},
			cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Env: []string{"PATH=/usr/bin:/bin"}})
	}()
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "/v1/messages") {
		if time.Now().After(deadline) {
			t.Fatalf("logs -f did not show the new request:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(out.String(), "TIME"); n != 1 {
		t.Errorf("the header %d times:\n%s", n, out.String())
	}
	e.pd("rm", "-f", name)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("logs -f ended with %d:\n%s", code, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("logs -f did not end after the session was removed")
	}
}

// TestExecExitCodes: exec's exit code is the command's, as docker exec's:
// 127 for a command the box does not have, 126 for one it cannot run, 125
// when paddock itself fails (here: no such session).
func TestExecExitCodes(t *testing.T) {
	e := newEnv(t)
	name := "codes"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	defer e.pdRun("rm", "-f", name)
	for _, c := range []struct {
		argv []string
		code int
		msg  string
	}{
		{[]string{"exec", name, "--", "sh", "-c", "exit 3"}, 3, ""},
		{[]string{"exec", name, "--", "no-such-command-here"}, 127, "not found"},
		{[]string{"exec", name, "--", "/etc/passwd"}, 126, "permission denied"},
		{[]string{"exec", name, "--", "/no/such/path"}, 127, "no such file"},
		{[]string{"exec", "no-such-session", "--", "true"}, 125, "no-such-session"},
	} {
		out, code := e.pdCode(c.argv...)
		if code != c.code || !strings.Contains(out, c.msg) {
			t.Errorf("%v: exit %d %q, want %d and %q", c.argv, code, out, c.code, c.msg)
		}
	}
}

// TestReadmeThirtySeconds runs the README's thirty-second example, line by
// line, on each backend, on a git checkout owned by a user who is not root
// (the interactive attach lines are TestAttachAndDetach's): run -d with
// --workspace, ls, exec git status, sleep && wake, logs, wait --for
// waiting, rm -f.
func TestReadmeThirtySeconds(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			ws := ownedRepo(t)
			name := "demo-" + backend
			e.pd("run", "-d", "--name", name, "--backend", backend, "--workspace", ws)
			if ls := e.pd("ls"); !strings.Contains(ls, name) || !strings.Contains(ls, "running") {
				t.Fatalf("ls:\n%s", ls)
			}
			if st := e.pd("exec", name, "--", "git", "status", "--short"); st != "" {
				t.Fatalf("git status in the box: %q", st)
			}
			e.pd("sleep", name)
			e.pd("wake", name)
			if out := e.pd("logs", name); !strings.Contains(out, "TIME") {
				t.Fatalf("logs: %q", out)
			}
			if out, code := e.pdCode("wait", name, "--for", "waiting", "--timeout", "60s"); code != 0 {
				t.Fatalf("wait --for waiting: %d %q", code, out)
			}
			if out := e.pd("rm", "-f", name); !strings.Contains(out, "is removed") {
				t.Fatalf("rm -f: %q", out)
			}
			if out, _ := exec.Command("git", "-c", "safe.directory=*", "-C", ws, "status", "--porcelain").CombinedOutput(); len(out) != 0 {
				t.Fatalf("the checkout is not clean after the session: %q", out)
			}
		})
	}
}

// commitAsOwner makes ws a git repository of its files, one commit on
// main, everything in it owned by sandboxtest.WorkspaceOwner.
func commitAsOwner(t *testing.T, ws string) {
	t.Helper()
	hostGit(t, ws, "-c", "init.defaultBranch=main", "init", "-q")
	hostGit(t, ws, "add", "-A")
	hostGit(t, ws, "-c", "user.name=Init", "-c", "user.email=init@example.org", "commit", "-q", "-m", "init")
	if err := filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner)
	}); err != nil {
		t.Fatal(err)
	}
}
