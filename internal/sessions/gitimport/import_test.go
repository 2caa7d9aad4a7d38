package gitimport

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// The tests run real git. Run as root (as CI does) the host repository
// belongs to nobody (65534), so every git of an import runs as another
// user than the test; otherwise to the test's own user.

// fixture is a host repository, with one commit on main, and a clone of
// it where a session's work is made: the box.
type fixture struct {
	t        *testing.T
	dir      string // holds both; world-traversable, for the owner
	host     string // the host's working tree
	gitDir   string
	box      string
	base     string // main's commit
	uid, gid uint32
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
}

// owner is who the host repository belongs to.
func owner() (uint32, uint32) {
	if os.Geteuid() == 0 {
		return 65534, 65534
	}
	return uint32(os.Geteuid()), uint32(os.Getegid())
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	needGit(t)
	dir, err := os.MkdirTemp("", "gitimport-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, host: filepath.Join(dir, "host"), box: filepath.Join(dir, "box")}
	f.gitDir = filepath.Join(f.host, ".git")
	f.uid, f.gid = owner()
	f.git(dir, "init", "-q", "-b", "main", f.host)
	f.write(f.host, "README", "hello\n")
	f.git(f.host, "add", "README")
	f.git(f.host, "commit", "-qm", "base")
	f.base = f.git(f.host, "rev-parse", "HEAD")
	f.git(dir, "clone", "-q", "--no-hardlinks", f.host, f.box)
	f.git(f.box, "checkout", "-qb", "paddock/x")
	f.chown()
	return f
}

// chown gives the host repository to its owner.
func (f *fixture) chown() {
	f.t.Helper()
	err := filepath.WalkDir(f.host, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(f.uid), int(f.gid))
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// git runs git as the test in dir (the box, or the host before chown)
// and returns its output, trimmed.
func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.gitIn(dir, nil, args...)
	if err != nil {
		f.t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func (f *fixture) gitIn(dir string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@example.org",
		"GIT_COMMITTER_NAME=C", "GIT_COMMITTER_EMAIL=c@example.org")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

func (f *fixture) write(dir, name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// commit commits a change in the box and returns its id.
func (f *fixture) commit(name, content string) string {
	f.t.Helper()
	f.write(f.box, name, content)
	f.git(f.box, "add", name)
	f.git(f.box, "commit", "-qm", "change "+name)
	return f.git(f.box, "rev-parse", "HEAD")
}

// bundle is git bundle create - args in the box.
func (f *fixture) bundle(args ...string) []byte {
	f.t.Helper()
	return f.bundleV("2", args...)
}

// bundleV is a bundle of format version.
func (f *fixture) bundleV(version string, args ...string) []byte {
	f.t.Helper()
	out, err := f.gitIn(f.box, nil, append([]string{"bundle", "create", "-q", "--version=" + version, "-"}, args...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// asOwner makes cmd run as the host repository's owner.
func (f *fixture) asOwner(cmd *exec.Cmd) *exec.Cmd {
	if os.Geteuid() != int(f.uid) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: f.uid, Gid: f.gid}}
	}
	return cmd
}

// markers makes a directory of marks and returns it, with prog: a
// program that leaves a mark named name when run, then runs tail.
func (f *fixture) markers(tail string) (marks string, prog func(name string) string) {
	marks = filepath.Join(f.dir, "marks")
	bin := filepath.Join(f.dir, "bin")
	openDir(f.t, marks)
	openDir(f.t, bin)
	return marks, func(name string) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch '"+filepath.Join(marks, name)+"'\n"+tail+"\n"), 0o755); err != nil {
			f.t.Fatal(err)
		}
		return p
	}
}

// openDir makes a directory anyone may write in (the owner's processes
// leave marks and traces there).
func openDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
}

// hostRef is what ref is in the host repository ("" if none), read as
// the owner would.
func (f *fixture) hostRef(ref string) string {
	f.t.Helper()
	out, _ := f.gitIn(f.host, nil, "rev-parse", "--verify", "-q", ref)
	return strings.TrimSpace(string(out))
}

func (f *fixture) opts(session string) Options {
	return Options{Repo: f.host, Session: session, UID: f.uid, GID: f.gid}
}

// importBytes imports b and checks that nothing but objects and the
// session's refs changed in the repository.
func (f *fixture) importBytes(o Options, b []byte) (Result, error) {
	f.t.Helper()
	before := snapshot(f.t, f.gitDir)
	res, err := Import(context.Background(), o, bytes.NewReader(b))
	after := snapshot(f.t, f.gitDir)
	own := []string{"objects/", "refs/remotes/paddock/" + o.Session + "/", "logs/refs/remotes/paddock/" + o.Session + "/"}
	if err != nil {
		own = nil // nothing at all
	}
	diffSnapshots(f.t, before, after, own)
	return res, err
}

// snapshot is every file below dir but directories: its path, its type
// and mode, and its content's hash (or a link's target).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			v += " -> " + target
		} else {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diffSnapshots fails t for every file that differs, but under own.
func diffSnapshots(t *testing.T, before, after map[string]string, own []string) {
	t.Helper()
	owned := func(p string) bool {
		for _, o := range own {
			if strings.HasPrefix(p, o) {
				return true
			}
		}
		return false
	}
	for p, v := range before {
		if !owned(p) && after[p] != v {
			t.Errorf("the import changed %s: %q → %q", p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && !owned(p) {
			t.Errorf("the import made %s", p)
		}
	}
}

func TestImportBranch(t *testing.T) {
	for _, version := range []string{"2", "3"} {
		t.Run("v"+version, func(t *testing.T) {
			f := newFixture(t)
			tip := f.commit("work.txt", "the session's work\n")
			b := f.bundleV(version, "main..paddock/x")
			res, err := f.importBytes(f.opts("s1"), b)
			if err != nil {
				t.Fatal(err)
			}
			want := []Imported{{Branch: "paddock/x", Ref: "refs/remotes/paddock/s1/paddock/x", OID: tip}}
			if !reflect.DeepEqual(res.Imported, want) || len(res.Refused) != 0 || res.Bytes != int64(len(b)) {
				t.Fatalf("got %+v, want %+v and %d bytes", res, want, len(b))
			}
			if got := f.git(f.host, "log", "-1", "--format=%H %s", "refs/remotes/paddock/s1/paddock/x"); got != tip+" change work.txt" {
				t.Fatalf("git log in the host: %q", got)
			}
			if out := f.git(f.host, "fsck", "--strict", "--no-dangling"); out != "" {
				t.Fatalf("git fsck: %s", out)
			}
			f.checkOwned()

			// Again, with more work: the ref moves, its old value said.
			tip2 := f.commit("more.txt", "more\n")
			res, err = f.importBytes(f.opts("s1"), f.bundleV(version, "main..paddock/x"))
			want = []Imported{{Branch: "paddock/x", Ref: "refs/remotes/paddock/s1/paddock/x", OID: tip2, Old: tip}}
			if err != nil || !reflect.DeepEqual(res.Imported, want) {
				t.Fatalf("second import: %+v, %v", res, err)
			}
			// The same bundle once more: nothing moves.
			res, err = f.importBytes(f.opts("s1"), f.bundleV(version, "main..paddock/x"))
			want[0].Old = tip2
			if err != nil || !reflect.DeepEqual(res.Imported, want) {
				t.Fatalf("third import: %+v, %v", res, err)
			}
			f.checkOwned()
		})
	}
}

// checkOwned: every file of the host's git directory is its owner's.
func (f *fixture) checkOwned() {
	f.t.Helper()
	err := filepath.WalkDir(f.gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != f.uid {
			f.t.Errorf("%s belongs to uid %d, not the owner %d", p, st.Uid, f.uid)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestImportBareRepository(t *testing.T) {
	f := newFixture(t)
	bare := filepath.Join(f.dir, "bare.git")
	f.git(f.dir, "clone", "-q", "--bare", "--single-branch", "-b", "main", f.box, bare) // the box's main is the host's
	f.host, f.gitDir = bare, bare
	f.chown()
	tip := f.commit("work.txt", "work\n")
	res, err := f.importBytes(f.opts("s1"), f.bundle("main..paddock/x"))
	if err != nil || len(res.Imported) != 1 || f.hostRef("refs/remotes/paddock/s1/paddock/x") != tip {
		t.Fatalf("%+v, %v", res, err)
	}
	f.checkOwned()
}

// craft is a bundle of header and the pack of a real bundle made of args
// in the box.
func (f *fixture) craft(header string, args ...string) []byte {
	f.t.Helper()
	real := f.bundle(args...)
	h, err := ParseHeader(bufio.NewReader(bytes.NewReader(real)))
	if err != nil {
		f.t.Fatal(err)
	}
	return append([]byte(header), real[h.Len:]...)
}

func TestImportRefusesRefNames(t *testing.T) {
	f := newFixture(t)
	tip := f.commit("work.txt", "work\n")
	pre := "-" + f.base + " base\n"
	hostile := []string{"../../x", "refs/heads/-evil", "refs/tags/v1", "HEAD", "refs/heads/a\x1b]0;owned\a", "refs/heads/a..b",
		"refs/heads/x.lock", "refs/remotes/origin/main", "refs/heads/a@{1}", "refs/heads/.git/config"}
	var lines string
	for _, n := range hostile {
		lines += tip + " " + n + "\n"
	}

	t.Run("alone", func(t *testing.T) {
		res, err := f.importBytes(f.opts("s1"), f.craft("# v2 git bundle\n"+pre+lines+"\n", "main..paddock/x"))
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "holds no branch paddock takes") {
			t.Fatalf("got %v", err)
		}
		if len(res.Refused) != len(hostile) || len(res.Imported) != 0 {
			t.Fatalf("%+v", res)
		}
		for i, r := range res.Refused {
			if r.Ref != hostile[i] || r.Why == "" {
				t.Errorf("refusal %d: %+v", i, r)
			}
			if strings.ContainsAny(r.String(), "\x1b\a") {
				t.Errorf("refusal %q holds a control byte", r.String())
			}
		}
		if strings.ContainsAny(err.Error(), "\x1b\a") {
			t.Errorf("error %q holds a control byte", err)
		}
	})
	t.Run("beside a good one", func(t *testing.T) {
		res, err := f.importBytes(f.opts("s1"), f.craft("# v2 git bundle\n"+pre+lines+tip+" refs/heads/paddock/x\n\n", "main..paddock/x"))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Refused) != len(hostile) || len(res.Imported) != 1 || res.Imported[0].Branch != "paddock/x" {
			t.Fatalf("%+v", res)
		}
		refs := f.git(f.host, "for-each-ref", "--format=%(refname)")
		if refs != "refs/heads/main\nrefs/remotes/origin/main\nrefs/remotes/paddock/s1/paddock/x" && refs != "refs/heads/main\nrefs/remotes/paddock/s1/paddock/x" {
			t.Fatalf("refs of the host:\n%s", refs)
		}
	})
	t.Run("not asked for", func(t *testing.T) {
		o := f.opts("s2")
		o.Branches = []string{"paddock/y"}
		res, err := f.importBytes(o, f.bundle("main..paddock/x"))
		if err == nil || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Why, "not a branch paddock asked") {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("a and a/b", func(t *testing.T) {
		res, err := f.importBytes(f.opts("s4"), f.craft("# v2 git bundle\n"+pre+tip+" refs/heads/a\n"+tip+" refs/heads/a/b\n"+tip+" refs/heads/c\n\n", "main..paddock/x"))
		if err != nil || len(res.Imported) != 1 || res.Imported[0].Branch != "c" || len(res.Refused) != 2 {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("HEAD only", func(t *testing.T) {
		_, err := f.importBytes(f.opts("s3"), f.bundle("main..HEAD"))
		if !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Fatalf("got %v", err)
		}
	})
}

// object writes a literal object of kind in the box (git hash-object
// --literally: no check) and returns its id.
func (f *fixture) object(kind string, content []byte) string {
	f.t.Helper()
	out, err := f.gitIn(f.box, content, "hash-object", "-t", kind, "-w", "--literally", "--stdin")
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// hostObject writes a literal object into the host repository, as its
// owner would have it.
func (f *fixture) hostObject(kind string, content []byte) string {
	f.t.Helper()
	out, err := f.gitIn(f.host, content, "hash-object", "-t", kind, "-w", "--literally", "--stdin")
	if err != nil {
		f.t.Fatal(err)
	}
	f.chown()
	return strings.TrimSpace(string(out))
}

// sideBranch makes, in the box, a branch side off main with two commits
// (a file, then a line more in it, so that the second's pack is thin on
// the first) and returns them.
func (f *fixture) sideBranch() (first, second string) {
	f.t.Helper()
	f.git(f.box, "checkout", "-qb", "side", "main")
	first = f.commit("big.txt", strings.Repeat("a line of the file\n", 500))
	second = f.commit("big.txt", strings.Repeat("a line of the file\n", 500)+"one more\n")
	return first, second
}

// rawCommit is a commit object's content: tree, on the base.
func (f *fixture) rawCommit(tree string) []byte {
	return []byte("tree " + tree + "\nparent " + f.base + "\nauthor A <a@example.org> 1 +0000\ncommitter C <c@example.org> 1 +0000\n\nx\n")
}

// tree is a tree object's content: entries of mode, name and id.
func tree(entries ...string) []byte {
	var b bytes.Buffer
	for i := 0; i < len(entries); i += 3 {
		raw, _ := hex.DecodeString(entries[i+2])
		b.WriteString(entries[i] + " " + entries[i+1] + "\x00")
		b.Write(raw)
	}
	return b.Bytes()
}

// packOf is a bundle of a ref to tip and a pack of exactly objs, built
// on the base.
func (f *fixture) packOf(tip string, objs ...string) []byte {
	f.t.Helper()
	pack, err := f.gitIn(f.box, []byte(strings.Join(objs, "\n")+"\n"), "pack-objects", "-q", "--stdout")
	if err != nil {
		f.t.Fatal(err)
	}
	return append([]byte("# v2 git bundle\n-"+f.base+" base\n"+tip+" refs/heads/paddock/x\n\n"), pack...)
}

func TestImportRefusesBadObjects(t *testing.T) {
	f := newFixture(t)
	baseTree := f.git(f.box, "rev-parse", "main^{tree}")
	blob := f.object("blob", []byte("evil\n"))
	commitOf := func(treeID string) string {
		return f.object("commit", f.rawCommit(treeID))
	}
	for _, tc := range []struct {
		name, fsck string
		make       func() []string // the tip, then the other objects
	}{
		{"a .git entry", "hasDotgit", func() []string {
			tr := f.object("tree", tree("100644", ".git", blob))
			return []string{commitOf(tr), tr, blob}
		}},
		{"a .GIT directory", "hasDotgit", func() []string {
			tr := f.object("tree", tree("40000", ".GIT", baseTree))
			return []string{commitOf(tr), tr}
		}},
		{"a .. entry", "hasDotdot", func() []string {
			tr := f.object("tree", tree("40000", "..", baseTree))
			return []string{commitOf(tr), tr}
		}},
		{"a zero-padded mode", "zeroPaddedFilemode", func() []string {
			tr := f.object("tree", tree("0100644", "a", blob))
			return []string{commitOf(tr), tr, blob}
		}},
		{"entries out of order", "treeNotSorted", func() []string {
			tr := f.object("tree", tree("100644", "b", blob, "100644", "a", blob))
			return []string{commitOf(tr), tr, blob}
		}},
		{"a .gitmodules url that is an option", "gitmodulesUrl", func() []string {
			gm := f.object("blob", []byte("[submodule \"x\"]\n\tpath = x\n\turl = -oProxyCommand=evil\n"))
			tr := f.object("tree", tree("100644", ".gitmodules", gm))
			return []string{commitOf(tr), tr, gm}
		}},
		{"a .gitmodules blob the repository has", "gitmodulesUrl", func() []string {
			// The blob is not in the pack: git checks it after it wrote the
			// pack (fsck_finish), so only the quarantine keeps that pack out.
			gm := f.hostObject("blob", []byte("[submodule \"x\"]\n\tpath = x\n\turl = -oProxyCommand=evil\n"))
			tr := f.object("tree", tree("100644", ".gitmodules", gm))
			return []string{commitOf(tr), tr}
		}},
		{"a commit with no email", "missingEmail", func() []string {
			c := f.object("commit", []byte("tree "+baseTree+"\nparent "+f.base+"\nauthor A 1 +0000\ncommitter C <c@example.org> 1 +0000\n\nx\n"))
			return []string{c}
		}},
		{"a tree naming a missing blob", "did not receive expected object", func() []string {
			tr := f.object("tree", tree("100644", "a", strings.Repeat("ab", 20)))
			return []string{commitOf(tr), tr}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.make()
			res, err := f.importBytes(f.opts("s1"), f.packOf(objs[0], objs...))
			if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.fsck) || !strings.Contains(err.Error(), "nothing was imported") {
				t.Fatalf("got %+v, %v; want git to refuse it for %s", res, err, tc.fsck)
			}
			if res.Imported != nil {
				t.Fatalf("imported %+v", res.Imported)
			}
			noQuarantine(t, f.gitDir)
		})
	}
}

func noQuarantine(t *testing.T, gitDir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "tmp_objdir-*"))
	if len(m) > 0 {
		t.Fatalf("quarantine left behind: %v", m)
	}
}

func TestImportRefusesBadTips(t *testing.T) {
	f := newFixture(t)
	f.commit("work.txt", "work\n")
	treeID := f.git(f.box, "rev-parse", "HEAD^{tree}")
	blob := f.git(f.box, "rev-parse", "HEAD:work.txt")
	for _, tc := range []struct{ name, tip, want string }{
		{"a tree", treeID, "names a tree, not a commit"},
		{"a blob", blob, "names a blob, not a commit"},
		{"nothing there", strings.Repeat("1", 40), "neither in the bundle nor in the repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := f.craft("# v2 git bundle\n-"+f.base+" base\n"+tc.tip+" refs/heads/paddock/x\n\n", "main..paddock/x")
			_, err := f.importBytes(f.opts("s1"), b)
			if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v", err)
			}
			noQuarantine(t, f.gitDir)
		})
	}
	t.Run("a commit the repository has, its tree not", func(t *testing.T) {
		// Nothing new in the pack: index-pack has nothing to check, and
		// only the walk (rev-list --objects) finds the hole.
		c := f.hostObject("commit", f.rawCommit(strings.Repeat("cd", 20)))
		b := f.craft("# v2 git bundle\n-"+f.base+" base\n"+c+" refs/heads/paddock/x\n\n", "main..paddock/x")
		_, err := f.importBytes(f.opts("s1"), b)
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "reaches objects that are neither") {
			t.Fatalf("got %v", err)
		}
		noQuarantine(t, f.gitDir)
	})
	t.Run("history missing behind a prerequisite the header hides", func(t *testing.T) {
		// A thin pack built on the box's own commit, whose header does not
		// name it: git index-pack finds no delta base, or rev-list no parent.
		side, top := f.sideBranch()
		b := f.craft("# v2 git bundle\n"+top+" refs/heads/paddock/x\n\n", side+".."+"side")
		_, err := f.importBytes(f.opts("s1"), b)
		if !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Fatalf("got %v", err)
		}
		noQuarantine(t, f.gitDir)
	})
}

func TestImportMissingPrerequisites(t *testing.T) {
	f := newFixture(t)
	first := f.commit("one.txt", "one\n")
	f.commit("two.txt", "two\n")
	_, err := f.importBytes(f.opts("s1"), f.bundle(first+"..paddock/x"))
	if !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "builds on commits this repository does not have: "+first[:12]) {
		t.Fatalf("got %v", err)
	}
	noQuarantine(t, f.gitDir)
}

// endless is a bundle whose pack holds one blob claiming 2 GiB, its
// deflate stream stored (not compressed), so git reads as much as it is
// given; read counts what was read of it.
func endless(t *testing.T, header string) (io.Reader, *atomic.Int64) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	go func() {
		w := bufio.NewWriter(pw)
		w.WriteString(header + "PACK\x00\x00\x00\x02\x00\x00\x00\x01")
		// Type 3 (blob), size 2^31: 0xb0 | size's low 4 bits, then 7 bits a byte.
		size := uint64(2 << 30)
		c := byte(0x30 | size&0x0f)
		for size >>= 4; size > 0; size >>= 7 {
			w.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
		}
		w.WriteByte(c)
		z, _ := zlib.NewWriterLevel(w, zlib.NoCompression)
		zeros := make([]byte, 64<<10)
		for i := 0; i < (2<<30)/len(zeros); i++ {
			if _, err := z.Write(zeros); err != nil {
				return
			}
		}
		z.Close()
		w.Flush()
		pw.Close()
	}()
	c := &counter{r: pr}
	return c, &c.n
}

func TestImportSizeBound(t *testing.T) {
	f := newFixture(t)
	tip := f.commit("work.txt", "work\n")
	header := "# v2 git bundle\n-" + f.base + " base\n" + tip + " refs/heads/paddock/x\n\n"
	o := f.opts("s1")
	o.MaxBytes = 1 << 20

	t.Run("a 2 GiB stream", func(t *testing.T) {
		r, read := endless(t, header)
		before := snapshot(t, f.gitDir)
		start := time.Now()
		res, err := Import(context.Background(), o, r)
		if !errdefs.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
			t.Fatalf("got %v", err)
		}
		if res.Bytes != o.MaxBytes+1 || read.Load() > o.MaxBytes+1 {
			t.Fatalf("read %d (Result.Bytes %d) with a bound of %d", read.Load(), res.Bytes, o.MaxBytes)
		}
		diffSnapshots(t, before, snapshot(t, f.gitDir), nil)
		noQuarantine(t, f.gitDir)
		t.Logf("refused in %v", time.Since(start))
	})
	t.Run("a header past the bound", func(t *testing.T) {
		o := o
		o.MaxBytes = int64(len(header)) - 10
		r, _ := endless(t, header)
		_, err := Import(context.Background(), o, r)
		if !errdefs.Is(err, errdefs.ErrLimit) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a bundle just within it", func(t *testing.T) {
		b := f.bundle("main..paddock/x")
		o := o
		o.MaxBytes = int64(len(b))
		if _, err := f.importBytes(o, b); err != nil {
			t.Fatal(err)
		}
		o.MaxBytes--
		if _, err := f.importBytes(o, b); !errdefs.Is(err, errdefs.ErrLimit) {
			t.Fatalf("one byte over: %v", err)
		}
	})
	t.Run("a pack claiming more objects than fit", func(t *testing.T) {
		b := append([]byte(header), "PACK\x00\x00\x00\x02\xff\xff\xff\xff"...)
		if _, err := f.importBytes(o, b); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "claims 4294967295 objects") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no pack", func(t *testing.T) {
		for _, b := range []string{header, header + "PAC", header + "junk and more junk"} {
			if _, err := f.importBytes(o, []byte(b)); !errdefs.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("%q: got %v", b, err)
			}
		}
	})
	t.Run("a stream that stalls", func(t *testing.T) {
		b := f.bundle("main..paddock/x")
		pr, pw := io.Pipe()
		t.Cleanup(func() { pr.Close() })
		go pw.Write(b[:len(b)-30]) // and no more, nor an end
		before := snapshot(t, f.gitDir)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := Import(ctx, o, pr)
		if !errdefs.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		diffSnapshots(t, before, snapshot(t, f.gitDir), nil)
		noQuarantine(t, f.gitDir)
	})
	t.Run("cut short", func(t *testing.T) {
		b := f.bundle("main..paddock/x")
		_, err := f.importBytes(o, b[:len(b)-30])
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "nothing was imported") {
			t.Fatalf("got %v", err)
		}
		noQuarantine(t, f.gitDir)
	})
}

// hookNames are the hooks githooks(5) lists, and a few more.
var hookNames = []string{"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit", "prepare-commit-msg",
	"commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
	"post-receive", "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
	"fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change"}

// TestImportRunsNothingOfTheRepository: a repository whose config and
// hooks name programs everywhere git could run one, and a partial clone
// whose promisor remote is a command (ext::), imports a bundle, refuses
// one built on a commit it lacks, and one whose pack is thin on a base it
// lacks, without running any of them; the same programs do run for plain
// git in the same repository, so the test shows the config is live.
func TestImportRunsNothingOfTheRepository(t *testing.T) {
	f := newFixture(t)
	marks, prog := f.markers("cat >/dev/null 2>&1 </dev/null\nexit 1")
	hooks := filepath.Join(f.dir, "hooks")
	os.Mkdir(hooks, 0o755)
	for _, h := range hookNames {
		p := prog("hook-" + h)
		for _, dir := range []string{hooks, filepath.Join(f.gitDir, "hooks")} {
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(filepath.Join(dir, h), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	alt := filepath.Join(f.dir, "alt.git")
	f.git(f.dir, "clone", "-q", "--bare", f.box, alt)
	if err := os.WriteFile(filepath.Join(f.gitDir, "objects", "info", "alternates"), []byte(filepath.Join(alt, "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.gitDir, "info", "attributes"), []byte("* filter=evil diff=evil merge=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.repositoryformatversion", "1"},
		{"extensions.partialClone", "origin"},
		{"remote.origin.promisor", "true"},
		{"remote.origin.url", "ext::" + prog("ext-remote")},
		{"remote.origin.uploadpack", prog("uploadpack")},
		{"remote.origin.receivepack", prog("receivepack")},
		{"protocol.allow", "always"},
		{"protocol.ext.allow", "always"},
		{"protocol.file.allow", "always"},
		{"core.hooksPath", hooks},
		{"core.fsmonitor", prog("fsmonitor")},
		{"core.alternateRefsCommand", prog("alternateRefsCommand")},
		{"core.sshCommand", prog("sshCommand")},
		{"core.gitProxy", prog("gitProxy")},
		{"core.askPass", prog("askPass")},
		{"core.pager", prog("pager")},
		{"core.editor", prog("editor")},
		{"pager.cat-file", prog("pager-cat-file")},
		{"pager.for-each-ref", prog("pager-for-each-ref")},
		{"credential.helper", "!" + prog("credential-helper")},
		{"gc.auto", "1"},
		{"gc.autoDetach", "false"},
		{"gc.autoPackLimit", "1"},
		{"maintenance.auto", "true"},
		{"fetch.writeCommitGraph", "true"},
		{"uploadpack.packObjectsHook", prog("packObjectsHook")},
		{"diff.external", prog("diff-external")},
		{"diff.evil.textconv", prog("textconv")},
		{"diff.evil.command", prog("diff-command")},
		{"filter.evil.clean", prog("filter-clean")},
		{"filter.evil.smudge", prog("filter-smudge")},
		{"filter.evil.process", prog("filter-process")},
		{"merge.evil.driver", prog("merge-driver")},
		{"gpg.program", prog("gpg")},
		{"log.showSignature", "true"},
		{"sequence.editor", prog("sequence-editor")},
		{"fetch.fsckObjects", "false"},
		{"transfer.fsckObjects", "false"},
		{"fsck.hasDotgit", "ignore"},
		{"fetch.fsck.hasDotgit", "ignore"},
	} {
		f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), kv[0], kv[1])
	}
	f.chown()
	markers := func() []string {
		m, _ := filepath.Glob(filepath.Join(marks, "*"))
		return m
	}

	tip := f.commit("work.txt", "work\n")
	res, err := f.importBytes(f.opts("s1"), f.bundle("main..paddock/x"))
	if err != nil || len(res.Imported) != 1 || f.hostRef("refs/remotes/paddock/s1/paddock/x") != tip {
		t.Fatalf("import: %+v, %v", res, err)
	}

	// A prerequisite the repository lacks: in a partial clone, git would
	// fetch it from the promisor remote.
	side, top := f.sideBranch()
	if _, err := f.importBytes(f.opts("s1"), f.bundle(side+"..side")); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("missing prerequisite: %v", err)
	}
	// A thin pack on a base the header does not name: index-pack
	// --fix-thin would fetch the base.
	b := f.craft("# v2 git bundle\n"+top+" refs/heads/side\n\n", side+"..side")
	if _, err := f.importBytes(f.opts("s1"), b); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("thin pack on a missing base: %v", err)
	}
	// An object fsck refuses, which the repository's fsck.* would let in.
	blob := f.object("blob", []byte("x\n"))
	tr := f.object("tree", tree("100644", ".git", blob))
	c := f.object("commit", f.rawCommit(tr))
	if _, err := f.importBytes(f.opts("s1"), f.packOf(c, c, tr, blob)); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("hasDotgit with fsck.hasDotgit=ignore: %v", err)
	}
	// ResolveCommit, with the same safety: a name it finds, and an object
	// id the repository lacks, which a partial clone would fetch.
	if oid, err := ResolveCommit(context.Background(), f.opts(""), "main"); err != nil || oid != f.base {
		t.Fatalf("ResolveCommit main: %q %v, want %s", oid, err, f.base)
	}
	if _, err := ResolveCommit(context.Background(), f.opts(""), strings.Repeat("1", 40)); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("ResolveCommit of a missing object: %v", err)
	}
	if m := markers(); len(m) > 0 {
		t.Fatalf("the import ran the repository's programs: %v", m)
	}
	noQuarantine(t, f.gitDir)

	// The control: plain git, as the owner, runs them.
	plain := func(stdin string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = f.host
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
		cmd.Stdin = strings.NewReader(stdin)
		_ = f.asOwner(cmd).Run()
	}
	plain("", "update-ref", "refs/heads/control", tip)
	plain(strings.Repeat("1", 40)+"\n", "cat-file", "--batch-check")
	plain("", "status")
	got := strings.Join(markers(), " ")
	for _, want := range []string{"hook-reference-transaction", "ext-remote", "fsmonitor"} {
		if !strings.Contains(got, want) {
			t.Errorf("control: plain git did not run %s (ran: %s); the test's repository is not as hostile as it means to be", want, got)
		}
	}
}

// TestImportRunsOnlyGit traces every program the import's git processes
// start (strace -f through Options.Git): git itself, nothing else.
func TestImportRunsOnlyGit(t *testing.T) {
	f := newFixture(t)
	realGit, _ := exec.LookPath("git")
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("no strace")
	}
	logs := filepath.Join(f.dir, "trace")
	openDir(t, logs)
	wrapper := filepath.Join(f.dir, "git-traced")
	script := fmt.Sprintf("#!/bin/sh\nexec %s -f -qq -e trace=execve -o %s/trace.$$ %s \"$@\"\n", strace, logs, realGit)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(wrapper, "--version").CombinedOutput(); err != nil {
		t.Skipf("strace does not run here: %v: %s", err, out)
	}
	os.RemoveAll(logs)
	openDir(t, logs)
	f.commit("work.txt", "work\n")
	o := f.opts("s1")
	o.Git = wrapper
	if _, err := Import(context.Background(), o, bytes.NewReader(f.bundle("main..paddock/x"))); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(logs, "trace.*"))
	if len(files) < 5 {
		t.Fatalf("%d traces", len(files))
	}
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for line := range strings.Lines(string(b)) {
			_, call, ok := strings.Cut(line, "execve(\"")
			if !ok {
				continue
			}
			prog, _, _ := strings.Cut(call, "\"")
			if prog != realGit {
				t.Errorf("an import's git ran %s: %s", prog, line)
			}
		}
	}
}

func TestImportRefsInTheWay(t *testing.T) {
	f := newFixture(t)
	f.commit("work.txt", "work\n")
	b := f.bundle("main..paddock/x")
	ownerGit := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = f.host
		if out, err := f.asOwner(cmd).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	t.Run("a symbolic ref", func(t *testing.T) {
		ownerGit("symbolic-ref", "refs/remotes/paddock/s1/paddock/x", "refs/heads/main")
		if f.hostRef("refs/remotes/paddock/s1/paddock/x") != f.base {
			t.Fatal("no symbolic ref")
		}
		_, err := f.importBytes(f.opts("s1"), b)
		if !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "symbolic ref") {
			t.Fatalf("got %v", err)
		}
		if f.hostRef("refs/heads/main") != f.base {
			t.Fatal("main moved")
		}
	})
	t.Run("a ref where a directory goes", func(t *testing.T) {
		for _, ref := range []string{"refs/remotes/paddock/s2/paddock", "refs/remotes/paddock/s3/paddock/x/y", "refs/remotes/paddock/s4"} {
			ownerGit("update-ref", ref, f.base)
		}
		for _, s := range []string{"s2", "s3", "s4"} {
			_, err := f.importBytes(f.opts(s), b)
			if !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "in the way") {
				t.Fatalf("%s: got %v", s, err)
			}
		}
	})
}

func TestImportRepositoryChecks(t *testing.T) {
	f := newFixture(t)
	b := []byte("never read: every case fails before")
	for _, tc := range []struct {
		name string
		o    func() Options
		want error
		msg  string
	}{
		{"relative path", func() Options { o := f.opts("s1"); o.Repo = "host"; return o }, errdefs.ErrInvalid, "absolute"},
		{"not a repository", func() Options { o := f.opts("s1"); o.Repo = f.dir; return o }, errdefs.ErrNotFound, "not a git repository"},
		{".git a file", func() Options {
			wt := filepath.Join(f.dir, "worktree")
			os.Mkdir(wt, 0o755)
			f.write(wt, ".git", "gitdir: "+f.gitDir+"\n")
			o := f.opts("s1")
			o.Repo = wt
			return o
		}, errdefs.ErrInvalid, "is a file"},
		{".git a symlink", func() Options {
			wt := filepath.Join(f.dir, "linked")
			os.Mkdir(wt, 0o755)
			os.Symlink(f.gitDir, filepath.Join(wt, ".git"))
			o := f.opts("s1")
			o.Repo = wt
			return o
		}, errdefs.ErrInvalid, "symbolic link"},
		{"commondir", func() Options {
			wt := filepath.Join(f.dir, "wtgit")
			os.MkdirAll(filepath.Join(wt, ".git", "objects"), 0o755)
			os.MkdirAll(filepath.Join(wt, ".git", "refs"), 0o755)
			f.write(filepath.Join(wt, ".git"), "HEAD", "ref: refs/heads/main\n")
			f.write(filepath.Join(wt, ".git"), "commondir", f.gitDir+"\n")
			o := f.opts("s1")
			o.Repo = wt
			return o
		}, errdefs.ErrInvalid, "commondir"},
		{"another owner", func() Options { o := f.opts("s1"); o.UID++; return o }, errdefs.ErrForbidden, "belongs to uid"},
		{"root", func() Options { o := f.opts("s1"); o.UID, o.GID = 0, 0; return o }, errdefs.ErrForbidden, "as root"},
		{"bad session", func() Options { o := f.opts("s1"); o.Session = "../x"; return o }, errdefs.ErrInvalid, "cannot name refs"},
		{"bad branch asked", func() Options { o := f.opts("s1"); o.Branches = []string{"-x"}; return o }, errdefs.ErrInvalid, "branch"},
		{"negative bound", func() Options { o := f.opts("s1"); o.MaxBytes = -1; return o }, errdefs.ErrInvalid, "size bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import(context.Background(), tc.o(), bytes.NewReader(b))
			if !errdefs.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want %v holding %q", err, tc.want, tc.msg)
			}
			if res.Bytes != 0 {
				t.Fatalf("read %d bytes", res.Bytes)
			}
		})
	}
}

func TestImportObjectFormat(t *testing.T) {
	f := newFixture(t)
	b := []byte("# v3 git bundle\n@object-format=sha256\n" + oid256 + " refs/heads/paddock/x\n\nPACK")
	_, err := f.importBytes(f.opts("s1"), b)
	if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "objects are sha256 but the repository") {
		t.Fatalf("got %v", err)
	}
}

// TestImportObjectBound: a bundle far under the size bound whose one blob
// inflates past the object bound (zeros compress well) is refused and
// leaves nothing; one under it comes in.
func TestImportObjectBound(t *testing.T) {
	f := newFixture(t)
	f.commit("zeros.bin", strings.Repeat("\x00", 64<<10))
	b := f.bundle("main..paddock/x")
	if len(b) > 4<<10 {
		t.Fatalf("the bundle is %d bytes; the test wants a small one", len(b))
	}
	o := f.opts("s1")
	o.MaxObject = 32 << 10
	_, err := f.importBytes(o, b)
	if !errdefs.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "blob of 65536 bytes") {
		t.Fatalf("a 64 KiB blob with a 32 KiB bound: %v", err)
	}
	noQuarantine(t, f.gitDir)
	o.MaxObject = 64 << 10
	if res, err := f.importBytes(o, b); err != nil || len(res.Imported) != 1 {
		t.Fatalf("at the bound: %+v %v", res, err)
	}
}
