// Package gitimport brings a clone session's work into its host repository
// from a git bundle the box made (git bundle create - <refs>, streamed out
// by its guest). The box is hostile, so the bundle is too: Import parses
// its header itself (ParseHeader), takes only well-named branches, has git
// check every object of its pack, and writes nothing but objects and the
// refs refs/remotes/paddock/<session>/<branch>, as the repository's owner,
// running nothing the box or the repository's config names.
//
// # How
//
// The lowest-level path, so that as little of git runs as possible and
// nothing of the repository's config can weaken a check:
//
//  1. The header is read and checked: object format, prerequisites (git
//     cat-file --batch-check: a missing one ends the import with what to
//     do), names.
//  2. The pack streams into git index-pack --stdin --fix-thin --strict,
//     counted against MaxBytes, in a quarantine: an objects directory of
//     its own in the repository's (GIT_OBJECT_DIRECTORY, the real one as
//     an alternate), as git receive-pack does. --strict checks every
//     object (fsck, with warnings as errors: a tree entry ".git" or "..",
//     a bad .gitmodules, a malformed commit) and that every object an
//     object of the pack names exists. index-pack reads no fsck.* config,
//     so the repository cannot turn a check off; git fetch would read
//     fetch.fsck.* and fsck.skipList.
//  3. No object of the pack may be larger than MaxObject inflated (git
//     cat-file --batch-all-objects in the quarantine alone): a pack of a
//     few megabytes can hold gigabytes of zeros, which a merge would
//     write to the owner's disk.
//  4. Each branch tip must be a commit, and everything it reaches must be
//     there: git rev-list --objects --stdin --not --all, as git fetch's
//     connectivity check, but without --alternate-refs.
//  5. Only then the pack moves into the repository's objects (objdir.sh),
//     and one git update-ref --stdin --no-deref transaction sets the refs,
//     each from the value read before (or from none), so a concurrent
//     change fails it whole. A failure before leaves nothing: the
//     quarantine is removed, with a pack git wrote before failing a check
//     (index-pack checks .gitmodules after it wrote the pack).
//
// git fetch <bundle> was not chosen: it writes FETCH_HEAD, runs auto
// maintenance, may recurse into submodules, reads the repository's fsck
// exceptions, and its connectivity check runs core.alternateRefsCommand.
// git receive-pack (which quarantines too) has a larger surface still:
// hooks, receive.denyCurrentBranch=updateInstead (which writes the working
// tree), proc-receive.
//
// The pack streams rather than being spooled first: nothing reaches the
// repository's objects before every check passed anyway, and a bundle of a
// gigabyte needs no second gigabyte of disk.
//
// # What runs, as whom
//
// Every process runs as Options.UID and GID with no supplementary groups
// (the Runner switches when it is not that user, and refuses root), in the
// git directory, with GIT_DIR set to it (no discovery, no core.worktree
// surprise), an environment of its own (safeEnv: no system or global
// config, no HOME) and these -c options, which win over every config file
// the repository has or includes:
//
//	core.hooksPath=/dev/null     every hook: reference-transaction (update-ref
//	                             runs it), post-index-change, pre-auto-gc, …
//	core.fsmonitor=false         the fsmonitor hook program (index reads)
//	core.alternateRefsCommand=true  the program git runs per alternate for
//	                             --alternate-refs (fetch's connectivity check);
//	                             Import does not pass it; if anything did, `true`
//	                             prints no refs. A -c cannot unset a key.
//	core.askPass=, credential.helper=  programs git runs for a password; only a
//	                             transport asks, and none is allowed
//	protocol.allow=never         every transport (with GIT_ALLOW_PROTOCOL=none,
//	                             which also overrides a repository's
//	                             protocol.<name>.allow=always, and
//	                             GIT_NO_LAZY_FETCH=1): in a partial clone
//	                             (extensions.partialClone, remote.*.promisor), a
//	                             missing object makes cat-file, index-pack
//	                             --fix-thin and rev-list run `git fetch` of the
//	                             promisor remote, whose url (ext::<command>),
//	                             remote.*.uploadpack, remote.*.vcs, core.sshCommand
//	                             and credential helpers are programs. Measured with
//	                             git 2.39.5: cat-file --batch-check of a missing
//	                             object runs an ext:: remote's command; with
//	                             GIT_ALLOW_PROTOCOL alone the `git fetch` child
//	                             still starts and writes
//	                             remote.<name>.partialclonefilter into the config
//	                             before its transport is refused, so
//	                             GIT_NO_LAZY_FETCH (git 2.39.4 and later) is the
//	                             one that keeps the repository as it was.
//	gc.auto=0, maintenance.auto=false  auto maintenance (git gc --auto, which
//	                             runs the pre-auto-gc hook and rewrites packs and
//	                             refs); only fetch, receive-pack and porcelain
//	                             start it, none of which Import runs
//	fetch.recurseSubmodules=false, fetch.writeCommitGraph=false  fetch only
//	transfer/fetch/receive.fsckObjects=true  fetch and receive-pack only:
//	                             index-pack --strict checks regardless
//
// and in the environment GIT_NO_REPLACE_OBJECTS=1 (replace refs would make
// the walks see other objects than those stored) and GIT_PAGER=cat.
//
// Not reached by the commands Import runs (cat-file --batch-check,
// index-pack, rev-list, for-each-ref, update-ref, rev-parse), so not
// overridden one by one: filter.<driver>.* (checkout and add only),
// diff.external and textconv (diff), merge drivers, gpg.program (signature
// checks), core.editor, core.pager and pager.<cmd> (no terminal), alias.*
// (builtins cannot be aliased), uploadpack.packObjectsHook (serving side,
// and read only from protected config), core.sshCommand and core.gitProxy
// (transports).
//
// # What changes in the repository
//
// Objects, in a new pack of objects/pack; the refs
// refs/remotes/paddock/<session>/<branch> and, where git keeps reflogs for
// them (core.logAllRefUpdates, on in a non-bare repository), their reflogs
// under logs/. Nothing else: not HEAD, the index, the working tree, the
// config, refs/heads or FETCH_HEAD (every import of the tests compares
// every other file of the git directory byte for byte, and on a failure
// objects/ too). While it runs, the quarantine is a directory
// objects/tmp_objdir-paddock-<random>, made, emptied into objects/pack and
// removed by objdir.sh, the one other program Import runs (/bin/sh with
// mkdir, mv and rm, as the owner too: the Runner, root, makes and removes
// nothing in a directory another user controls). A ref under the session's
// namespace that the bundle does not name stays as it is.
package gitimport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// DefaultMaxBytes bounds a bundle when Options.MaxBytes is 0.
const DefaultMaxBytes = 1 << 30

// DefaultMaxObject bounds one object when Options.MaxObject is 0: four
// times what GitHub takes in one file.
const DefaultMaxObject = 400 << 20

// Options say where a bundle goes and as whom.
type Options struct {
	// Repo is the host repository, an absolute path: its working tree
	// (which holds a .git directory) or its git directory (bare). A .git
	// that is a file or a symlink is refused.
	Repo string
	// Session names the refs: refs/remotes/paddock/<Session>/<branch>.
	// Lowercase letters, digits, '-', '_' and '.' (no "..", no trailing
	// '.' or ".lock"), at most 63.
	Session string
	// Branches, if not empty, are the only branches taken (as the box
	// names them, without refs/heads/); the bundle's others are refused.
	Branches []string
	// MaxBytes bounds the bundle, header and pack; 0 is DefaultMaxBytes.
	// A longer stream is refused and nothing is imported.
	MaxBytes int64
	// MaxObject bounds each object of the pack, as git stores it
	// inflated (a file as a checkout writes it); 0 is DefaultMaxObject.
	// A pack compresses well: a bundle of a few megabytes can hold a blob
	// of gigabytes of zeros, which a merge would write to the owner's
	// disk. A larger object is refused and nothing is imported.
	MaxObject int64
	// UID and GID are the repository's owner, as whom every process runs.
	// UID must own the git directory and must not be 0.
	UID, GID uint32
	// Git is the git program; "" looks git up in this process's PATH.
	Git string
	// Env is added to the processes' environment (PATH=/usr/local/bin:
	// /usr/bin:/bin and LC_ALL=C unless it says otherwise); a GIT_*
	// variable in it is dropped, and Import's own safety settings win.
	Env []string
}

// Result says what an import did. Import returns it with its error too:
// Bytes and Refused say how far it got.
type Result struct {
	// Imported are the refs set, by name.
	Imported []Imported
	// Refused are the bundle's refs not taken, each with why: in the
	// bundle's order, but for pairs such as a and a/b, which come last.
	Refused []Refusal
	// Bytes is how much of the stream was read (on a refusal for size,
	// MaxBytes+1).
	Bytes int64
}

// Imported is one ref set in the host repository.
type Imported struct {
	Branch string // the box's branch (refs/heads/<Branch> in the bundle)
	Ref    string // the host's ref, refs/remotes/paddock/<session>/<Branch>
	OID    string // its commit now
	Old    string // its commit before; "" if it is new
}

// Refusal is a ref of the bundle that was not taken.
type Refusal struct {
	Ref string // as the bundle names it: any bytes but LF
	Why string
}

// String is the refusal for a person: the name quoted (a control byte in
// it escaped), then why.
func (r Refusal) String() string { return strconv.Quote(r.Ref) + ": " + r.Why }

// Import reads an untrusted git bundle from r, at most o.MaxBytes, into the
// repository at o.Repo as o.UID: its pack's objects (each checked by git
// fsck's rules), and each branch it offers that passes the name rules as
// refs/remotes/paddock/<o.Session>/<branch>. See the package comment for
// how, and for what it runs.
//
// Either every taken branch is set or none is. No object is added unless
// all of them passed every check; only when the last step, the ref
// transaction, fails (a ref changed meanwhile) do they stay, unreferenced,
// for the next try or git gc. A bundle over the size bound
// (errdefs.ErrLimit), damaged, with an object git refuses or with no
// branch to take (errdefs.ErrInvalid), built on commits the repository
// lacks, or meeting a symbolic ref or a ref in the way of one it would set
// (errdefs.ErrConflict) is an error. A ref refused for its name or kind is
// listed in Result.Refused, and the import goes on with the rest.
//
// Import reads r up to the end of the pack (git reads no further) or the
// size bound. ctx bounds every process Import starts, not its reads of r:
// a stream that stalls is the caller's to end (close r, or a deadline on
// it). Once git has read the whole pack, Import waits for the rest of r
// (normally nothing) only as long as ctx lets it.
func Import(ctx context.Context, o Options, r io.Reader) (res Result, err error) {
	im, err := prepare(o)
	if err != nil {
		return res, err
	}
	in := &counter{r: io.LimitReader(r, im.max+1)}
	defer func() { res.Bytes = in.n.Load() }() // named results: set on every return
	br := bufio.NewReaderSize(in, 64<<10)
	h, err := ParseHeader(br)
	if err != nil {
		return res, im.overOr(in, err)
	}
	take, refused := im.choose(h)
	res.Refused = refused
	if len(take) == 0 {
		return res, fmt.Errorf("the bundle from the box holds no branch paddock takes (%s): nothing was imported: %w",
			describe(refused), errdefs.ErrInvalid)
	}
	res.Imported, err = im.run(ctx, h, take, br, in)
	return res, err
}

// importer is one import, its options checked.
type importer struct {
	o   Options
	max int64
	git *runner
}

// prepare checks o and finds the repository.
func prepare(o Options) (*importer, error) {
	if err := checkSession(o.Session); err != nil {
		return nil, err
	}
	for _, b := range o.Branches {
		if why := whyNotBranch("refs/heads/" + b); why != "" {
			return nil, fmt.Errorf("branch %s: %s: %w", strconv.Quote(b), why, errdefs.ErrInvalid)
		}
	}
	max := o.MaxBytes
	switch {
	case max == 0:
		max = DefaultMaxBytes
	case max < 0:
		return nil, fmt.Errorf("a bundle's size bound of %d bytes: %w", max, errdefs.ErrInvalid)
	}
	git, err := openRepo(&o)
	if err != nil {
		return nil, err
	}
	return &importer{o: o, max: max, git: git}, nil
}

// openRepo finds o.Repo's git directory (a .git file or symlink refused),
// checks it is o.UID's and that this process may act as them, and returns
// the runner of git there as them, with every safety setting. It fills in
// o.Git.
func openRepo(o *Options) (*runner, error) {
	if o.Git == "" {
		p, err := exec.LookPath("git")
		if err != nil {
			return nil, fmt.Errorf("git is not installed on the Runner's host (or not in its PATH): %w", errdefs.ErrUnavailable)
		}
		o.Git = p
	}
	dir, owner, err := gitDir(o.Repo)
	if err != nil {
		return nil, err
	}
	switch euid := uint32(os.Geteuid()); {
	case o.UID == 0:
		return nil, fmt.Errorf("git in %s as root (uid 0) was asked, and paddock runs nothing of a repository as root: "+
			"give the repository to its person (chown -R), or ask as its owner: %w", o.Repo, errdefs.ErrForbidden)
	case owner != o.UID:
		return nil, fmt.Errorf("%s belongs to uid %d, not to uid %d as whom git was to run: %w", dir, owner, o.UID, errdefs.ErrForbidden)
	case euid != 0 && euid != o.UID:
		return nil, fmt.Errorf("the Runner runs as uid %d and cannot act as uid %d, who owns %s: %w", euid, o.UID, dir, errdefs.ErrForbidden)
	}
	return newRunner(*o, dir, uint32(os.Geteuid()) != o.UID), nil
}

// ResolveCommit is the commit rev names in the repository o.Repo, as a
// full object id, read as o.UID with the same safety as Import (nothing
// of the repository's runs, no transport, no lazy fetch); only o.Repo,
// o.UID, o.GID, o.Git and o.Env count. A rev that names no commit is
// errdefs.ErrInvalid. It is what a clone session's branch starts from.
func ResolveCommit(ctx context.Context, o Options, rev string) (string, error) {
	git, err := openRepo(&o)
	if err != nil {
		return "", err
	}
	out, err := git.run(ctx, nil, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	oid := strings.TrimSpace(string(out))
	if err != nil || !IsOID(oid) {
		return "", fmt.Errorf("%s names no commit in %s (a repository with no commit yet has nothing to clone: commit first): %w", rev, o.Repo, errdefs.ErrInvalid)
	}
	return oid, nil
}

// choose splits the bundle's refs into the branches to take and the
// refusals.
func (im *importer) choose(h Header) (map[string]Ref, []Refusal) {
	take := map[string]Ref{}
	var refused []Refusal
	for _, r := range h.Refs {
		why := whyNotBranch(r.Name)
		branch := strings.TrimPrefix(r.Name, "refs/heads/")
		switch {
		case why != "":
		case len(im.o.Branches) > 0 && !slices.Contains(im.o.Branches, branch):
			why = "not a branch paddock asked the box for (" + strings.Join(im.o.Branches, ", ") + ")"
		case len(take) == MaxBranches:
			why = fmt.Sprintf("more than %d branches in one bundle", MaxBranches)
		}
		if why != "" {
			refused = append(refused, Refusal{Ref: r.Name, Why: why})
			continue
		}
		take[branch] = r
	}
	// Branches a and a/b cannot both be refs (git's own repositories never
	// hold both, so a bundle offering both was made by hand): neither is
	// taken, rather than have the ref transaction fail at the end.
	var clash []string
	names := sortedKeys(take)
	for _, a := range names {
		for _, b := range names {
			if strings.HasPrefix(b, a+"/") {
				clash = append(clash, a, b)
			}
		}
	}
	for _, b := range clash {
		if r, ok := take[b]; ok {
			refused = append(refused, Refusal{Ref: r.Name, Why: "named like a directory of another branch of the bundle, or the other way round"})
			delete(take, b)
		}
	}
	return take, refused
}

// run imports the pack at br and sets the refs of take.
func (im *importer) run(ctx context.Context, h Header, take map[string]Ref, br *bufio.Reader, in *counter) ([]Imported, error) {
	g := im.git
	out, err := g.run(ctx, nil, nil, "rev-parse", "--show-object-format")
	if err != nil {
		return nil, fmt.Errorf("read the repository %s: %w", im.o.Repo, err)
	}
	if f := strings.TrimSpace(string(out)); f != h.ObjectFormat {
		return nil, fmt.Errorf("the bundle's objects are %s but the repository %s uses %s: nothing was imported: %w", h.ObjectFormat, im.o.Repo, f, errdefs.ErrInvalid)
	}
	if err := im.checkPrerequisites(ctx, h); err != nil {
		return nil, err
	}
	old, err := im.currentRefs(ctx, take)
	if err != nil {
		return nil, err
	}
	if err := im.checkPackStart(br, in); err != nil {
		return nil, err
	}
	q := g.gitDir + "/objects/tmp_objdir-paddock-" + randomHex()
	if err := g.objdir(ctx, "make", q); err != nil {
		return nil, fmt.Errorf("make a quarantine for the bundle's objects in %s: %w", im.o.Repo, err)
	}
	kept := false
	defer func() {
		if !kept {
			// Not ctx: the quarantine goes even when the import was cancelled.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = g.objdir(ctx, "drop", q)
		}
	}()
	quarantine := []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + g.gitDir + "/objects"}
	if err := im.indexPack(ctx, quarantine, br, in); err != nil {
		return nil, err
	}
	if err := im.checkSizes(ctx, q); err != nil {
		return nil, err
	}
	if err := im.checkTips(ctx, quarantine, take); err != nil {
		return nil, err
	}
	if err := g.objdir(ctx, "keep", q); err != nil {
		return nil, fmt.Errorf("move the bundle's objects into %s: %w", im.o.Repo, err)
	}
	kept = true
	return im.updateRefs(ctx, take, old)
}

// checkPrerequisites says which commits the pack builds on are not in the
// repository.
func (im *importer) checkPrerequisites(ctx context.Context, h Header) error {
	if len(h.Prerequisites) == 0 {
		return nil
	}
	var stdin bytes.Buffer
	for _, p := range h.Prerequisites {
		stdin.WriteString(p.OID + "\n")
	}
	kinds, err := im.objectTypes(ctx, nil, stdin.Bytes(), len(h.Prerequisites))
	if err != nil {
		return err
	}
	var missing []string
	for i, p := range h.Prerequisites {
		switch kinds[i] {
		case "commit":
		case "missing":
			missing = append(missing, p.OID[:12]+" "+strconv.Quote(cut(p.Comment, 60)))
		default:
			missing = append(missing, p.OID[:12]+" (a "+kinds[i]+" here, not a commit)")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	more := ""
	if len(missing) > 5 {
		missing, more = missing[:5], fmt.Sprintf(" and %d more", len(missing)-5)
	}
	return fmt.Errorf("the session's branch builds on commits this repository does not have: %s%s: nothing was imported; "+
		"bring them into %s (fetch or pull the branch the session started from), then fetch again: %w",
		strings.Join(missing, ", "), more, im.o.Repo, errdefs.ErrConflict)
}

// objectTypes asks git cat-file --batch-check for the type of each of n
// object ids on stdin: "commit", "tree", …, or "missing".
func (im *importer) objectTypes(ctx context.Context, env []string, stdin []byte, n int) ([]string, error) {
	out, err := im.git.run(ctx, env, stdin, "cat-file", "--batch-check=%(objecttype)")
	if err != nil {
		return nil, fmt.Errorf("look up objects in %s: %w", im.o.Repo, err)
	}
	// A missing object's line is "<oid> missing"; a found one's its type.
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != n {
		return nil, fmt.Errorf("git cat-file answered %d lines for %d objects", len(lines), n)
	}
	for i, l := range lines {
		if strings.HasSuffix(l, " missing") {
			lines[i] = "missing"
		}
	}
	return lines, nil
}

// checkPackStart peeks at the pack's header: "PACK", version 2 or 3, and
// a count of objects the bound could hold (each takes 9 bytes at least),
// so that git is not asked to make room for four billion objects.
func (im *importer) checkPackStart(br *bufio.Reader, in *counter) error {
	b, err := br.Peek(12)
	if err != nil {
		return im.overOr(in, fmt.Errorf("the bundle from the box ends before its pack begins (cut short?): nothing was imported: %w", errdefs.ErrInvalid))
	}
	if string(b[:4]) != "PACK" || b[4] != 0 || b[5] != 0 || b[6] != 0 || (b[7] != 2 && b[7] != 3) {
		return fmt.Errorf("the bundle from the box holds no git pack after its header (it starts %s): nothing was imported: %w", quoteCut(b), errdefs.ErrInvalid)
	}
	n := int64(b[8])<<24 | int64(b[9])<<16 | int64(b[10])<<8 | int64(b[11])
	if n > im.max/9 {
		return fmt.Errorf("the bundle's pack claims %d objects, more than %d bytes could hold: nothing was imported: %w", n, im.max, errdefs.ErrInvalid)
	}
	return nil
}

// indexPack streams the pack from br into git index-pack in the
// quarantine.
func (im *importer) indexPack(ctx context.Context, quarantine []string, br *bufio.Reader, in *counter) error {
	cmd := im.git.gitCmd(ctx, quarantine, "index-pack", "--stdin", "--fix-thin", "--strict")
	var out bytes.Buffer
	stderr := &tail{max: maxStderr}
	cmd.Stdout, cmd.Stderr = &limited{w: &out, n: 4 << 10}, stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start git index-pack: %w", err)
	}
	// The copy runs beside git: when git is done (the pack ended, or it
	// refused an object) Import goes on without waiting for r, bar the
	// size check below.
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdin, br)
		_ = stdin.Close()
		copied <- err
	}()
	werr := cmd.Wait()
	if in.over(im.max) {
		return im.tooLarge()
	}
	if werr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("import the bundle's objects: %w", ctx.Err())
		}
		return fmt.Errorf("git refused the bundle's objects (git index-pack --strict: %s): nothing was imported; "+
			"the stream was cut short, or the session's commits are damaged or were made by hand (git fsck in the box says more): %w", stderr, errdefs.ErrInvalid)
	}
	// git read the whole pack; wait for the rest of the stream (normally
	// nothing) so that a stream over the bound is refused however it ends.
	select {
	case <-copied:
	case <-ctx.Done():
		return fmt.Errorf("read the rest of the bundle from the box: %w", ctx.Err())
	}
	if in.over(im.max) {
		return im.tooLarge()
	}
	if hash, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "pack\t"); !ok || !isHex([]byte(hash)) {
		return fmt.Errorf("git index-pack said %q, not the pack it wrote", cut(out.String(), 100))
	}
	return nil
}

// checkSizes refuses the import if an object of the pack in the
// quarantine q is larger than the bound, inflated. It reads the
// quarantine alone (no alternates): the pack, its thin bases added.
func (im *importer) checkSizes(ctx context.Context, q string) error {
	max := im.o.MaxObject
	if max <= 0 {
		max = DefaultMaxObject
	}
	cmd := im.git.gitCmd(ctx, []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES="},
		"cat-file", "--batch-all-objects", "--unordered", "--batch-check=%(objectsize) %(objecttype) %(objectname)")
	stderr := &tail{max: maxStderr}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start git cat-file: %w", err)
	}
	var large string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && n > max && large == "" {
			large = fmt.Sprintf("a %s of %d bytes (%s)", f[1], n, f[2])
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("list the bundle's objects: %w: %s", err, stderr)
	}
	if large != "" {
		return fmt.Errorf("the session's branch holds %s, larger than %d bytes, the bound of one object: nothing was imported; "+
			"look at what the session committed (paddock diff --stat), or raise the bound: %w", large, max, errdefs.ErrLimit)
	}
	return nil
}

// checkTips refuses the import unless each branch's tip is a commit and
// everything it reaches is in the repository or the quarantine.
func (im *importer) checkTips(ctx context.Context, quarantine []string, take map[string]Ref) error {
	var stdin bytes.Buffer
	branches := sortedKeys(take)
	for _, b := range branches {
		stdin.WriteString(take[b].OID + "\n")
	}
	kinds, err := im.objectTypes(ctx, quarantine, stdin.Bytes(), len(branches))
	if err != nil {
		return err
	}
	for i, b := range branches {
		switch kinds[i] {
		case "commit":
		case "missing":
			return fmt.Errorf("branch %s names %s, which is neither in the bundle nor in the repository: nothing was imported: %w",
				strconv.Quote(b), take[b].OID, errdefs.ErrInvalid)
		default:
			return fmt.Errorf("branch %s names a %s, not a commit: nothing was imported: %w", strconv.Quote(b), kinds[i], errdefs.ErrInvalid)
		}
	}
	// --not --all: the walk stops at what the repository's refs reach.
	if _, err := im.git.run(ctx, quarantine, stdin.Bytes(), "rev-list", "--objects", "--stdin", "--not", "--all", "--quiet"); err != nil {
		return fmt.Errorf("the session's branch reaches objects that are neither in the bundle nor in the repository (%v): nothing was imported: %w", err, errdefs.ErrInvalid)
	}
	return nil
}

// currentRefs reads the refs of the session's namespace and says what
// each ref of take points at now ("" for none). A symbolic ref where a
// branch goes, or a ref in the way (one named like a directory of a new
// ref, or the other way round), ends the import here, before any object
// moves.
func (im *importer) currentRefs(ctx context.Context, take map[string]Ref) (map[string]string, error) {
	prefix := Namespace + im.o.Session
	// The pattern matches the ref prefix itself and every ref below it.
	out, err := im.git.run(ctx, nil, nil, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)", "--", prefix)
	if err != nil {
		return nil, fmt.Errorf("read the refs under %s in %s: %w", prefix, im.o.Repo, err)
	}
	old := map[string]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\x00")
		if len(f) != 3 {
			return nil, fmt.Errorf("git for-each-ref said %q", cut(line, 100))
		}
		existing, oid, symref := f[0], f[1], f[2]
		for b := range take {
			ref := prefix + "/" + b
			switch {
			case existing == ref && symref != "":
				return nil, fmt.Errorf("%s in %s is a symbolic ref (to %s); paddock does not write through it: "+
					"remove it (git update-ref -d --no-deref %s), then fetch again: %w", ref, im.o.Repo, strconv.Quote(symref), ref, errdefs.ErrConflict)
			case existing == ref:
				old[ref] = oid
			case strings.HasPrefix(ref, existing+"/") || strings.HasPrefix(existing, ref+"/"):
				return nil, fmt.Errorf("ref %s in %s is in the way of %s (a ref cannot be both a name and a directory of names): "+
					"rename or remove it (git update-ref -d %s), then fetch again: %w", existing, im.o.Repo, ref, existing, errdefs.ErrConflict)
			}
		}
	}
	return old, nil
}

// updateRefs sets the refs of take in one transaction, each from its
// value in old, and says what it did.
func (im *importer) updateRefs(ctx context.Context, take map[string]Ref, old map[string]string) ([]Imported, error) {
	prefix := Namespace + im.o.Session + "/"
	branches := sortedKeys(take)
	zero := strings.Repeat("0", len(take[branches[0]].OID))
	var tx bytes.Buffer
	var done []Imported
	for _, b := range branches {
		ref, oid := prefix+b, take[b].OID
		done = append(done, Imported{Branch: b, Ref: ref, OID: oid, Old: old[ref]})
		from := old[ref]
		if from == "" {
			from = zero // must not exist yet
		}
		fmt.Fprintf(&tx, "update %s\x00%s\x00%s\x00", ref, oid, from)
	}
	_, err := im.git.run(ctx, nil, tx.Bytes(), "update-ref", "--no-deref", "--stdin", "-z", "-m", "paddock: from session "+im.o.Session)
	if err != nil {
		return nil, fmt.Errorf("set the session's refs under %s in %s (one changed meanwhile?): %w; "+
			"the objects are in the repository, fetch again to set them: %w", prefix, im.o.Repo, err, errdefs.ErrConflict)
	}
	return done, nil
}

// overOr is errdefs.ErrLimit's error if the stream went over the bound
// (which is why it ended where it did), else err.
func (im *importer) overOr(in *counter, err error) error {
	if in.over(im.max) {
		return im.tooLarge()
	}
	return err
}

func (im *importer) tooLarge() error {
	return fmt.Errorf("the bundle from the box is larger than %d bytes, the bound of an import: nothing was imported; "+
		"look at what the session committed (large files?), or raise the bound: %w", im.max, errdefs.ErrLimit)
}

// counter counts what is read through it; Import reads the count while
// the copy to git may still run.
type counter struct {
	r io.Reader
	n atomic.Int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// over says more than max bytes were read.
func (c *counter) over(max int64) bool { return c.n.Load() > max }

// describe is the refusals in one line.
func describe(refused []Refusal) string {
	if len(refused) == 0 {
		return "it names none"
	}
	var parts []string
	for i, r := range refused {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(refused)-5))
			break
		}
		parts = append(parts, r.String())
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]Ref) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cut is s cut to n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Pack writes to w a pack of every object the commit base reaches in the
// repository o.Repo (git pack-objects --revs), read as o.UID with the same
// safety as Import; only o.Repo, o.UID, o.GID, o.Git and o.Env count. It
// is a clone session's history for a box that cannot see the repository
// (the kubernetes backend): the box makes its clone from it.
func Pack(ctx context.Context, o Options, base string, w io.Writer) error {
	if !IsOID(base) {
		return fmt.Errorf("%q is not a full object id: %w", base, errdefs.ErrInvalid)
	}
	git, err := openRepo(&o)
	if err != nil {
		return err
	}
	cmd := git.gitCmd(ctx, nil, "pack-objects", "--revs", "--stdout", "--delta-base-offset", "-q")
	stderr := &tail{max: maxStderr}
	cmd.Stdin = strings.NewReader(base + "\n")
	cmd.Stdout, cmd.Stderr = w, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git pack-objects in %s: %w: %s", o.Repo, err, stderr)
	}
	return nil
}

// PushOptions are what Push sends where.
type PushOptions struct {
	// URL is the https:// remote (a service host's repository).
	URL string
	// Src is the ref or commit pushed, Dst the branch it lands on there.
	Src, Dst string
	// User and Token answer git's credential request (the token travels
	// in the environment of the owner's git, never in its arguments).
	User  string
	Token secret.Value
	// CAFile, if set, holds the only roots the remote's certificate may
	// chain to (services.ca_file).
	CAFile string
}

// Push pushes p.Src of the repository o.Repo to p.Dst at p.URL, as o.UID,
// with the safety of Import but for one transport, https, to that remote:
// no hook (pre-push included), no other credential helper, no config of
// the host's or the owner's but the repository's own. Not a force push:
// the remote refuses what is not a fast-forward. It returns git's
// --porcelain report.
func Push(ctx context.Context, o Options, p PushOptions) (string, error) {
	if !strings.HasPrefix(p.URL, "https://") || strings.ContainsAny(p.URL, " \n") {
		return "", fmt.Errorf("push to %q: https only: %w", p.URL, errdefs.ErrInvalid)
	}
	if strings.HasPrefix(p.Dst, "-") || strings.HasPrefix(p.Src, "-") || strings.ContainsAny(p.Src+p.Dst, ": \n") {
		return "", fmt.Errorf("push %q to %q: not a ref: %w", p.Src, p.Dst, errdefs.ErrInvalid)
	}
	git, err := openRepo(&o)
	if err != nil {
		return "", err
	}
	env := []string{"GIT_ALLOW_PROTOCOL=https", "PADDOCK_PUSH_USER=" + p.User, "PADDOCK_PUSH_TOKEN=" + p.Token.Reveal()}
	if p.CAFile != "" {
		env = append(env, "GIT_SSL_CAINFO="+p.CAFile)
	}
	out, err := git.run(ctx, env, nil, "-c", "protocol.https.allow=always",
		"-c", `credential.helper=!f() { test "$1" = get && printf 'username=%s\npassword=%s\n' "$PADDOCK_PUSH_USER" "$PADDOCK_PUSH_TOKEN"; }; f`,
		"push", "--porcelain", "--no-verify", "--", p.URL, p.Src+":refs/heads/"+p.Dst)
	if err != nil {
		return string(out), fmt.Errorf("git push to %s: %w", p.URL, err)
	}
	return string(out), nil
}

// CurrentBranch is the branch HEAD names in the repository o.Repo (read
// as o.UID with Import's safety), or an error for a detached HEAD.
func CurrentBranch(ctx context.Context, o Options) (string, error) {
	git, err := openRepo(&o)
	if err != nil {
		return "", err
	}
	out, err := git.run(ctx, nil, nil, "symbolic-ref", "--quiet", "--short", "HEAD")
	b := strings.TrimSpace(string(out))
	if err != nil || b == "" {
		return "", fmt.Errorf("%s is on no branch (a detached HEAD): check one out first: %w", o.Repo, errdefs.ErrInvalid)
	}
	return b, nil
}

// Subject is the first line of commit's message in the repository o.Repo.
func Subject(ctx context.Context, o Options, commit string) (string, error) {
	git, err := openRepo(&o)
	if err != nil {
		return "", err
	}
	out, err := git.run(ctx, nil, nil, "show", "-s", "--no-show-signature", "--format=%s", "--end-of-options", commit)
	return strings.TrimSpace(string(out)), err
}
