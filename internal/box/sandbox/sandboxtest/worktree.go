package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
)

// workspaceGitWorktree (issue 33, item 4): git worktree add works in a
// box on a live workspace (Claude Code's --worktree), its commits reach
// the host as a branch, and its linked worktree still works after the box
// restarts; nothing the box writes under .git/worktrees reaches the host,
// where an entry could make the owner's git delete a directory (gc of an
// entry that is a symlink), write a .git file elsewhere (worktree repair)
// or run a program (a commondir or config.worktree): the owner's gc,
// worktree prune, repair and list run nothing of it and touch nothing,
// and the owner's own linked worktree stays as it was.
func workspaceGitWorktree(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	git := func(args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=o", "-c", "user.email=o@o", "-c", "init.defaultBranch=main", "-c", "safe.directory=*"}, args...)...)
		c.Dir, c.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README")
	git("commit", "-qm", "first")
	// The owner's own linked worktree, outside the workspace.
	ownerWT := filepath.Join(t.TempDir(), "owner-wt")
	git("worktree", "add", "-q", ownerWT, "-b", "owner-branch")
	chownAll(t, dir)
	chownAll(t, ownerWT)
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("the owner's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownAll(t, victim)
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.Chmod(filepath.Dir(marker), 0o777); err != nil {
		t.Fatal(err)
	}
	before := gitTree(t, filepath.Join(dir, ".git"))

	session := uniqueSession("worktree")
	b := StartBox(t, s, session, sandbox.Limits{}, dir)
	g := `git -c user.name=box -c user.email=box@box -c gc.auto=0`
	if out, errs, code := b.Run(t, `set -e; cd /workspace; `+g+` worktree add -q .claude/worktrees/x -b x; cd .claude/worktrees/x
		echo wt > wt.txt; `+g+` add wt.txt; `+g+` commit -qm 'in a linked worktree'; `+g+` worktree list`); code != 0 || !strings.Contains(out, "/workspace/.claude/worktrees/x") {
		t.Fatalf("git worktree add in the box: exit %d\n%s\n%s", code, out, errs)
	}
	// Entries of the kinds that steer the owner's git, as a box would
	// plant them.
	attack := fmt.Sprintf(`cd /workspace/.git/worktrees
ln -s %[1]s evil
mkdir -p bad/logs; echo %[1]s/.git > bad/gitdir; echo ../.. > bad/commondir; echo 'ref: refs/heads/main' > bad/HEAD
printf '[core]\n\tfsmonitor = "touch %[2]s"\n' > bad/config.worktree
ln -s %[1]s/precious bad/logs/HEAD; echo 'locked by the box' > bad/locked
mkdir -p wt; echo 'gitdir: x' > wt/gitdir`, victim, marker)
	if out, errs, code := b.Run(t, attack); code != 0 {
		t.Fatalf("the attack script: exit %d\n%s\n%s", code, out, errs)
	}
	time.Sleep(3 * wsmount.SyncInterval)
	check := func(when string) {
		t.Helper()
		for _, args := range [][]string{{"worktree", "list"}, {"worktree", "prune"}, {"worktree", "repair"}, {"gc", "-q"}, {"branch", "-m", "x", "x2"}, {"branch", "-m", "x2", "x"}, {"status", "--short"}} {
			if out, err := hostGit(t, dir, args...); err != nil {
				t.Errorf("%s: the owner's git %v: %v\n%s", when, args, err, out)
			}
		}
		// The host's worktrees/ is as it was, but for what the owner's own
		// git rewrites in the owner's entry (its index, its reflog). The
		// rest of .git is workspaceGitAllowList's to check; the owner's gc
		// here rewrites some of it.
		after := gitTree(t, filepath.Join(dir, ".git"))
		ownersOwn := func(p string) bool {
			return p == "worktrees/owner-wt/index" || strings.HasPrefix(p, "worktrees/owner-wt/logs")
		}
		for p, v := range after {
			if strings.HasPrefix(p, "worktrees") && before[p] != v && !ownersOwn(p) {
				t.Errorf("%s: the host's .git/%s is now %q, was %q", when, p, v, before[p])
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok && strings.HasPrefix(p, "worktrees") {
				t.Errorf("%s: the host's .git/%s is gone", when, p)
			}
		}
		if b, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(b) != "the owner's\n" {
			t.Fatalf("%s: the owner's file outside the repository: %q %v", when, b, err)
		}
		if _, err := os.Lstat(filepath.Join(victim, ".git")); err == nil {
			t.Fatalf("%s: the owner's git wrote a .git where the box's gitdir pointed", when)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the owner's git ran the box's command", when)
		}
		if out, err := hostGit(t, ownerWT, "status", "--short"); err != nil {
			t.Fatalf("%s: the owner's own linked worktree: %v\n%s", when, err, out)
		}
	}
	check("while the box runs")
	// The box's commit in its linked worktree is the host's branch x.
	if out, err := hostGit(t, dir, "log", "-1", "--format=%s", "x"); err != nil || strings.TrimSpace(out) != "in a linked worktree" {
		t.Fatalf("branch x on the host: %v %q", err, out)
	}

	// A restart keeps the box's linked worktree working.
	ctx := context.Background()
	if err := s.Backend.Stop(ctx, b.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the box stopped")
	if _, err := s.Backend.Start(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	b2 := &Box{Box: b.Box, Client: Connect(t, s.Backend, b.ID)}
	defer b2.Client.Close()
	if out, errs, code := b2.Run(t, `set -e; cd /workspace/.claude/worktrees/x; git status --short; git log -1 --format=%s; git -C /workspace worktree list`); code != 0 ||
		!strings.Contains(out, "in a linked worktree") || !strings.Contains(out, "/workspace/.claude/worktrees/x") {
		t.Fatalf("the linked worktree after a restart: exit %d\n%s\n%s", code, out, errs)
	}
}
