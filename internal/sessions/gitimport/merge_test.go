package gitimport

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
)

// fetched commits name with content in the box and imports the box's
// branch as session s1; it returns the ref.
func (f *fixture) fetched(files ...string) string {
	f.t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		f.write(f.box, files[i], files[i+1])
		f.git(f.box, "add", files[i])
	}
	f.git(f.box, "commit", "-qm", "work of the session")
	if _, err := Import(context.Background(), f.opts("s1"), strings.NewReader(string(f.bundle("main..paddock/x")))); err != nil {
		f.t.Fatal(err)
	}
	return "refs/remotes/paddock/s1/paddock/x"
}

// hostCommit commits name with content on the host's checked-out branch,
// as the test, then gives the repository back to its owner.
func (f *fixture) hostCommit(name, content string) string {
	f.t.Helper()
	f.write(f.host, name, content)
	f.git(f.host, "add", name)
	f.git(f.host, "commit", "-qm", "host: "+name)
	f.chown()
	return f.git(f.host, "rev-parse", "HEAD")
}

func (f *fixture) mergeOpts(ref string) MergeOptions {
	return MergeOptions{Options: f.opts("s1"), Ref: ref, Identity: gitident.Identity{Name: "Owner", Email: "owner@example.org"}}
}

// merge merges and, when it fails, checks that nothing at all changed in
// the host's working tree and git directory but the files of own.
func (f *fixture) merge(o MergeOptions, own ...string) (MergeResult, error) {
	f.t.Helper()
	before := snapshot(f.t, f.host)
	res, err := Merge(context.Background(), o)
	if err != nil {
		diffSnapshots(f.t, before, snapshot(f.t, f.host), own)
		noQuarantine(f.t, f.gitDir)
	}
	return res, err
}

// clean says the host's working tree and index match HEAD.
func (f *fixture) clean() bool {
	_, err := f.gitIn(f.host, nil, "-c", "core.fsmonitor=false", "--no-optional-locks", "diff", "--quiet", "HEAD")
	return err == nil
}

func TestMergeFastForward(t *testing.T) {
	f := newFixture(t)
	ref := f.fetched("new.txt", "from the box\n", "README", "hello, edited\n")
	res, err := f.merge(f.mergeOpts(ref))
	if err != nil {
		t.Fatal(err)
	}
	tip := f.hostRef(ref)
	if res.Kind != MergeFastForward || res.Old != f.base || res.New != tip || !res.WorkTree || res.Into != "main" {
		t.Fatalf("result %+v", res)
	}
	if !slices.Equal(res.Changed, []string{"README", "new.txt"}) {
		t.Errorf("changed %q", res.Changed)
	}
	if got := f.hostRef("refs/heads/main"); got != tip {
		t.Errorf("main is %s, want %s", got, tip)
	}
	if b, _ := os.ReadFile(filepath.Join(f.host, "new.txt")); string(b) != "from the box\n" || !f.clean() {
		t.Errorf("working tree: new.txt %q, clean %v", b, f.clean())
	}
	f.checkOwned()
	noQuarantine(t, f.gitDir)
	// Again: nothing to do.
	if res, err := f.merge(f.mergeOpts(ref)); err != nil || res.Kind != MergeUpToDate || res.New != tip {
		t.Fatalf("second merge: %+v %v", res, err)
	}
}

func TestMergeCommitAndSquash(t *testing.T) {
	for _, squash := range []bool{false, true} {
		f := newFixture(t)
		ref := f.fetched("new.txt", "from the box\n")
		hostTip := f.hostCommit("host.txt", "the owner's\n")
		o := f.mergeOpts(ref)
		o.Squash = squash
		res, err := f.merge(o)
		if err != nil {
			t.Fatal(err)
		}
		want, parents := MergeCommit, hostTip+" "+f.hostRef(ref)
		if squash {
			want, parents = MergeSquash, hostTip
		}
		if res.Kind != want || res.Old != hostTip || f.hostRef("refs/heads/main") != res.New || !slices.Equal(res.Changed, []string{"new.txt"}) {
			t.Fatalf("squash %v: %+v", squash, res)
		}
		if got := f.git(f.host, "log", "-1", "--format=%P|%an <%ae>|%cn|%s", res.New); got != parents+"|Owner <owner@example.org>|Owner|"+firstLine(got) {
			t.Errorf("squash %v: commit %q, want parents %s", squash, got, parents)
		}
		for name, content := range map[string]string{"new.txt": "from the box\n", "host.txt": "the owner's\n"} {
			if b, _ := os.ReadFile(filepath.Join(f.host, name)); string(b) != content {
				t.Errorf("squash %v: %s is %q", squash, name, b)
			}
		}
		if !f.clean() {
			t.Errorf("squash %v: the working tree is not clean after the merge", squash)
		}
		f.checkOwned()
		noQuarantine(t, f.gitDir)
	}
}

func firstLine(logLine string) string {
	i := strings.LastIndex(logLine, "|")
	return logLine[i+1:]
}

// TestMergeConflict: the owner's tree, index and git directory are byte
// for byte as they were, and the error names the files.
func TestMergeConflict(t *testing.T) {
	f := newFixture(t)
	ref := f.fetched("README", "the box's\n", "other.txt", "x\n")
	f.hostCommit("README", "the owner's\n")
	_, err := f.merge(f.mergeOpts(ref))
	if !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), `"README"`) || strings.Contains(err.Error(), "other.txt") {
		t.Fatalf("conflict: %v", err)
	}
}

// TestMergeRefusesDirtyTree: staged, unstaged, and an untracked file the
// merge would overwrite, each refused with nothing changed; an untracked
// file the merge does not touch is no obstacle.
func TestMergeRefusesDirtyTree(t *testing.T) {
	f := newFixture(t)
	ref := f.fetched("new.txt", "from the box\n")
	f.write(f.host, "README", "edited, not committed\n")
	f.chown()
	if _, err := f.merge(f.mergeOpts(ref)); !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), `"README"`) {
		t.Fatalf("unstaged change: %v", err)
	}
	f.git(f.host, "add", "README")
	f.chown()
	if _, err := f.merge(f.mergeOpts(ref)); !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), `"README"`) {
		t.Fatalf("staged change: %v", err)
	}
	f.git(f.host, "reset", "-q", "--hard")
	f.write(f.host, "new.txt", "the owner's own, untracked\n")
	f.chown()
	// The index's stat data may be refreshed (as git status does); its
	// entries are as they were.
	index := f.git(f.host, "ls-files", "-s")
	if _, err := f.merge(f.mergeOpts(ref), ".git/index"); !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "untracked") {
		t.Fatalf("untracked file in the way: %v", err)
	}
	if f.hostRef("refs/heads/main") != f.base || f.git(f.host, "ls-files", "-s") != index {
		t.Fatal("main moved, or the index changed")
	}
	os.Remove(filepath.Join(f.host, "new.txt"))
	f.write(f.host, "notes.txt", "untracked, not in the way\n")
	f.chown()
	if res, err := f.merge(f.mergeOpts(ref)); err != nil || res.Kind != MergeFastForward {
		t.Fatalf("with an untracked file aside: %+v %v", res, err)
	}
}

func TestMergeInto(t *testing.T) {
	f := newFixture(t)
	ref := f.fetched("new.txt", "from the box\n")
	f.git(f.host, "branch", "release", f.base)
	f.chown()
	before := snapshot(t, f.host)
	o := f.mergeOpts(ref)
	o.Into = "release"
	res, err := Merge(context.Background(), o)
	if err != nil || res.Kind != MergeFastForward || res.WorkTree || f.hostRef("refs/heads/release") != f.hostRef(ref) {
		t.Fatalf("into release: %+v %v", res, err)
	}
	// Only the branch and its reflog changed: not the working tree, not
	// the index, not main.
	diffSnapshots(t, before, snapshot(t, f.host), []string{".git/refs/heads/release", ".git/logs/refs/heads/release"})

	for _, into := range []string{"-x", "no..pe", "nosuch"} {
		o.Into = into
		if _, err := f.merge(o); err == nil {
			t.Errorf("into %q: no error", into)
		}
	}
	// A detached HEAD and no --into.
	f.git(f.host, "checkout", "-q", "--detach")
	f.chown()
	o.Into = ""
	if _, err := f.merge(o); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "--into") {
		t.Fatalf("detached: %v", err)
	}
	// A branch checked out in a linked worktree.
	f.git(f.host, "worktree", "add", "-q", filepath.Join(f.dir, "wt"), "release")
	f.chown()
	o.Into = "release"
	if _, err := f.merge(o); !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "linked worktree") {
		t.Fatalf("linked worktree: %v", err)
	}
	// Not a session's ref.
	o.Ref = "refs/heads/main"
	if _, err := f.merge(o); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("not a session's ref: %v", err)
	}
}

// TestMergeRunsNothingOfTheRepository: with hooks, fsmonitor, filter,
// merge and diff drivers configured for every path, a merge that runs a
// content merge of one file and checks files out runs none of them; the
// same repository runs them for plain git.
func TestMergeRunsNothingOfTheRepository(t *testing.T) {
	f := newFixture(t)
	marks, prog := f.markers("cat")
	// A file both sides change, apart: a real three-way content merge.
	lines := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	f.hostCommit("merge.txt", lines)
	global := filepath.Join(f.dir, "global.gitconfig")
	f.write(f.dir, "global.gitconfig", "[safe]\n\tdirectory = *\n")
	pull := exec.Command("git", "pull", "-q", "--no-rebase", "origin", "main")
	pull.Dir, pull.Env = f.box, append(os.Environ(), "GIT_CONFIG_GLOBAL="+global, "GIT_CONFIG_NOSYSTEM=1")
	if out, err := pull.CombinedOutput(); err != nil {
		t.Fatalf("pull: %v %s", err, out)
	}
	f.write(f.box, ".gitattributes", "* filter=evil diff=evil merge=evil\n")
	ref := f.fetched("merge.txt", "one\n"+lines[2:], "box.txt", "x\n")
	f.hostCommit("merge.txt", lines[:len(lines)-3]+"ten\n")
	for _, h := range hookNames {
		b := []byte("#!/bin/sh\ntouch '" + filepath.Join(marks, "hook-"+h) + "'\n")
		if err := os.WriteFile(filepath.Join(f.gitDir, "hooks", h), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.gitDir, "info", "attributes"), []byte("* filter=evil diff=evil merge=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", prog("fsmonitor")},
		{"core.hooksPath", filepath.Join(f.gitDir, "hooks")},
		{"diff.external", prog("diff-external")},
		{"diff.evil.textconv", prog("textconv")},
		{"filter.evil.clean", prog("filter-clean")},
		{"filter.evil.smudge", prog("filter-smudge")},
		{"filter.evil.process", prog("filter-process")},
		{"merge.evil.driver", prog("merge-driver") + " %O %A %B"},
		{"core.pager", prog("pager")},
		{"gpg.program", prog("gpg")},
		{"commit.gpgSign", "true"},
		{"log.showSignature", "true"},
		{"core.alternateRefsCommand", prog("alternateRefsCommand")},
	} {
		f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), kv[0], kv[1])
	}
	f.chown()
	res, err := f.merge(f.mergeOpts(ref))
	if err != nil || res.Kind != MergeCommit {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.host, "merge.txt")); string(b) != "one\n"+lines[2:len(lines)-3]+"ten\n" {
		t.Errorf("merge.txt is %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(marks, "*")); len(m) > 0 {
		t.Fatalf("the merge ran the repository's programs: %v", m)
	}
	// The control: plain git, as the owner, runs them.
	cmd := exec.Command("git", "status")
	cmd.Dir = f.host
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	_ = f.asOwner(cmd).Run()
	if m, _ := filepath.Glob(filepath.Join(marks, "fsmonitor")); len(m) == 0 {
		t.Error("control: plain git status did not run the fsmonitor; the test's repository is not as hostile as it means to be")
	}
}

// TestMergeRefusesWhatItDoesNotUpdate: a sparse checkout, a split index
// or a working tree elsewhere is refused with git merge as the way, and
// nothing changes; core.sparseCheckout=false is no obstacle.
func TestMergeRefusesWhatItDoesNotUpdate(t *testing.T) {
	f := newFixture(t)
	ref := f.fetched("new.txt", "from the box\n")
	for _, kv := range [][2]string{{"core.sparseCheckout", "true"}, {"core.splitIndex", "yes"}, {"core.worktree", "/elsewhere"}} {
		f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), kv[0], kv[1])
		f.chown()
		if _, err := f.merge(f.mergeOpts(ref)); !errdefs.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "git merge") {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
		f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), "--unset", kv[0])
	}
	f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), "core.sparseCheckout", "false")
	f.chown()
	if res, err := f.merge(f.mergeOpts(ref)); err != nil || res.Kind != MergeFastForward {
		t.Fatalf("with core.sparseCheckout=false: %+v %v", res, err)
	}
}
