package wsmount

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// Ids of the test: the workspace's owner, and the host uid a box writes as.
const (
	ownerUID = 4321
	boxUID   = 200777
)

// newWorkspace makes a workspace owned by ownerUID with a git directory
// (hooks, config) and a file of root's.
func newWorkspace(t *testing.T, git bool) string {
	t.Helper()
	ws := filepath.Join(testenv.TraversableTempDir(t), "ws")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "src", "main.go"), []byte("package main\n"), 0o644))
	if git {
		must(os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
		must(os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	}
	must(filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, ownerUID, ownerUID)
	}))
	must(os.WriteFile(filepath.Join(ws, "roots"), []byte("root's\n"), 0o644))
	return ws
}

// asBox runs a shell script as the box's host uid and returns its output.
func asBox(t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: boxUID, Gid: boxUID}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func owner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

func mounted(t *testing.T, p string) bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(mi), " "+p+" ")
}

func TestMount(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, true)
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID}
	own, err := Mount(o)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmount(o.Target, o.State)
	if own != (Owner{ownerUID, ownerUID}) {
		t.Fatalf("owner %+v", own)
	}
	m := o.Target
	// The box writes, edits and makes directories; all of it is the owner's on disk.
	if out, code := asBox(t, `set -e; cd `+m+`; echo new > new.txt; echo edit >> src/main.go; mkdir -p pkg/sub; echo x > pkg/sub/f; stat -c %u src/main.go`); code != 0 || out != "200777\n" {
		t.Fatalf("box writes: %d %q", code, out)
	}
	for _, p := range []string{"new.txt", "src/main.go", "pkg", "pkg/sub/f"} {
		if u, g := owner(t, filepath.Join(ws, p)); u != ownerUID || g != ownerUID {
			t.Errorf("%s is %d:%d on the host, want the owner's %d", p, u, g, ownerUID)
		}
	}
	// Root's file stays root's and the box cannot change it.
	if out, code := asBox(t, `echo x >> `+m+`/roots`); code == 0 {
		t.Errorf("the box wrote a file of root's: %q", out)
	}
	if u, _ := owner(t, filepath.Join(ws, "roots")); u != 0 {
		t.Errorf("roots now belongs to %d", u)
	}
	// Host code: read-only whether it existed or not; .git cannot be moved.
	for _, script := range []string{
		`echo evil > ` + m + `/.git/hooks/pre-commit`,
		`echo '[core] hooksPath=/tmp' >> ` + m + `/.git/config`,
		`mkdir -p ` + m + `/.vscode && echo '{}' > ` + m + `/.vscode/tasks.json`,
		`echo 'echo pwned' > ` + m + `/.envrc`,
		`echo '[submodule "x"]' > ` + m + `/.gitmodules`,
		`mv ` + m + `/.git ` + m + `/.git-old`,
		`rm -rf ` + m + `/.git`,
		`mv ` + m + `/.git/hooks ` + m + `/.git/h2`,
		`mkdir ` + m + `/.git/modules/x`,
	} {
		if out, code := asBox(t, script); code == 0 {
			t.Errorf("the box could: %s (%q)", script, out)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a hook was written")
	}
	// The rest of .git stays writable: git works.
	if out, code := asBox(t, `echo ref > `+m+`/.git/HEAD && mkdir -p `+m+`/.git/objects/ab`); code != 0 {
		t.Errorf(".git itself is not writable: %q", out)
	}
	// Placeholders exist while mounted, and go with Unmount.
	if fi, err := os.Stat(filepath.Join(ws, ".vscode")); err != nil || !fi.IsDir() {
		t.Fatalf("no placeholder for .vscode: %v", err)
	}
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	if mounted(t, o.Target) {
		t.Fatal("still mounted after Unmount")
	}
	for _, p := range []string{".vscode", ".idea", ".envrc", ".gitmodules", ".devcontainer", ".git/modules", ".git/worktrees", ".git/config.worktree"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("placeholder %s left behind", p)
		}
	}
	for _, p := range []string{".git/hooks", ".git/config", "new.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
}

// TestMountNoGit: without a repository, .git is a read-only placeholder:
// the box cannot make one the host's git would later use.
func TestMountNoGit(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, false)
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	defer Unmount(o.Target, o.State)
	if out, code := asBox(t, `cd `+o.Target+` && mkdir .git/objects || echo x > .git/HEAD`); code == 0 {
		t.Fatalf("the box made a .git: %q", out)
	}
	if out, code := asBox(t, `echo ok > `+o.Target+`/file`); code != 0 {
		t.Fatalf("the workspace is not writable: %q", out)
	}
	Unmount(o.Target, o.State)
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		t.Fatal("the .git placeholder is left")
	}
}

// TestMountUnsafeHostCode: the explicit opt-out leaves host code writable.
func TestMountUnsafeHostCode(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, true)
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID, UnsafeHostCode: true}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	defer Unmount(o.Target, o.State)
	if out, code := asBox(t, `echo hook > `+o.Target+`/.git/hooks/pre-commit`); code != 0 {
		t.Fatalf("--unsafe-host-code and still read-only: %q", out)
	}
}

func TestRefused(t *testing.T) {
	testenv.Root(t)
	root := filepath.Join(testenv.TraversableTempDir(t), "rootws")
	os.Mkdir(root, 0o755)
	if _, _, err := Check(root); !errors.Is(err, ErrRootOwned) || !errdefs.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("root-owned: %v", err)
	}
	dir := testenv.TraversableTempDir(t)
	if _, err := Mount(Options{Source: root, Target: filepath.Join(dir, "m"), State: filepath.Join(dir, "s"), BoxUID: boxUID, BoxGID: boxUID}); !errors.Is(err, ErrRootOwned) {
		t.Fatalf("Mount of a root-owned workspace: %v", err)
	}
	if mounted(t, filepath.Join(dir, "m")) {
		t.Fatal("mounted anyway")
	}
	ws := newWorkspace(t, true)
	link := filepath.Join(dir, "link")
	os.Symlink(ws, link)
	for _, c := range []struct{ path, want string }{
		{link, "is a symlink"},
		{filepath.Join(dir, "nope"), "does not exist"},
		{filepath.Join(ws, "src", "main.go"), "not a directory"},
		{"relative", "absolute"},
	} {
		if _, _, err := Check(c.path); err == nil || !strings.Contains(err.Error(), c.want) || !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Check(%s): %v, want %q", c.path, err, c.want)
		}
	}
	if real, own, err := Check(ws); err != nil || real != ws || own.UID != ownerUID {
		t.Fatalf("Check of a good workspace: %q %+v %v", real, own, err)
	}
	// A symlink at a host-code path cannot be covered: refused.
	os.Symlink("src", filepath.Join(ws, ".vscode"))
	if _, err := Mount(Options{Source: ws, Target: filepath.Join(dir, "m"), State: filepath.Join(dir, "s"), BoxUID: boxUID, BoxGID: boxUID}); err == nil || !strings.Contains(err.Error(), ".vscode is a symlink") {
		t.Fatalf("symlinked .vscode: %v", err)
	}
	if mounted(t, filepath.Join(dir, "m")) {
		t.Fatal("mounted anyway")
	}
}

// TestTwoBoxesOneWorkspace: the placeholders stay while any box uses the
// workspace: the first to stop must not lift the second's protection.
func TestTwoBoxesOneWorkspace(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, true)
	dir := testenv.TraversableTempDir(t)
	a := Options{Source: ws, Target: filepath.Join(dir, "a"), State: filepath.Join(dir, "a.json"), BoxUID: boxUID, BoxGID: boxUID}
	b := a
	b.Target, b.State = filepath.Join(dir, "b"), filepath.Join(dir, "b.json")
	for _, o := range []Options{a, b} {
		if _, err := Mount(o); err != nil {
			t.Fatal(err)
		}
	}
	defer Unmount(b.Target, b.State)
	if err := Unmount(a.Target, a.State); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".vscode")); err != nil {
		t.Fatalf("the first box's stop removed a placeholder the second relies on: %v", err)
	}
	if out, code := asBox(t, `mkdir -p `+b.Target+`/.vscode && echo x > `+b.Target+`/.vscode/tasks.json`); code == 0 {
		t.Fatalf("the second box could write .vscode after the first stopped: %q", out)
	}
	if err := Unmount(b.Target, b.State); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".vscode")); err == nil {
		t.Fatal("the placeholder is left after the last box")
	}
}

// BenchmarkMount is a box start's share of a host workspace: Mount (user
// namespace, idmapped clone, host code read-only, placeholders). The
// stop's share, Unmount, is BenchmarkUnmount.
func BenchmarkMount(b *testing.B) { benchMount(b, true) }

// BenchmarkUnmount is a box stop's share: the lazy unmount of the view and
// its protections, and the placeholders removed.
func BenchmarkUnmount(b *testing.B) { benchMount(b, false) }

func benchMount(b *testing.B, mount bool) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	ws := filepath.Join(b.TempDir(), "ws")
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644)
	filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, ownerUID, ownerUID) })
	dir := b.TempDir()
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID}
	for b.Loop() {
		if !mount {
			b.StopTimer()
		}
		if _, err := Mount(o); err != nil {
			b.Fatal(err)
		}
		if mount {
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		if err := Unmount(o.Target, o.State); err != nil {
			b.Fatal(err)
		}
		if mount {
			b.StartTimer()
		}
	}
}

// TestMountRefusesAWorkspaceThatChangedHands (issue 31, item 7): a
// directory that belongs to someone else at a later mount than at the
// box's making (a colleague's renamed into the path, in a group-writable
// parent) is refused, and nothing stays mounted.
func TestMountRefusesAWorkspaceThatChangedHands(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, true)
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID, OwnerUID: ownerUID}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	// The colleague's directory, renamed into the path.
	colleague := filepath.Join(dir, "colleague")
	if err := os.Mkdir(colleague, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(colleague, ownerUID+1, ownerUID+1); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws, ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(colleague, ws); err != nil {
		t.Fatal(err)
	}
	_, err := Mount(o)
	if !errors.Is(err, ErrChangedHands) || !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "now belongs to uid 4322") {
		t.Fatalf("a workspace that changed hands: %v", err)
	}
	if mounted(t, o.Target) {
		t.Fatal("mounted after the refusal")
	}
}

// ownerGit runs git in dir as the workspace's owner.
func ownerGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=o", "GIT_AUTHOR_EMAIL=o@o", "GIT_COMMITTER_NAME=o", "GIT_COMMITTER_EMAIL=o@o"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ownerUID, Gid: ownerUID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestMountOrigin: the view of a repository's git directory that a clone
// box borrows its history from shows the box's uid, holds the
// repository's objects, is read-only even for root, and goes with
// Unmount; a workspace whose .git is not a directory is refused.
func TestMountOrigin(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "git")
	ws := newWorkspace(t, false)
	ownerGit(t, ws, "init", "-q", "-b", "main")
	ownerGit(t, ws, "add", "src")
	ownerGit(t, ws, "commit", "-qm", "first")
	head := ownerGit(t, ws, "rev-parse", "HEAD")
	// A credential in the repository's config, as a token in a remote's URL.
	ownerGit(t, ws, "remote", "add", "origin", "https://x-access-token:ghs_SECRET@example.com/r.git")
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "origin"), State: filepath.Join(dir, "origin.json"), BoxUID: boxUID, BoxGID: boxUID, OwnerUID: ownerUID}
	own, err := MountOrigin(o)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmount(o.Target, o.State)
	if own != (Owner{ownerUID, ownerUID}) {
		t.Fatalf("owner %+v", own)
	}
	if u, g := owner(t, o.Target); u != boxUID || g != boxUID {
		t.Fatalf("the view shows %d:%d, not the box's %d", u, g, boxUID)
	}
	if u, _ := owner(t, filepath.Join(o.Target, "HEAD")); u != boxUID {
		t.Fatalf("the view's HEAD shows uid %d, not the box's %d", u, boxUID)
	}
	// Not the repository's config: the box reads a blank one.
	if b, err := os.ReadFile(filepath.Join(o.Target, "config")); err != nil || strings.Contains(string(b), "SECRET") || string(b) != originConfig {
		t.Fatalf("the view's config: %q %v", b, err)
	}
	// The git directory, not the worktree.
	if _, err := os.Lstat(filepath.Join(o.Target, "src")); err == nil {
		t.Fatal("the worktree is in the view")
	}
	// The box's git reads the history as its own (no safe.directory).
	out, code := asBox(t, `HOME=/nonexistent git --git-dir=`+o.Target+` log --format=%H:%s`)
	if code != 0 || strings.TrimSpace(out) != head+":first" {
		t.Fatalf("git log in the view: %d %q", code, out)
	}
	// Read-only, for root too: no file made, changed, removed or renamed.
	for name, write := range map[string]func() error{
		"create": func() error { return os.WriteFile(filepath.Join(o.Target, "new"), nil, 0o644) },
		"append": func() error {
			f, err := os.OpenFile(filepath.Join(o.Target, "config"), os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				f.Close()
			}
			return err
		},
		"mkdir":  func() error { return os.Mkdir(filepath.Join(o.Target, "objects", "zz"), 0o755) },
		"remove": func() error { return os.Remove(filepath.Join(o.Target, "HEAD")) },
		"rename": func() error {
			return os.Rename(filepath.Join(o.Target, "config"), filepath.Join(o.Target, "config.old"))
		},
		"chmod": func() error { return os.Chmod(filepath.Join(o.Target, "hooks"), 0o777) },
	} {
		if err := write(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in the view as root: %v, want EROFS", name, err)
		}
	}
	if out, code := asBox(t, `echo x >> `+o.Target+`/config || touch `+o.Target+`/objects/info/alternates`); code == 0 {
		t.Errorf("the box wrote the view: %q", out)
	}
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	if mounted(t, o.Target) {
		t.Fatal("still mounted after Unmount")
	}
	if out := ownerGit(t, ws, "status", "--porcelain", "--untracked-files=no"); out != "" {
		t.Fatalf("the repository changed: %q", out)
	}

	// A .git that is not a directory: a worktree's pointer, a symlink to
	// the real one, none at all.
	for name, plant := range map[string]func(ws string) error{
		"gitdir file": func(ws string) error {
			return os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: /elsewhere/.git/worktrees/w\n"), 0o644)
		},
		"symlink": func(ws string) error {
			if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "real.git")); err != nil {
				return err
			}
			return os.Symlink("real.git", filepath.Join(ws, ".git"))
		},
		"missing": func(ws string) error { return os.RemoveAll(filepath.Join(ws, ".git")) },
	} {
		bad := newWorkspace(t, true)
		if name == "gitdir file" {
			os.RemoveAll(filepath.Join(bad, ".git"))
		}
		if err := plant(bad); err != nil {
			t.Fatal(err)
		}
		o := Options{Source: bad, Target: filepath.Join(dir, "bad"), State: filepath.Join(dir, "bad.json"), BoxUID: boxUID, BoxGID: boxUID}
		if _, err := MountOrigin(o); !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if mounted(t, o.Target) {
			t.Fatalf("%s: mounted anyway", name)
		}
	}
}

// TestMountWorktrees: the box's .git/worktrees is the session's: written
// by the box, never in the host's .git, kept across an unmount and a new
// mount (the box's restart), gone with Forget.
func TestMountWorktrees(t *testing.T) {
	testenv.Root(t)
	ws := newWorkspace(t, true)
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	if out, code := asBox(t, `set -e; mkdir -p `+o.Target+`/.git/worktrees/x; echo /workspace/wt/.git > `+o.Target+`/.git/worktrees/x/gitdir`); code != 0 {
		t.Fatalf("the box cannot write its .git/worktrees: %q", out)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "worktrees", "x")); err == nil {
		t.Fatal("the box's worktree entry is in the host's .git")
	}
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	if out, code := asBox(t, `cat `+o.Target+`/.git/worktrees/x/gitdir`); code != 0 || out != "/workspace/wt/.git\n" {
		t.Fatalf("after a new mount, the box's entry: %d %q", code, out)
	}
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	if err := Forget(o.State); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(worktreesOf(o.State)); err == nil {
		t.Fatal("Forget left the session's .git/worktrees")
	}
}

// TestMountRootCreates: a gVisor sentry makes a box's file as root, then
// gives it to the box user. Without RootCreates root's create fails
// (EOVERFLOW: root has no mapping in the idmap); with it, the file is
// TransientUID's on disk until the chown, then the owner's, as a box's
// file always is. Root's view maps only that: the owner's other files
// stay the box user's, root's own still nobody's.
func TestMountRootCreates(t *testing.T) {
	testenv.Root(t)
	for _, rootCreates := range []bool{false, true} {
		ws := newWorkspace(t, false)
		dir := testenv.TraversableTempDir(t)
		o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID, RootCreates: rootCreates}
		if _, err := Mount(o); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(o.Target, "src", "made-by-root")
		err := os.WriteFile(p, []byte("x"), 0o644)
		if !rootCreates {
			if !errors.Is(err, syscall.EOVERFLOW) {
				t.Errorf("root created a file through a mount without RootCreates: %v", err)
			}
			Unmount(o.Target, o.State)
			continue
		}
		if err != nil {
			t.Fatalf("RootCreates: %v", err)
		}
		if u, g := owner(t, filepath.Join(ws, "src", "made-by-root")); u != TransientUID || g != TransientGID {
			t.Errorf("before its chown the file is %d:%d on disk, want %d", u, g, TransientUID)
		}
		if err := os.Lchown(p, boxUID, boxUID); err != nil {
			t.Fatal(err)
		}
		if u, g := owner(t, filepath.Join(ws, "src", "made-by-root")); u != ownerUID || g != ownerUID {
			t.Errorf("given to the box user, the file is %d:%d on disk, want the owner's %d", u, g, ownerUID)
		}
		if u, _ := owner(t, filepath.Join(o.Target, "src", "main.go")); u != boxUID {
			t.Errorf("the owner's file shows as %d, want the box's %d", u, boxUID)
		}
		if u, _ := owner(t, filepath.Join(o.Target, "roots")); u != 65534 {
			t.Errorf("root's own file shows as %d through the mount, want nobody", u)
		}
		Unmount(o.Target, o.State)
	}
}
