package sandboxtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
)

// GitReadsStatic lists, from gitrepository-layout(5) and git's source, the
// paths of a git directory git reads for how to behave (not data): the
// box must never create or change any of them on the host.
var GitReadsStatic = []string{
	"config", "config.worktree", "commondir", "gitdir", "description", "shallow",
	"hooks/pre-commit", "hooks/post-checkout", "hooks/fsmonitor-watchman", "hooks/post-index-change", "hooks/reference-transaction",
	"info/exclude", "info/attributes", "info/grafts", "info/sparse-checkout", "info/refs",
	"branches/origin", "remotes/origin",
	"objects/info/alternates", "objects/info/http-alternates",
	"modules/sub/config", "modules/sub/hooks/pre-commit",
	"worktrees/wt/gitdir", "worktrees/wt/commondir", "worktrees/wt/config.worktree", "worktrees/wt/HEAD", "worktrees/wt/locked",
	"rebase-merge/git-rebase-todo", "rebase-apply/patch", "sequencer/todo", "sequencer/opts",
	"common/config", "c/config", "c/hooks/pre-commit",
}

// gitData reports whether rel, a path under a git directory, is data the
// box may change on the host: GitShared's directories (but objects/info)
// and the synced files. Not logs: the reflogs are the box's own.
func gitData(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	if strings.HasPrefix(rel, "objects/info") {
		return false
	}
	switch first {
	case "objects", "refs", "lfs":
		return true
	case "HEAD", "index", "packed-refs", "ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG", "MERGE_HEAD", "MERGE_MSG",
		"MERGE_MODE", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD":
		return rel == first
	}
	return false
}

// GitReads returns every path under repo/.git that the host's git looks at
// (opens, stats or checks, found or not) while it runs status, diff, log,
// add, commit, branch, checkout, fetch from itself, gc and worktree list,
// as strace sees it, with GitReadsStatic; data (gitData) and lock files
// left out. It needs strace (scripts/deps.sh installs it).
func GitReads(t testing.TB, repo string) []string {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("strace is needed to list what git reads (scripts/deps.sh installs it): %v", err)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	script := `set -e
g() { git -c user.name=t -c user.email=t@t -c safe.directory='*' "$@"; }
g status >/dev/null; g diff >/dev/null; g log --oneline >/dev/null
echo more >> README; g add README; g commit -qm traced; g branch traced-b; g checkout -q traced-b; g checkout -q -
g fetch -q . traced-b; g gc -q; g worktree list >/dev/null; g status >/dev/null`
	cmd := exec.Command("strace", "-f", "-qq", "-e", "trace=%file", "-o", trace, "sh", "-c", script)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git under strace: %v\n%s", err, out)
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quoted := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	gitDir := filepath.Join(repo, ".git")
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, m := range quoted.FindAllStringSubmatch(sc.Text(), -1) {
			p := m[1]
			if !filepath.IsAbs(p) {
				p = filepath.Join(repo, p)
			}
			rel, err := filepath.Rel(gitDir, filepath.Clean(p))
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			seen[rel] = true
		}
	}
	for _, p := range GitReadsStatic {
		seen[p] = true
	}
	var out []string
	for p := range seen {
		if gitData(p) || strings.HasSuffix(p, ".lock") {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	if !slices.Contains(out, "commondir") || !slices.Contains(out, "config") {
		t.Fatalf("strace saw no commondir or config read: the trace is not what this test expects: %v", out)
	}
	return out
}

// gitTree is a snapshot of a git directory: every path that is not data
// (gitData), with its type and, for files, a hash of its content.
func gitTree(t testing.TB, gitDir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(gitDir, p)
		switch {
		case rel == "." || rel == "objects":
			return nil // objects/info is not data: walk on to it
		case gitData(rel) && d.IsDir():
			return filepath.SkipDir
		case gitData(rel):
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %x", sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostGit runs git in repo as the workspace's owner, with the owner's
// view: no -c of the test's, so the repository's own config applies.
func hostGit(t testing.TB, repo string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + repo + "/..", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=o", "GIT_AUTHOR_EMAIL=o@o", "GIT_COMMITTER_NAME=o", "GIT_COMMITTER_EMAIL=o@o"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: WorkspaceOwner, Gid: WorkspaceOwner}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// workspaceGitAllowList (issue 31, item 1): in a box, git works on the
// workspace's repository (commit, branch, checkout, pack-refs, gc) and
// what it did is the host's, while nothing the host's git reads for how to
// behave can be created or changed from the box: every path git reads
// (GitReads: traced on the host, and the known list) is tried from the box,
// with the attack as it was found (a commondir pointing at a copy with
// core.fsmonitor), and afterwards the host's git directory is the same in
// everything but data, and the owner's git status runs nothing of the
// box's.
func workspaceGitAllowList(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	must := func(out []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	git := func(args ...string) *exec.Cmd {
		c := exec.Command("git", append([]string{"-c", "user.name=o", "-c", "user.email=o@o", "-c", "init.defaultBranch=main", "-c", "safe.directory=*"}, args...)...)
		c.Dir, c.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}
		return c
	}
	must(git("init", "-q").CombinedOutput())
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(git("add", "README").CombinedOutput())
	must(git("commit", "-qm", "first").CombinedOutput())
	reads := GitReads(t, dir)
	chownAll(t, dir)
	before := gitTree(t, filepath.Join(dir, ".git"))
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.Chmod(filepath.Dir(marker), 0o777); err != nil {
		t.Fatal(err)
	}

	b := StartBox(t, s, uniqueSession("gitallow"), sandbox.Limits{}, dir)
	// Git works in the box, on the host's repository.
	g := `git -c user.name=box -c user.email=box@box -c gc.auto=0`
	if out, errs, code := b.Run(t, `set -e; cd /workspace; `+g+` status --short; echo box >> README; `+g+` commit -qam 'from the box';
		`+g+` checkout -qb side; echo side > side.txt; `+g+` add side.txt; `+g+` commit -qm side; `+g+` checkout -q main;
		`+g+` branch gone; `+g+` pack-refs --all; `+g+` branch -D gone; `+g+` gc -q; `+g+` log --oneline | head -3`); code != 0 || !strings.Contains(out, "from the box") {
		t.Fatalf("git in the box: exit %d\n%s\n%s", code, out, errs)
	}
	// Every path git reads, tried: made, appended to, replaced.
	var script strings.Builder
	script.WriteString("cd /workspace/.git\n")
	for _, p := range reads {
		fmt.Fprintf(&script, "mkdir -p %q 2>/dev/null; printf '[core]\\n\\tfsmonitor = touch %s\\n' >> %q 2>/dev/null; ln -sf /etc/passwd %q.l 2>/dev/null; mv -f %q.l %q 2>/dev/null\n",
			filepath.Dir(p), marker, p, p, p, p)
	}
	// The attack as it was found: a copy of the git directory that shares
	// objects and refs, with core.fsmonitor in its config, named by
	// commondir; and a hook in it.
	fmt.Fprintf(&script, `mkdir -p c/hooks; ln -s ../objects c/objects; ln -s ../refs c/refs; cp HEAD c/HEAD; cp config c/config
printf '[core]\n\tfsmonitor = "touch %[1]s"\n\thooksPath = /workspace/h\n' >> c/config
printf '#!/bin/sh\ntouch %[1]s\n' > c/hooks/pre-commit; chmod +x c/hooks/pre-commit; echo c > commondir
mkdir -p /workspace/h; printf '#!/bin/sh\ntouch %[1]s\n' > /workspace/h/pre-commit; chmod +x /workspace/h/pre-commit
mkdir newdir; echo x > newfile; mv config config.old; mv hooks hooks.old; mv objects/info objects/info.old
echo x >> objects/info/alternates; true
`, marker)
	if out, errs, code := b.Run(t, script.String()); code != 0 {
		t.Fatalf("the attack script: exit %d\n%s\n%s", code, out, errs)
	}
	// While the box runs, and after it stopped (the last carry across).
	check := func(when string) {
		t.Helper()
		after := gitTree(t, filepath.Join(dir, ".git"))
		for p, v := range after {
			if before[p] != v {
				t.Errorf("%s: the host's .git/%s is now %q, was %q", when, p, v, before[p])
			}
		}
		for p, v := range before {
			if _, ok := after[p]; !ok {
				t.Errorf("%s: the host's .git/%s (%s) is gone", when, p, v)
			}
		}
		for _, args := range [][]string{{"status", "--short"}, {"commit", "-qm", "owner", "--allow-empty"}, {"log", "--oneline"}} {
			if out, err := hostGit(t, dir, args...); err != nil {
				t.Errorf("%s: the owner's git %v: %v\n%s", when, args, err, out)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the owner's git ran the box's command", when)
		}
		before = gitTree(t, filepath.Join(dir, ".git")) // the owner's commit changed COMMIT_EDITMSG only
	}
	time.Sleep(3 * wsmount.SyncInterval)
	check("while the box runs")
	if err := s.Backend.Stop(context.Background(), b.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the box stopped")
	// The box's work is the host's: its commits on main and side, HEAD on
	// main, and the owner's status clean but for the owner's own commit.
	out, err := hostGit(t, dir, "log", "--format=%s", "main")
	if err != nil || !strings.Contains(out, "from the box") {
		t.Fatalf("the box's commit is not on the host's main: %v\n%s", err, out)
	}
	if out, err := hostGit(t, dir, "log", "--format=%s", "side"); err != nil || !strings.Contains(out, "side") {
		t.Fatalf("the box's branch side: %v\n%s", err, out)
	}
	if out, err := hostGit(t, dir, "branch", "--list", "gone"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("the branch the box deleted after packing refs: %v %q", err, out)
	}
	if out, err := hostGit(t, dir, "status", "--porcelain", "--untracked-files=no"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("the owner's status after the box's commits: %v %q", err, out)
	}
}
