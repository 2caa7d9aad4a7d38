package gitimport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
)

// MergeOptions say what Merge merges, into what, as whom.
type MergeOptions struct {
	// Options.Repo, UID, GID, Git and Env are as for Import; Session
	// names the session in messages.
	Options
	// Ref is what is merged: a session's ref, refs/remotes/paddock/...
	Ref string
	// Into is the branch merged into, without refs/heads/; "" is the
	// branch the repository's HEAD names (a detached HEAD is refused).
	Into string
	// Squash makes one commit on Into with Ref's changes and Into as its
	// only parent, even when a fast-forward would do.
	Squash bool
	// Identity is the author and committer of a commit Merge makes when
	// the repository's own config names no user (its user.name and
	// user.email win, as they would for git commit).
	Identity gitident.Identity
}

// Merge kinds, in MergeResult.Kind.
const (
	MergeUpToDate    = "up to date"   // Ref is in Into already: nothing done
	MergeFastForward = "fast-forward" // Into moved to Ref
	MergeCommit      = "merge"        // a merge commit, parents Into and Ref
	MergeSquash      = "squash"       // one commit, parent Into
)

// MergeResult says what a merge did.
type MergeResult struct {
	Into     string   // the branch, without refs/heads/
	Old, New string   // its commit before and after (equal when up to date)
	Kind     string   // one of the Merge kinds
	WorkTree bool     // Into is checked out and its working tree was updated
	Changed  []string // the paths that differ between Old and New
	// Conflicts are the paths git could not merge (the error is then
	// errdefs.ErrConflict and nothing changed).
	Conflicts []string
}

// Merge merges o.Ref into the branch o.Into of the repository o.Repo, as
// its owner (o.UID), running nothing the repository's config or the
// merged commits name: no hook, filter, merge or diff driver, fsmonitor,
// textconv or pager.
//
// How: the merge is computed with git merge-tree --write-tree (no working
// tree, no index) and its commit made with git commit-tree, both in a
// shadow git directory the Runner makes (a config of paddock's own, with
// only the repository's line-ending and file-system keys copied: no
// driver or hook of the repository's can be named), reading the
// repository's objects and writing new ones into a quarantine in it, as
// Import does. A conflict stops there: the quarantine is removed and the
// repository, its index and its working tree are as they were; the error
// (errdefs.ErrConflict) names the files. When Into is checked out, its
// working tree and index must be clean (staged, unstaged and unmerged
// changes are refused by name; untracked files are left alone, and one a
// merge would overwrite is refused), and git read-tree -m -u moves them
// from the old commit to the new one, still in the shadow; a sparse
// checkout or a split index is refused. Last, one git update-ref moves
// Into from the commit read at the start (a concurrent change fails it,
// and the working tree is moved back).
//
// A branch checked out in a linked worktree is refused (merge there).
func Merge(ctx context.Context, o MergeOptions) (res MergeResult, err error) {
	if !strings.HasPrefix(o.Ref, Namespace) {
		return res, fmt.Errorf("merge %q: paddock merges a session's ref (%s...) only: %w", o.Ref, Namespace, errdefs.ErrInvalid)
	}
	g, err := openRepo(&o.Options)
	if err != nil {
		return res, err
	}
	m := &merger{o: o, g: g}
	return m.run(ctx)
}

type merger struct {
	o      MergeOptions
	g      *runner // in the repository, with safeConfig
	shadow *runner // in the shadow git directory
	res    MergeResult
}

func (m *merger) run(ctx context.Context) (MergeResult, error) {
	into, checkedOut, err := m.target(ctx)
	if err != nil {
		return m.res, err
	}
	m.res.Into = into
	src, err := m.commitOf(ctx, m.o.Ref)
	if err != nil {
		return m.res, fmt.Errorf("%s is not in %s (fetch the session first): %w", m.o.Ref, m.o.Repo, errdefs.ErrNotFound)
	}
	dst, err := m.commitOf(ctx, "refs/heads/"+into)
	if err != nil {
		return m.res, fmt.Errorf("%s has no branch %s (or it has no commit yet): name one it has (git branch lists them), or make it (git branch %s): %w",
			m.o.Repo, into, into, errdefs.ErrNotFound)
	}
	m.res.Old, m.res.New, m.res.Kind = dst, dst, MergeUpToDate
	if m.isAncestor(ctx, src, dst) {
		return m.res, nil
	}
	shadow, cleanup, err := m.makeShadow(ctx, dst)
	if err != nil {
		return m.res, err
	}
	defer cleanup()
	m.shadow = shadow
	q := m.g.gitDir + "/objects/tmp_objdir-paddock-" + randomHex()
	quarantine := []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + m.g.gitDir + "/objects"}
	var workTree []string
	if checkedOut {
		workTree = []string{"GIT_WORK_TREE=" + filepath.Clean(m.o.Repo), "GIT_INDEX_FILE=" + m.g.gitDir + "/index"}
		if err := m.checkClean(ctx, workTree); err != nil {
			return m.res, err
		}
	}
	if err := m.g.objdir(ctx, "make", q); err != nil {
		return m.res, fmt.Errorf("make a quarantine for the merge's objects in %s: %w", m.o.Repo, err)
	}
	kept := false
	defer func() {
		if !kept {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = m.g.objdir(ctx, "drop", q)
		}
	}()
	next, kind := src, MergeFastForward
	if m.o.Squash || !m.isAncestor(ctx, dst, src) {
		if next, kind, err = m.commit(ctx, quarantine, dst, src); err != nil {
			return m.res, err
		}
	}
	if m.res.Changed, err = m.changed(ctx, quarantine, dst, next); err != nil {
		return m.res, err
	}
	if checkedOut {
		// The index's stat data, refreshed as git status does (it is not
		// written otherwise), or read-tree takes every file for changed.
		if _, err := m.shadow.run(ctx, workTree, nil, "update-index", "-q", "--refresh"); err != nil {
			return m.res, fmt.Errorf("refresh the index of %s: %w", m.o.Repo, err)
		}
		if _, err := m.shadow.run(ctx, append(slices.Clone(quarantine), workTree...), nil, "read-tree", "-m", "-u", dst, next); err != nil {
			return m.res, fmt.Errorf("update the working tree of %s: nothing was merged and it is as it was (an untracked file where the merge writes one? move it away, then merge again): %w: %w",
				m.o.Repo, err, errdefs.ErrConflict)
		}
		m.res.WorkTree = true
	}
	// Put the working tree back where the branch still is.
	rollback := func() {
		if m.res.WorkTree {
			_, _ = m.shadow.run(context.WithoutCancel(ctx), workTree, nil, "read-tree", "-m", "-u", next, dst)
			m.res.WorkTree = false
		}
	}
	if err := m.g.objdir(ctx, "keep", q); err != nil {
		rollback()
		return m.res, fmt.Errorf("move the merge's objects into %s: %w", m.o.Repo, err)
	}
	kept = true
	msg := "paddock merge " + m.o.Session + " (" + kind + ")"
	if _, err := m.g.run(ctx, nil, nil, "update-ref", "-m", msg, "refs/heads/"+into, next, dst); err != nil {
		rollback()
		return m.res, fmt.Errorf("move branch %s of %s (it changed meanwhile?); its working tree is as it was: %w: %w", into, m.o.Repo, err, errdefs.ErrConflict)
	}
	m.res.New, m.res.Kind = next, kind
	return m.res, nil
}

// target is the branch to merge into and whether it is the one checked
// out in the repository's (main) working tree.
func (m *merger) target(ctx context.Context) (string, bool, error) {
	bare := m.g.gitDir == filepath.Clean(m.o.Repo)
	head, err := m.g.run(ctx, nil, nil, "symbolic-ref", "-q", "HEAD")
	headBranch := strings.TrimPrefix(strings.TrimSpace(string(head)), "refs/heads/")
	if err != nil || !strings.HasPrefix(string(head), "refs/heads/") {
		headBranch = ""
	}
	into := m.o.Into
	switch {
	case into == "" && headBranch == "":
		return "", false, fmt.Errorf("%s is on no branch (a detached HEAD): name the branch to merge into (--into BRANCH): %w", m.o.Repo, errdefs.ErrInvalid)
	case into == "":
		into = headBranch
	case strings.HasPrefix(into, "-"):
		return "", false, fmt.Errorf("branch %s: a branch name does not start with '-': %w", strconv.Quote(into), errdefs.ErrInvalid)
	}
	if _, err := m.g.run(ctx, nil, nil, "check-ref-format", "refs/heads/"+into); err != nil {
		return "", false, fmt.Errorf("%s is not a branch name git takes: %w", strconv.Quote(into), errdefs.ErrInvalid)
	}
	if wt := m.linkedWorktreeOn(into); wt != "" {
		return "", false, fmt.Errorf("branch %s is checked out in the linked worktree %s: merge there (git merge %s), or name another branch: %w",
			into, wt, strings.TrimPrefix(m.o.Ref, "refs/remotes/"), errdefs.ErrConflict)
	}
	return into, !bare && into == headBranch, nil
}

// linkedWorktreeOn is the path of a linked worktree of the repository
// whose HEAD is branch, or "".
func (m *merger) linkedWorktreeOn(branch string) string {
	dirs, _ := os.ReadDir(filepath.Join(m.g.gitDir, "worktrees"))
	for _, d := range dirs {
		head, err := os.ReadFile(filepath.Join(m.g.gitDir, "worktrees", d.Name(), "HEAD"))
		if err != nil || strings.TrimSpace(string(head)) != "ref: refs/heads/"+branch {
			continue
		}
		where, _ := os.ReadFile(filepath.Join(m.g.gitDir, "worktrees", d.Name(), "gitdir"))
		if p := strings.TrimSpace(string(where)); p != "" {
			return strconv.Quote(filepath.Dir(p))
		}
		return strconv.Quote(d.Name())
	}
	return ""
}

func (m *merger) commitOf(ctx context.Context, ref string) (string, error) {
	out, err := m.g.run(ctx, nil, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	oid := strings.TrimSpace(string(out))
	if err != nil || !IsOID(oid) {
		return "", errors.New("no commit")
	}
	return oid, nil
}

func (m *merger) isAncestor(ctx context.Context, a, b string) bool {
	_, err := m.g.run(ctx, nil, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// safeCoreKey are the keys of the repository's config the shadow takes:
// how files are written and compared, nothing that names a program.
var safeCoreKey = regexp.MustCompile(`^core\.(autocrlf|eol|safecrlf|filemode|symlinks|ignorecase|precomposeunicode|checkstat|trustctime|sparsecheckout|splitindex|worktree)$`)

// safeValue is a value the shadow takes: a word, nothing to escape.
var safeValue = regexp.MustCompile(`^[A-Za-z0-9_-]{0,16}$`)

// gitTrue is a boolean config value git takes for true (a key with no
// value, as "core.x" alone in a config file, reads as "").
func gitTrue(v string) bool {
	switch strings.ToLower(v) {
	case "", "true", "yes", "on", "1":
		return true
	}
	return false
}

// makeShadow makes the shadow git directory, its HEAD at head, and
// returns the runner there and what removes it.
func (m *merger) makeShadow(ctx context.Context, head string) (*runner, func(), error) {
	out, err := m.g.run(ctx, nil, nil, "config", "-z", "--get-regexp", `^core\.`)
	if err != nil && !strings.Contains(err.Error(), "exit status 1") { // 1: no such key
		return nil, nil, fmt.Errorf("read the config of %s: %w", m.o.Repo, err)
	}
	var conf strings.Builder
	format := "sha1"
	if len(head) == 64 {
		format = "sha256"
	}
	fmt.Fprintf(&conf, "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = %s\n[core]\n", format)
	for _, kv := range bytes.Split(out, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "\n")
		if !safeCoreKey.MatchString(strings.ToLower(k)) {
			continue
		}
		switch k := strings.ToLower(k); {
		case k == "core.sparsecheckout" && gitTrue(v):
			return nil, nil, fmt.Errorf("%s uses a sparse checkout (core.sparseCheckout), which paddock merge does not update: merge with git itself (git merge %s): %w",
				m.o.Repo, strings.TrimPrefix(m.o.Ref, "refs/remotes/"), errdefs.ErrUnavailable)
		case k == "core.splitindex" && gitTrue(v):
			return nil, nil, fmt.Errorf("%s uses a split index (core.splitIndex), which paddock merge does not update: merge with git itself (git merge %s): %w",
				m.o.Repo, strings.TrimPrefix(m.o.Ref, "refs/remotes/"), errdefs.ErrUnavailable)
		case k == "core.worktree":
			return nil, nil, fmt.Errorf("%s has its working tree elsewhere (core.worktree), which paddock merge does not follow: merge with git itself (git merge %s): %w",
				m.o.Repo, strings.TrimPrefix(m.o.Ref, "refs/remotes/"), errdefs.ErrUnavailable)
		case k == "core.sparsecheckout" || k == "core.splitindex":
		case safeValue.MatchString(v):
			fmt.Fprintf(&conf, "\t%s = %s\n", strings.TrimPrefix(k, "core."), v)
		}
	}
	if shared, _ := filepath.Glob(filepath.Join(m.g.gitDir, "sharedindex.*")); len(shared) > 0 {
		return nil, nil, fmt.Errorf("%s has a split index (sharedindex files), which paddock merge does not update: merge with git itself: %w", m.o.Repo, errdefs.ErrUnavailable)
	}
	dir, err := os.MkdirTemp("", "paddock-merge-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	files := map[string]string{"HEAD": head + "\n", "config": conf.String()}
	err = errors.Join(os.Mkdir(filepath.Join(dir, "refs"), 0o755), os.Mkdir(filepath.Join(dir, "objects"), 0o755))
	for name, text := range files {
		err = errors.Join(err, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	// The owner's git reads it; nothing in it is written.
	if err = errors.Join(err, os.Chmod(dir, 0o755)); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("make the merge's git directory: %w", err)
	}
	s := *m.g
	// The repository's objects; a quarantine's GIT_OBJECT_DIRECTORY,
	// later in a command's environment, wins.
	s.env = append(slices.Clone(m.g.env), "GIT_DIR="+dir, "GIT_OPTIONAL_LOCKS=0", "GIT_OBJECT_DIRECTORY="+m.g.gitDir+"/objects")
	s.gitDir = dir
	return &s, cleanup, nil
}

// checkClean refuses a working tree or index that differs from HEAD
// (staged, unstaged or unmerged), naming the files. Untracked files and
// submodules' insides are not looked at.
func (m *merger) checkClean(ctx context.Context, workTree []string) error {
	out, err := m.shadow.run(ctx, workTree, nil, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return fmt.Errorf("read the state of %s's working tree: %w", m.o.Repo, err)
	}
	var dirty []string
	for _, e := range bytes.Split(out, []byte{0}) {
		if len(e) > 3 {
			dirty = append(dirty, strconv.Quote(string(e[3:])))
		}
	}
	if len(dirty) == 0 {
		return nil
	}
	more := ""
	if len(dirty) > 10 {
		dirty, more = dirty[:10], fmt.Sprintf(" and %d more", len(dirty)-10)
	}
	return fmt.Errorf("the working tree of %s has changes not committed (%s%s): nothing was merged; commit or stash them (git stash), then merge again: %w",
		m.o.Repo, strings.Join(dirty, ", "), more, errdefs.ErrConflict)
}

// commit makes the merge's commit in the quarantine: a merge of src into
// dst (or a squash), refused on a conflict.
func (m *merger) commit(ctx context.Context, quarantine []string, dst, src string) (string, string, error) {
	cmd := m.shadow.gitCmd(ctx, quarantine, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", dst, src)
	var out bytes.Buffer
	stderr := &tail{max: maxStderr}
	cmd.Stdout, cmd.Stderr = &limited{w: &out, n: maxOutput}, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	fields := strings.Split(strings.TrimRight(out.String(), "\x00"), "\x00")
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		seen := map[string]bool{}
		for _, f := range fields[1:] {
			if f != "" && !seen[f] {
				seen[f] = true
				m.res.Conflicts = append(m.res.Conflicts, f)
			}
		}
		names := make([]string, 0, len(m.res.Conflicts))
		for i, f := range m.res.Conflicts {
			if i == 20 {
				names = append(names, fmt.Sprintf("and %d more", len(m.res.Conflicts)-20))
				break
			}
			names = append(names, strconv.Quote(f))
		}
		return "", "", fmt.Errorf("%s conflicts with %s in %s: nothing was merged and the working tree is as it was; "+
			"merge it yourself (git merge %s) or ask the session to rebase on %s: %w",
			m.o.Ref, m.res.Into, strings.Join(names, ", "), strings.TrimPrefix(m.o.Ref, "refs/remotes/"), m.res.Into, errdefs.ErrConflict)
	case err != nil:
		return "", "", fmt.Errorf("git merge-tree: %w: %s", err, stderr)
	case !IsOID(fields[0]):
		return "", "", fmt.Errorf("git merge-tree said %q, not a tree", cut(fields[0], 100))
	}
	tree := fields[0]
	id, err := m.identity(ctx)
	if err != nil {
		return "", "", err
	}
	short := strings.TrimPrefix(m.o.Ref, "refs/remotes/")
	args := []string{"commit-tree", tree, "-p", dst}
	kind := MergeSquash
	var msg string
	if m.o.Squash {
		log, err := m.shadow.run(ctx, quarantine, nil, "log", "--no-decorate", "--no-show-signature", "--format=%h %s", "--max-count=50", dst+".."+src)
		if err != nil {
			return "", "", err
		}
		msg = fmt.Sprintf("Squashed %s (paddock session %s)\n\n%s", short, m.o.Session, sanitizeMessage(string(log)))
	} else {
		args = append(args, "-p", src)
		kind = MergeCommit
		msg = fmt.Sprintf("Merge %s into %s (paddock session %s)\n", short, m.res.Into, m.o.Session)
	}
	env := append(slices.Clone(quarantine), "GIT_AUTHOR_NAME="+id.Name, "GIT_AUTHOR_EMAIL="+id.Email,
		"GIT_COMMITTER_NAME="+id.Name, "GIT_COMMITTER_EMAIL="+id.Email)
	out2, err := m.shadow.run(ctx, env, []byte(msg), args...)
	oid := strings.TrimSpace(string(out2))
	if err != nil || !IsOID(oid) {
		return "", "", fmt.Errorf("make the merge commit: %v %q", err, cut(oid, 100))
	}
	return oid, kind, nil
}

// sanitizeMessage keeps a box's commit subjects printable in a message.
func sanitizeMessage(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// identity is who commits: the repository's user.name and user.email if
// its config has them (and no global config is read), else o.Identity.
func (m *merger) identity(ctx context.Context) (gitident.Identity, error) {
	get := func(key string) string {
		out, _ := m.g.run(ctx, nil, nil, "config", "--get", key)
		return strings.TrimRight(string(out), "\n")
	}
	id := gitident.Identity{Name: get("user.name"), Email: get("user.email")}
	if id.Name == "" {
		id.Name = m.o.Identity.Name
	}
	if id.Email == "" {
		id.Email = m.o.Identity.Email
	}
	if err := id.Check(); err != nil {
		return id, err
	}
	if id.Name == "" || id.Email == "" {
		return id, fmt.Errorf("no git identity to make the merge commit with (this is not a fast-forward): set yours "+
			"(git config --global user.name NAME; git config --global user.email EMAIL), then merge again: %w", errdefs.ErrInvalid)
	}
	return id, nil
}

// changed is the paths that differ between a and b.
func (m *merger) changed(ctx context.Context, quarantine []string, a, b string) ([]string, error) {
	out, err := m.shadow.run(ctx, quarantine, nil, "diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b)
	if err != nil {
		return nil, fmt.Errorf("list the merge's changes: %w", err)
	}
	var paths []string
	for _, p := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
