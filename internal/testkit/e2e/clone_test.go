package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// treeState is every file, directory and link under a directory: its kind,
// mode, owner and content's digest, by path.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			v += " " + hex.EncodeToString(h[:])
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changed lists what differs between two treeStates, each path once.
func changed(a, b map[string]string) []string {
	var out []string
	for p, v := range a {
		if b[p] != v {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// allOwners fails t for every file under dir that is not the workspace
// owner's.
func allOwners(t *testing.T, dir string) {
	t.Helper()
	own := fmt.Sprintf(" %d:%d", sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner)
	for p, v := range treeState(t, dir) {
		if !strings.Contains(v, own) {
			t.Errorf("%s is not the owner's: %s", p, v)
		}
	}
}

// onlyFetched fails t for every change to the repository ws since before
// but objects and paddock's remote refs with their reflogs: what a fetch
// may write.
func onlyFetched(t *testing.T, before map[string]string, ws, what string) {
	t.Helper()
	for _, p := range changed(before, treeState(t, ws)) {
		if !strings.HasPrefix(p, ".git/objects/") && !strings.HasPrefix(p, ".git/refs/remotes") && !strings.HasPrefix(p, ".git/logs/refs/remotes") {
			t.Errorf("%s changed %s", what, p)
		}
	}
}

// TestCloneSessions: two sessions with --clone on one host repository of
// a user's, on each backend. One commits through the real Claude Code's
// tools (Read, Edit, Bash from the fake upstream), the other through exec,
// on a branch named at run, with a file git does not track yet beside.
// Until a fetch the host repository, its .git and its working tree, is
// byte for byte as it was; paddock diff shows each change (the untracked
// file too); paddock fetch brings each branch in as
// refs/remotes/paddock/<session>/<branch>, as the repository's owner,
// and nothing else of the repository changes.
func TestCloneSessions(t *testing.T) {
	e := newEnv(t)
	person := gitPerson(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			ws := ownedRepo(t)
			base := strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD"))
			before := treeState(t, ws)
			one, two := "clone-one-"+backend, "clone-two-"+backend

			e.fake.SetSteps([]fakeapi.Step{
				{Name: "Read", Input: map[string]any{"file_path": "/workspace/main.txt"}},
				{Name: "Edit", Input: map[string]any{"file_path": "/workspace/main.txt", "old_string": "hello world", "new_string": "hello clone"}},
				{Name: "Bash", Input: map[string]any{"command": "cd /workspace && git commit -qam 'edit in the clone' && git log -1 --format=%an", "description": "commit the edit"}},
			})
			defer e.fake.SetSteps(nil)
			e.pdAs(person, "run", "-d", "--name", one, "--backend", backend, "--workspace", ws, "--clone")
			defer e.pdRun("rm", "-f", one)
			e.waitScreen(one, promptReady, 30*time.Second)
			e.typeLine(one, fakeapi.StepsKeyword+" edit and commit")
			e.waitScreen(one, fakeapi.StepsDone, 60*time.Second)

			e.pdAs(person, "run", "-d", "--name", two, "--backend", backend, "--workspace", ws, "--clone", "--branch", "feature/two")
			defer e.pdRun("rm", "-f", two)
			e.pd("exec", two, "--", "sh", "-c", "cd /workspace && echo two > two.txt && git add two.txt && git commit -qm 'two by exec' && echo new > untracked.txt")

			// The clones' own branches, from the host's HEAD.
			if got := strings.TrimSpace(e.pd("exec", one, "--", "git", "-C", "/workspace", "rev-parse", "--abbrev-ref", "HEAD")); got != "paddock/"+one {
				t.Fatalf("the first clone's branch: %q", got)
			}
			if got := strings.TrimSpace(e.pd("exec", two, "--", "git", "-C", "/workspace", "log", "--format=%s", "-2")); got != "two by exec\ninit" {
				t.Fatalf("the second clone's history: %q", got)
			}
			if d := changed(before, treeState(t, ws)); len(d) > 0 {
				t.Fatalf("the host repository changed before any fetch: %q", d)
			}

			// hook-fired: the repository's own PostToolUse hook ran in the
			// clone too, and what it wrote is untracked, shown all the same.
			if got := e.pd("diff", one, "--name-only"); got != "hook-fired\nmain.txt\n" {
				t.Fatalf("diff --name-only of %s: %q", one, got)
			}
			if got := e.pd("diff", one); !strings.Contains(got, "-hello world") || !strings.Contains(got, "+hello clone") || strings.Contains(got, "\x1b") {
				t.Fatalf("diff of %s: %q", one, got)
			}
			if got := e.pd("diff", two, "--stat"); !strings.Contains(got, "two.txt") || !strings.Contains(got, "untracked.txt") {
				t.Fatalf("diff --stat of %s: %q", two, got)
			}
			if got := e.pd("diff", two, "--stat", "--no-untracked"); !strings.Contains(got, "two.txt") || strings.Contains(got, "untracked.txt") {
				t.Fatalf("diff --stat --no-untracked of %s: %q", two, got)
			}
			// The diff took the untracked file without adding it to the
			// session's own index.
			if st := e.pd("exec", two, "--", "git", "-C", "/workspace", "status", "--porcelain"); st != "?? untracked.txt\n" {
				t.Fatalf("the second clone's status after its diff: %q", st)
			}

			head1 := strings.TrimSpace(e.pd("exec", one, "--", "git", "-C", "/workspace", "rev-parse", "HEAD"))
			out := e.pd("fetch", one)
			ref1 := "refs/remotes/paddock/" + one + "/paddock/" + one
			if !strings.Contains(out, ref1) || !strings.Contains(out, "1 commit(s) ahead") {
				t.Fatalf("fetch %s said %q", one, out)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "rev-parse", ref1)); got != head1 {
				t.Fatalf("%s on the host is %q, the clone's head %q", ref1, got, head1)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "log", "-1", "--format=%an|%s", ref1)); got != "Ada Owner|edit in the clone" {
				t.Fatalf("the fetched commit: %q", got)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "merge-base", ref1, "HEAD")); got != base {
				t.Fatalf("the fetched branch's base: %q, want %q", got, base)
			}
			// The second has a file it has not committed: its branch comes,
			// and the fetch says the rest did not.
			_, errs, code := e.pdRun("fetch", two)
			if code != 0 || !strings.Contains(errs, "not committed") {
				t.Fatalf("fetch %s: %d %q", two, code, errs)
			}
			ref2 := "refs/remotes/paddock/" + two + "/feature/two"
			if got := strings.TrimSpace(hostGit(t, ws, "log", "-1", "--format=%s", ref2)); got != "two by exec" {
				t.Fatalf("%s: %q", ref2, got)
			}
			// Only objects and the two refs of paddock's (with their reflogs)
			// came in, all the owner's; the working tree, HEAD, the index,
			// config and the owner's branches are as they were.
			onlyFetched(t, before, ws, "the fetch")
			// merge of the first: a fast-forward of the host's checked-out
			// branch, its working tree updated.
			out, _ = e.pdAs(person, "merge", one)
			if !strings.Contains(out, "merged session "+one+" into main: fast-forward") || !strings.Contains(out, "working tree is updated") {
				t.Fatalf("merge %s said %q", one, out)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD")); got != head1 {
				t.Fatalf("the host's HEAD after the merge: %q, want %q", got, head1)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "main.txt")); string(b) != "hello clone\n" {
				t.Fatalf("main.txt after the merge: %q", b)
			}
			if st := hostGit(t, ws, "status", "--porcelain", "--untracked-files=no"); st != "" {
				t.Fatalf("the host's status after the merge: %q", st)
			}
			// The second changes main.txt too, and a Makefile: its diff
			// says first that the host runs the Makefile; its merge
			// conflicts, names the file and changes nothing.
			e.pd("exec", two, "--", "sh", "-c", "cd /workspace && echo 'hello two' > main.txt && printf 'all:\\n\\ttrue\\n' > Makefile && git add main.txt Makefile && git commit -qm 'two edits main.txt'")
			if got := e.pd("diff", two, "--stat"); !strings.HasPrefix(got, "This change touches files") || !strings.Contains(got, "  Makefile: ") || !strings.Contains(got, "main.txt") {
				t.Fatalf("diff --stat of %s: %q", two, got)
			}
			beforeMerge := treeState(t, ws)
			mout, merrs, code := e.pdRun("merge", two)
			if code == 0 || !strings.Contains(merrs, `"main.txt"`) || !strings.Contains(merrs, "conflict") || !strings.Contains(merrs, "as it was") {
				t.Fatalf("merge %s: exit %d %q %q", two, code, mout, merrs)
			}
			onlyFetched(t, beforeMerge, ws, "the merge that conflicted")
			// ls: each branch, how far ahead, whether the host has it (the
			// first has hook-fired, not committed: *); rm
			// of a session with work the host lacks needs -f.
			e.pd("exec", two, "--", "sh", "-c", "cd /workspace && echo more >> two.txt && git commit -qam more")
			e.pd("sleep", two)
			ls := e.pd("ls")
			if !strings.Contains(ls, "paddock/"+one+" +1* merged") || !strings.Contains(ls, "feature/two +3*") {
				t.Fatalf("ls:\n%s", ls)
			}
			if _, errs, code := e.pdRun("rm", two); code == 0 || !strings.Contains(errs, "commits on feature/two (3 beyond its base) that were neither fetched nor merged") || !strings.Contains(errs, "rm -f") {
				t.Fatalf("rm %s: exit %d %q", two, code, errs)
			}
			allOwners(t, ws)
		})
	}
}

// TestCloneHostile: a box that arms its clone against the host (its
// .git/config names an fsmonitor, a filter and hooks that would leave
// marks in the host's /tmp; it commits a symlink to /etc/passwd and a
// .gitattributes naming the filter) gets its branch fetched and merged
// with none of it run and nothing written but the owner's files; diff and
// merge name .gitattributes first. A 2 GB blob of zeros, a small bundle,
// is refused whole by the fetch and the merge, saying why.
func TestCloneHostile(t *testing.T) {
	e := newEnv(t)
	person := gitPerson(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			ws := ownedRepo(t)
			name := "hostile-" + backend
			mark := filepath.Join(os.TempDir(), "paddock-hostile-"+backend)
			t.Cleanup(func() {
				m, _ := filepath.Glob(mark + "*")
				for _, p := range m {
					os.Remove(p)
				}
			})
			passwd, err := os.ReadFile("/etc/passwd")
			if err != nil {
				t.Fatal(err)
			}
			e.pdAs(person, "run", "-d", "--name", name, "--backend", backend, "--workspace", ws, "--clone")
			defer e.pdRun("rm", "-f", name)
			e.waitScreen(name, promptReady, 30*time.Second)
			arm := `set -e; cd /workspace
m=` + mark + `
git config core.fsmonitor "touch $m-fsmonitor"
git config filter.evil.smudge "touch $m-smudge; cat"
git config filter.evil.clean "touch $m-clean; cat"
git config merge.evil.driver "touch $m-merge"
for h in post-checkout post-merge reference-transaction pre-commit post-index-change; do
	printf '#!/bin/sh\ntouch %s-hook-%s\n' "$m" "$h" > .git/hooks/$h; chmod +x .git/hooks/$h
done
echo '* filter=evil merge=evil' > .gitattributes
ln -s /etc/passwd passwd
echo work > work.txt
git add .gitattributes passwd work.txt
git -c core.hooksPath=/dev/null commit -qm 'armed'`
			e.pd("exec", name, "--", "sh", "-c", arm)
			if got := e.pd("diff", name, "--stat"); !strings.HasPrefix(got, "This change touches files") || !strings.Contains(got, "  .gitattributes: ") {
				t.Fatalf("diff --stat: %q", got)
			}
			out, errs := e.pdAs(person, "merge", name)
			if !strings.Contains(out, "fast-forward") || !strings.Contains(errs, ".gitattributes: ") {
				t.Fatalf("merge: %q %q", out, errs)
			}
			if m, _ := filepath.Glob(mark + "*"); len(m) > 0 {
				t.Fatalf("the box's programs ran on the host: %v", m)
			}
			if l, err := os.Readlink(filepath.Join(ws, "passwd")); err != nil || l != "/etc/passwd" {
				t.Fatalf("passwd in the host's tree: %q %v", l, err)
			}
			if b, _ := os.ReadFile("/etc/passwd"); string(b) != string(passwd) {
				t.Fatal("/etc/passwd changed")
			}
			allOwners(t, ws)
			if cfg, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); strings.Contains(string(cfg), "evil") || strings.Contains(string(cfg), "fsmonitor") {
				t.Fatalf("the box's config reached the host's: %s", cfg)
			}

			// Two gigabytes of zeros: a bundle of a few megabytes.
			// (Added without the box's own filter, which would read it all
			// into memory, and removed from the clone's tree after.)
			e.pd("exec", name, "--", "sh", "-c", "set -e; cd /workspace && truncate -s 2G big.bin && echo 'big.bin -filter' >> .git/info/attributes && "+
				"git add big.bin && git -c core.hooksPath=/dev/null commit -qm big && rm big.bin")
			ref := "refs/remotes/paddock/" + name + "/paddock/" + name
			before := strings.TrimSpace(hostGit(t, ws, "rev-parse", ref))
			head := strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD"))
			for _, verb := range []string{"fetch", "merge"} {
				_, errs, code := e.pdRun(verb, name)
				if code == 0 || !strings.Contains(errs, "a blob of 2147483648 bytes") || !strings.Contains(errs, "nothing was imported") {
					t.Fatalf("%s with a 2 GB blob: exit %d %q", verb, code, errs)
				}
			}
			if got := strings.TrimSpace(hostGit(t, ws, "rev-parse", ref)); got != before {
				t.Fatalf("%s moved to %s", ref, got)
			}
			if got := strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD")); got != head {
				t.Fatalf("HEAD moved to %s", got)
			}
			if _, err := os.Lstat(filepath.Join(ws, "big.bin")); err == nil {
				t.Fatal("big.bin reached the host's tree")
			}
		})
	}
}

// TestWorktreeFromClaude: the real CLI's Bash tool runs git worktree add
// inside /workspace (where Claude Code's --worktree puts them), commits
// there, and it works, on a live workspace and in a clone; on the live
// workspace the commit is the host's branch at once, and the host's
// .git/worktrees holds nothing of the box's.
func TestWorktreeFromClaude(t *testing.T) {
	e := newEnv(t)
	person := gitPerson(t)
	for _, backend := range []string{"local", "docker"} {
		for _, mode := range []string{"live", "clone"} {
			t.Run(backend+"-"+mode, func(t *testing.T) {
				e.t = t
				ws := ownedRepo(t)
				name := "wt-" + mode + "-" + backend
				e.fake.SetSteps([]fakeapi.Step{
					{Name: "Bash", Input: map[string]any{"command": "cd /workspace && git worktree add -q .claude/worktrees/side -b side && cd .claude/worktrees/side && " +
						"echo side > side.txt && git add side.txt && git commit -qm 'in a worktree' && git worktree list", "description": "a worktree"}},
				})
				defer e.fake.SetSteps(nil)
				args := []string{"run", "-d", "--name", name, "--backend", backend, "--workspace", ws}
				if mode == "clone" {
					args = append(args, "--clone")
				}
				e.pdAs(person, args...)
				defer e.pdRun("rm", "-f", name)
				e.waitScreen(name, promptReady, 30*time.Second)
				e.typeLine(name, fakeapi.StepsKeyword+" make a worktree")
				e.waitScreen(name, fakeapi.StepsDone, 60*time.Second)
				got := strings.TrimSpace(e.pd("exec", name, "--", "git", "-C", "/workspace/.claude/worktrees/side", "log", "-1", "--format=%s"))
				if got != "in a worktree" {
					t.Fatalf("the worktree's commit in the box: %q", got)
				}
				if _, err := os.Lstat(filepath.Join(ws, ".git", "worktrees")); err == nil {
					t.Fatal("the host's .git/worktrees exists: the box's entry reached the host")
				}
				if mode == "live" {
					if got := strings.TrimSpace(hostGit(t, ws, "log", "-1", "--format=%s", "side")); got != "in a worktree" {
						t.Fatalf("branch side on the host: %q", got)
					}
				}
			})
		}
	}
}
