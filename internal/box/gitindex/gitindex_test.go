package gitindex

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// The tests below make their indexes with the real git binary and check
// the parser against what git itself says of them (git ls-files --stage
// --debug -v, git fsck), not against the parser's own idea of the format.

// gitRepo is a repository made by the real git in a temporary directory,
// with no system or user configuration.
type gitRepo struct {
	tb     testing.TB
	bin    string
	home   string
	dir    string // the working tree
	gitDir string
}

// newRepo runs git init (with initArgs, e.g. --object-format=sha256) in a
// new temporary directory. It skips the test where git is not installed.
func newRepo(tb testing.TB, initArgs ...string) *gitRepo {
	tb.Helper()
	bin, err := exec.LookPath("git")
	if err != nil {
		tb.Skip("git is not installed")
	}
	root := tb.TempDir()
	r := &gitRepo{tb: tb, bin: bin, home: filepath.Join(root, "home"), dir: filepath.Join(root, "repo")}
	r.gitDir = filepath.Join(r.dir, ".git")
	for _, d := range []string{r.home, r.dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	r.git(append([]string{"init", "-q"}, initArgs...)...)
	return r
}

// run runs git in the working tree with extra environment variables and
// stdin, and returns its stdout.
func (r *gitRepo) run(env []string, stdin string, args ...string) (string, error) {
	r.tb.Helper()
	base := []string{
		"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
		"-c", "commit.gpgSign=false", "-c", "gc.auto=0", "-c", "core.fsmonitor=false",
	}
	cmd := exec.Command(r.bin, append(base, args...)...)
	cmd.Dir = r.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.home, "XDG_CONFIG_HOME="+r.home, "LC_ALL=C")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// git runs git and fails the test if it fails.
func (r *gitRepo) git(args ...string) string {
	r.tb.Helper()
	out, err := r.run(nil, "", args...)
	if err != nil {
		r.tb.Fatal(err)
	}
	return out
}

// hashObject stores content as a blob and returns its object id.
func (r *gitRepo) hashObject(content string) string {
	r.tb.Helper()
	out, err := r.run(nil, content, "hash-object", "-w", "--stdin")
	if err != nil {
		r.tb.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// pastTime is the mtime given to the files the tests write: an hour back, so
// that git never finds an entry racily clean (and so rewrites it).
var pastTime = time.Now().Add(-time.Hour)

// write writes a file in the working tree, making its directories.
func (r *gitRepo) write(name, content string, mode os.FileMode) {
	r.tb.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.Chtimes(p, pastTime, pastTime); err != nil {
		r.tb.Fatal(err)
	}
}

// read returns a file of the git directory.
func (r *gitRepo) read(name string) []byte {
	r.tb.Helper()
	b, err := os.ReadFile(filepath.Join(r.gitDir, name))
	if err != nil {
		r.tb.Fatal(err)
	}
	return b
}

// index returns the bytes of .git/index.
func (r *gitRepo) index() []byte { r.tb.Helper(); return r.read("index") }

// fsck runs git fsck on data as the index (GIT_INDEX_FILE): git verifies
// the checksum and the order of the entries there.
func (r *gitRepo) fsck(data []byte) error {
	r.tb.Helper()
	p := filepath.Join(r.tb.TempDir(), "index")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		r.tb.Fatal(err)
	}
	_, err := r.run([]string{"GIT_INDEX_FILE=" + p}, "", "fsck", "--connectivity-only", "--no-progress", "--no-dangling")
	return err
}

// longPath is a path longer than the 0xfff bytes an entry's flags can
// give its length, so it is stored with the length 0xfff and a NUL.
var longPath = strings.Repeat(strings.Repeat("p", 200)+"/", 22) + "long"

// populate commits a tree of regular files, an executable, a symlink, a
// gitlink, unusual names, nsimilar paths sharing a long prefix (for
// version 4's compression) and longPath (added without a file).
func (r *gitRepo) populate(nsimilar int) {
	r.tb.Helper()
	for _, name := range []string{"a", "b", "c d", "dir/x", "dir/sub/y", "é.txt", "tab\tand\nnewline", "new"} {
		r.write(name, "content of "+name+"\n", 0o644)
	}
	r.write("run.sh", "#!/bin/sh\n", 0o755)
	if err := os.Symlink("a", filepath.Join(r.dir, "link")); err != nil {
		r.tb.Fatal(err)
	}
	for i := 0; i < nsimilar; i++ {
		r.write(fmt.Sprintf("deep/path/to/some/file-%03d.txt", i), fmt.Sprint(i), 0o644)
	}
	r.git("add", "--", ".", ":!new")
	r.git("update-index", "--add", "--cacheinfo", "100644,"+r.hashObject("long\n")+","+longPath)
	r.git("commit", "-q", "-m", "one")
	head := strings.TrimSpace(r.git("rev-parse", "HEAD"))
	r.git("update-index", "--add", "--cacheinfo", "160000,"+head+",module")
	r.git("commit", "-q", "-m", "two")
}

// In-memory flag bits git prints with ls-files --debug (cache.h).
const (
	gitValid        = 0x8000
	gitStageMask    = 0x3000
	gitIntentToAdd  = 1 << 29
	gitSkipWorktree = 1 << 30
)

// gitEntry is one entry as git ls-files -v --stage --debug shows it.
type gitEntry struct {
	Tag   byte // ls-files -v: H cached, S skip-worktree, M unmerged; lowercase when assume-unchanged
	Mode  uint32
	OID   string
	Stage int
	Path  string
	Stat  Stat
	Flags uint32 // git's in-memory ce_flags
}

// lsFiles returns git's view of the index (merged, for a split index).
func (r *gitRepo) lsFiles(extra ...string) []gitEntry {
	r.tb.Helper()
	out := r.git(append([]string{"ls-files", "-v", "--stage", "--debug", "-z"}, extra...)...)
	es, err := parseLsFiles(out)
	if err != nil {
		r.tb.Fatalf("ls-files output: %v\n%q", err, out)
	}
	return es
}

// parseLsFiles parses records "T MODE OID STAGE\tPATH\0" each followed
// by the five lines of --debug.
func parseLsFiles(out string) ([]gitEntry, error) {
	var es []gitEntry
	for out != "" {
		nul := strings.IndexByte(out, 0)
		if nul < 0 {
			return nil, errors.New("no NUL")
		}
		head := out[:nul]
		out = out[nul+1:]
		tab := strings.IndexByte(head, '\t')
		if tab < 0 {
			return nil, fmt.Errorf("no tab in %q", head)
		}
		f := strings.Fields(head[:tab])
		if len(f) != 4 || len(f[0]) != 1 {
			return nil, fmt.Errorf("bad record %q", head)
		}
		e := gitEntry{Tag: f[0][0], OID: f[2], Path: head[tab+1:]}
		var nums []uint64
		for i, s := range []string{f[1], f[3]} {
			n, err := strconv.ParseUint(s, 8*(1-i)+10*i, 32)
			if err != nil {
				return nil, err
			}
			nums = append(nums, n)
		}
		e.Mode, e.Stage = uint32(nums[0]), int(nums[1])
		// ctime: S:N / mtime: S:N / dev: D ino: I / uid: U gid: G / size: Z flags: HEX
		var vals []string
		for range 5 {
			nl := strings.IndexByte(out, '\n')
			if nl < 0 {
				return nil, errors.New("debug lines cut short")
			}
			for _, w := range strings.Fields(out[:nl]) {
				if !strings.HasSuffix(w, ":") {
					vals = append(vals, strings.Split(w, ":")...)
				}
			}
			out = out[nl+1:]
		}
		if len(vals) != 10 {
			return nil, fmt.Errorf("debug values %q", vals)
		}
		var u [10]uint32
		for i, v := range vals {
			base := 10
			if i == 9 {
				base = 16
			}
			n, err := strconv.ParseUint(v, base, 32)
			if err != nil {
				return nil, err
			}
			u[i] = uint32(n)
		}
		e.Stat = Stat{CTimeSec: u[0], CTimeNsec: u[1], MTimeSec: u[2], MTimeNsec: u[3],
			Dev: u[4], Ino: u[5], UID: u[6], GID: u[7], Size: u[8]}
		e.Flags = u[9]
		es = append(es, e)
	}
	return es, nil
}

// checkEntries compares parsed entries with git's, one by one: path,
// mode, object id, stage, stat data, the three flags as git holds them,
// and the ls-files -v tag (lowercase: assume-unchanged; S: skip-worktree).
func checkEntries(tb testing.TB, got []Entry, want []gitEntry) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%d entries, git lists %d:\n got %q\nwant %q", len(got), len(want), paths(got), gitPaths(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Path != w.Path || g.Mode != w.Mode || g.OID != w.OID || g.Stage != w.Stage || g.Stat != w.Stat {
			tb.Errorf("entry %d:\n got %q %o %s %d %+v\nwant %q %o %s %d %+v", i,
				g.Path, g.Mode, g.OID, g.Stage, g.Stat, w.Path, w.Mode, w.OID, w.Stage, w.Stat)
		}
		if int(w.Flags&gitStageMask)>>12 != w.Stage {
			tb.Errorf("entry %d %q: git's flags %x and stage %d disagree", i, w.Path, w.Flags, w.Stage)
		}
		if g.AssumeValid != (w.Flags&gitValid != 0) || g.SkipWorktree != (w.Flags&gitSkipWorktree != 0) ||
			g.IntentToAdd != (w.Flags&gitIntentToAdd != 0) {
			tb.Errorf("entry %d %q: assume-valid %v skip-worktree %v intent-to-add %v; git's flags are %x",
				i, g.Path, g.AssumeValid, g.SkipWorktree, g.IntentToAdd, w.Flags)
		}
		lower := w.Tag >= 'a' && w.Tag <= 'z'
		if g.AssumeValid != lower || g.SkipWorktree != (w.Tag|0x20 == 's') {
			tb.Errorf("entry %d %q: assume-valid %v skip-worktree %v; git ls-files -v tags it %c",
				i, g.Path, g.AssumeValid, g.SkipWorktree, w.Tag)
		}
	}
}

func paths(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func gitPaths(es []gitEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

// gitHidden is the paths ls-files -v tags lowercase or S, in its order.
func gitHidden(es []gitEntry) []string {
	out := []string{}
	for _, e := range es {
		if e.Tag >= 'a' && e.Tag <= 'z' || e.Tag == 'S' {
			out = append(out, e.Path)
		}
	}
	return out
}

// checkHidden checks the index's hidden entries against both the list
// the test set up and git's ls-files -v.
func checkHidden(tb testing.TB, got []Entry, want []string, ls []gitEntry) {
	tb.Helper()
	if !slices.Equal(paths(got), want) {
		tb.Errorf("hidden %q, want %q", paths(got), want)
	}
	if !slices.Equal(paths(got), gitHidden(ls)) {
		tb.Errorf("hidden %q, git ls-files -v says %q", paths(got), gitHidden(ls))
	}
}

// mustParse parses data, failing the test on an error.
func mustParse(tb testing.TB, data []byte) *Index {
	tb.Helper()
	ix, err := Parse(data)
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return ix
}

// checkHiddenIn runs HiddenIn on the repository and checks its report
// against git.
func checkHiddenIn(tb testing.TB, r *gitRepo, want []string, ls []gitEntry) Report {
	tb.Helper()
	rep, err := HiddenIn(r.gitDir)
	if err != nil {
		tb.Fatalf("HiddenIn: %v", err)
	}
	if rep.NoIndex || rep.Index != filepath.Join(r.gitDir, "index") || rep.Entries != len(ls) {
		tb.Errorf("HiddenIn: NoIndex %v, Index %q, %d entries; want false, %q, %d",
			rep.NoIndex, rep.Index, rep.Entries, filepath.Join(r.gitDir, "index"), len(ls))
	}
	checkHidden(tb, rep.Hidden, want, ls)
	return rep
}

// sum returns body followed by its hash: an index whose checksum is right
// whatever body holds.
func sum(body []byte, hs int) []byte {
	out := bytes.Clone(body)
	if hs == SHA256Size {
		h := sha256.Sum256(body)
		return append(out, h[:]...)
	}
	h := sha1.Sum(body)
	return append(out, h[:]...)
}

// resum recomputes the checksum of an index file.
func resum(data []byte, hs int) []byte { return sum(data[:len(data)-hs], hs) }

// entryOffsets walks the entries of an index by the layout of git's
// index-format.txt: the offset of each, then of what follows.
func entryOffsets(data []byte, hs int) []int {
	v4 := binary.BigEndian.Uint32(data[4:]) == 4
	n := int(binary.BigEndian.Uint32(data[8:]))
	off := 12
	var offs []int
	for range n {
		offs = append(offs, off)
		fixed := 40 + hs + 2
		if binary.BigEndian.Uint16(data[off+40+hs:])&0x4000 != 0 {
			fixed += 2
		}
		if v4 {
			for data[off+fixed]&0x80 != 0 { // the varint
				fixed++
			}
			fixed++
			off += fixed + bytes.IndexByte(data[off+fixed:], 0) + 1
			continue
		}
		nul := bytes.IndexByte(data[off+fixed:], 0)
		off += (fixed + nul + 8) &^ 7
	}
	return append(offs, off)
}

// TestRealIndexes proves the parser reads what git writes, for SHA-1 and
// SHA-256 repositories and each index version: every entry (regular
// files, an executable, a symlink, a gitlink, names with spaces, tabs,
// newlines and UTF-8, a path longer than 0xfff bytes, version 4's prefix
// compressed paths) matches git ls-files field by field, assume-unchanged
// and skip-worktree (alone or together) are reported by Hidden and
// HiddenIn with the right paths, an intent-to-add entry is not, and the
// version is the one git chose (2 while only assume-unchanged is set, 3
// once skip-worktree forces extended flags).
func TestRealIndexes(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		for _, version := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/v%d", format, version), func(t *testing.T) {
				t.Parallel()
				r := newRepo(t, "--object-format="+format)
				const nsimilar = 60
				r.populate(nsimilar)
				r.git("update-index", "--assume-unchanged", "a", "dir/sub/y")
				want := []string{"a", "dir/sub/y"}
				if version >= 3 {
					r.git("update-index", "--skip-worktree", "b", "dir/sub/y", longPath)
					r.git("add", "-N", "new")
					want = []string{"a", "b", "dir/sub/y", longPath}
				}
				if version == 4 {
					r.git("update-index", "--index-version", "4")
				}
				data := r.index()
				if err := r.fsck(data); err != nil {
					t.Fatalf("git fsck rejects its own index: %v", err)
				}
				ix := mustParse(t, data)
				hs := map[string]int{"sha1": SHA1Size, "sha256": SHA256Size}[format]
				if ix.Version != version || ix.HashSize != hs || ix.Shared != "" {
					t.Errorf("version %d, hash size %d, shared %q; want %d, %d, none", ix.Version, ix.HashSize, ix.Shared, version, hs)
				}
				if !slices.Contains(ix.Extensions, "TREE") {
					t.Errorf("extensions %q: no TREE", ix.Extensions)
				}
				ls := r.lsFiles()
				checkEntries(t, ix.Entries, ls)
				checkHidden(t, ix.Hidden(), want, ls)
				for _, e := range ix.Entries {
					if len(e.OID) != 2*hs {
						t.Errorf("%q: object id %q", e.Path, e.OID)
					}
					if e.Path == "new" && (version >= 3) != e.IntentToAdd {
						t.Errorf("new: intent-to-add %v", e.IntentToAdd)
					}
				}
				if !slices.Contains(paths(ix.Entries), longPath) {
					t.Errorf("no entry %d bytes long", len(longPath))
				}
				// Version 4 writes the shared prefix once; 2 and 3 each time.
				wantPrefix := nsimilar
				if version == 4 {
					wantPrefix = 1
				}
				if n := bytes.Count(data, []byte("deep/path/to/some/")); n != wantPrefix {
					t.Errorf("the common prefix is in the file %d times, want %d", n, wantPrefix)
				}
				rep := checkHiddenIn(t, r, want, ls)
				if rep.Version != version || rep.HashSize != hs || rep.Shared != "" || !slices.Equal(rep.Extensions, ix.Extensions) {
					t.Errorf("HiddenIn: %+v", rep)
				}
				// Naming the hash gives the same; naming the other fails.
				if o, err := (Options{HashSize: hs}).Parse(data); err != nil || !reflect.DeepEqual(o, ix) {
					t.Errorf("Parse with HashSize %d: %v", hs, err)
				}
				other := SHA1Size + SHA256Size - hs
				if _, err := (Options{HashSize: other}).Parse(data); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Parse with HashSize %d: %v, want ErrCorrupt", other, err)
				}
			})
		}
	}
}

// TestOffsetTable proves that an index git writes with the entry offset
// table and end-of-entries extensions (IEOT, EOIE: index.threads) parses,
// in version 4 too where git restarts prefix compression at each block,
// and that an IEOT whose block does not start at an entry is refused.
func TestOffsetTable(t *testing.T) {
	for _, version := range []int{2, 4} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			r := newRepo(t)
			r.populate(60)
			r.git("update-index", "--index-version", strconv.Itoa(version))
			// A flag changed makes git write the index, with the tables.
			r.git("-c", "index.recordOffsetTable=true", "-c", "index.recordEndOfIndexEntries=true", "-c", "index.threads=4",
				"update-index", "--assume-unchanged", "b")
			data := r.index()
			ix := mustParse(t, data)
			if ix.Version != version || !slices.Contains(ix.Extensions, "IEOT") || !slices.Contains(ix.Extensions, "EOIE") {
				t.Fatalf("version %d, extensions %q; want %d with IEOT and EOIE", ix.Version, ix.Extensions, version)
			}
			ls := r.lsFiles()
			checkEntries(t, ix.Entries, ls)
			checkHidden(t, ix.Hidden(), []string{"b"}, ls)

			// The table: a version, then (offset, entry count) per block.
			at := bytes.Index(data, []byte("IEOT")) + 8
			be := binary.BigEndian
			if size := be.Uint32(data[at-4:]); size < 4+2*8 || be.Uint32(data[at:]) != 1 {
				t.Fatalf("IEOT of %d bytes, version %d: want 1 and two blocks or more", size, be.Uint32(data[at:]))
			}
			bad := bytes.Clone(data)
			bad[at+4+3]++ // the first block's offset, 12, is not an entry's
			if _, err := Parse(resum(bad, SHA1Size)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("a bad IEOT offset: %v, want ErrCorrupt", err)
			}
			// Move the second block's start one entry on. In version 2
			// that is still a table of the entries; in version 4 the
			// block would start with a path keeping part of the one
			// before (the similar paths), which its loader does not have.
			first := int(be.Uint32(bad[at+8:]))
			offs := entryOffsets(data, SHA1Size)
			moved := bytes.Clone(data)
			be.PutUint32(moved[at+8:], uint32(first+1))
			be.PutUint32(moved[at+12:], uint32(offs[first+1]))
			be.PutUint32(moved[at+16:], be.Uint32(data[at+16:])-1)
			ix2, err := Parse(resum(moved, SHA1Size))
			if version == 4 {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("a version 4 block starting mid-prefix: %v, want ErrCorrupt", err)
				}
			} else if err != nil || !reflect.DeepEqual(ix2.Entries, ix.Entries) {
				t.Errorf("a version 2 block moved: %v", err)
			}
		})
	}
}

// TestIntentToAdd proves an entry from git add -N is read as intent to
// add and is not hidden: git status does show it.
func TestIntentToAdd(t *testing.T) {
	r := newRepo(t)
	r.write("kept", "k\n", 0o644)
	r.git("add", "kept")
	r.write("planned", "p\n", 0o644)
	r.git("add", "-N", "planned")
	if st := r.git("status", "--porcelain"); !strings.Contains(st, " A planned") {
		t.Fatalf("git status does not show the intent-to-add entry: %q", st)
	}
	ix := mustParse(t, r.index())
	ls := r.lsFiles()
	checkEntries(t, ix.Entries, ls)
	if len(ix.Entries) != 2 || !ix.Entries[1].IntentToAdd || ix.Entries[1].Hidden() || ix.Entries[0].IntentToAdd {
		t.Errorf("entries %+v: want planned, and only it, intent-to-add and not hidden", ix.Entries)
	}
	checkHidden(t, ix.Hidden(), nil, ls)
	if ix.Version != 3 {
		t.Errorf("version %d; intent-to-add is an extended flag (3)", ix.Version)
	}
}

// TestConflict proves a merge conflict's stages 1 to 3 of one path parse
// in order, as git lists them, beside merged entries.
func TestConflict(t *testing.T) {
	r := newRepo(t)
	r.write("f", "base\n", 0o644)
	r.write("g", "same\n", 0o644)
	r.git("add", ".")
	r.git("commit", "-q", "-m", "base")
	r.git("checkout", "-q", "-b", "other")
	r.write("f", "other\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "other")
	r.git("checkout", "-q", "main")
	r.write("f", "main\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "main")
	if _, err := r.run(nil, "", "merge", "-q", "other"); err == nil {
		t.Fatal("the merge did not conflict")
	}
	ix := mustParse(t, r.index())
	ls := r.lsFiles()
	checkEntries(t, ix.Entries, ls)
	var stages []int
	for _, e := range ix.Entries {
		if e.Path == "f" {
			stages = append(stages, e.Stage)
		}
	}
	if !slices.Equal(stages, []int{1, 2, 3}) {
		t.Errorf("f at stages %v, want [1 2 3]", stages)
	}
	checkHiddenIn(t, r, []string{}, ls)
}

// splitRepo makes a split index: f01 is flagged skip-worktree before the
// split (so in the shared index); after it, with the shared index kept,
// f02 is flagged skip-worktree and f03 assume-unchanged (replacements in
// the split index), "new" is added and f04 removed (the delete bitmap).
// version 4 rewrites both files as version 4 first. There are n files
// f01, f02 and so on (at least 5).
func splitRepo(tb testing.TB, version, n int) *gitRepo {
	r := newRepo(tb)
	for i := 1; i <= n; i++ {
		r.write(fmt.Sprintf("f%02d", i), fmt.Sprintf("%d\n", i), 0o644)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "x")
	if version == 4 {
		r.git("update-index", "--index-version", "4")
	}
	r.git("update-index", "--skip-worktree", "f01")
	r.git("update-index", "--split-index")
	keep := []string{"-c", "splitIndex.maxPercentChange=100"}
	r.git(append(keep, "update-index", "--skip-worktree", "f02")...)
	r.git(append(keep, "update-index", "--assume-unchanged", "f03")...)
	r.write("new", "new\n", 0o644)
	r.git(append(keep, "add", "new")...)
	r.git(append(keep, "rm", "-q", "--cached", "f04")...)
	return r
}

// TestSplitIndex proves a split index is read as git reads it: the split
// file names its shared index by the checksum git names the file after,
// the flag set before the split lives in the shared index and those set
// after in the split index's replacement entries (no path), and Merge and
// HiddenIn combine both (replacements, the added entry, the deleted one)
// into exactly what git ls-files lists, hidden flags from either file
// included. Rewriting the shared index (maxPercentChange=0) moves every
// flag there, and HiddenIn still finds them all.
func TestSplitIndex(t *testing.T) {
	for _, version := range []int{3, 4} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			r := splitRepo(t, version, 30)
			split := mustParse(t, r.index())
			if split.Shared == "" || split.Version != version {
				t.Fatalf("not split, or version %d: %+v", split.Version, split)
			}
			sharedName := "sharedindex." + split.Shared
			shared := mustParse(t, r.read(sharedName))
			if shared.Checksum != split.Shared || shared.Shared != "" {
				t.Fatalf("shared index checksum %s, shared %q", shared.Checksum, shared.Shared)
			}
			if len(split.Entries) >= len(shared.Entries) {
				t.Errorf("the split index holds %d entries, the shared one %d", len(split.Entries), len(shared.Entries))
			}
			// Where each flag lives: f01 in the shared index, f02 and f03
			// in nameless replacements, "new" added by name.
			if h := paths(shared.Hidden()); !slices.Equal(h, []string{"f01"}) {
				t.Errorf("the shared index hides %q, want f01", h)
			}
			var replaced, hiddenReplaced int
			for _, e := range split.Entries {
				if e.Path == "" {
					replaced++
					if e.Hidden() {
						hiddenReplaced++
					}
				}
			}
			if hiddenReplaced != 2 || !slices.Contains(paths(split.Entries), "new") {
				t.Errorf("split part: %d replacements, %d hidden, paths %q; want 2 hidden and new", replaced, hiddenReplaced, paths(split.Entries))
			}

			ls := r.lsFiles()
			if slices.Contains(gitPaths(ls), "f04") || !slices.Contains(gitPaths(ls), "new") {
				t.Fatalf("git lists %q", gitPaths(ls))
			}
			merged, err := split.Merge(shared)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, merged.Entries, ls)
			want := []string{"f01", "f02", "f03"}
			checkHidden(t, merged.Hidden(), want, ls)
			if merged.Shared != "" {
				t.Errorf("merged index names a shared index %q", merged.Shared)
			}
			rep := checkHiddenIn(t, r, want, ls)
			if rep.Shared != filepath.Join(r.gitDir, sharedName) {
				t.Errorf("HiddenIn shared %q", rep.Shared)
			}

			// Merge refuses an index that is not split, and a shared index
			// other than the one named.
			if _, err := merged.Merge(shared); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Merge of an unsplit index: %v", err)
			}
			if _, err := split.Merge(merged); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Merge with the wrong shared index: %v", err)
			}

			// A new shared index takes every flag.
			r.git("-c", "splitIndex.maxPercentChange=0", "update-index", "--skip-worktree", "f05")
			split2 := mustParse(t, r.index())
			if split2.Shared == split.Shared || split2.Shared == "" {
				t.Fatalf("git did not write a new shared index (%q)", split2.Shared)
			}
			shared2 := mustParse(t, r.read("sharedindex."+split2.Shared))
			ls = r.lsFiles()
			want = []string{"f01", "f02", "f03", "f05"}
			checkHidden(t, shared2.Hidden(), want, ls)
			if rep := checkHiddenIn(t, r, want, ls); rep.Shared != filepath.Join(r.gitDir, "sharedindex."+split2.Shared) {
				t.Errorf("HiddenIn shared %q", rep.Shared)
			}
		})
	}
}

// TestSplitConflict proves a split index whose shared index holds a
// conflict (stages 1 to 3) reads as git reads it: while the split index
// adds nothing, and once the conflict is resolved by git add in the split
// index alone, when the path is back at stage 0 only.
func TestSplitConflict(t *testing.T) {
	r := newRepo(t)
	for i := 1; i <= 20; i++ {
		r.write(fmt.Sprintf("f%02d", i), fmt.Sprintf("%d\n", i), 0o644)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "base")
	r.git("checkout", "-q", "-b", "other")
	r.write("f01", "other\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "other")
	r.git("checkout", "-q", "main")
	r.write("f01", "main\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "main")
	if _, err := r.run(nil, "", "merge", "-q", "other"); err == nil {
		t.Fatal("the merge did not conflict")
	}
	r.git("update-index", "--split-index")
	r.git("update-index", "--skip-worktree", "f02")
	check := func(wantStages []int) {
		t.Helper()
		split := mustParse(t, r.index())
		shared := mustParse(t, r.read("sharedindex."+split.Shared))
		merged, err := split.Merge(shared)
		if err != nil {
			t.Fatal(err)
		}
		ls := r.lsFiles()
		checkEntries(t, merged.Entries, ls)
		var stages []int
		for _, e := range merged.Entries {
			if e.Path == "f01" {
				stages = append(stages, e.Stage)
			}
		}
		if !slices.Equal(stages, wantStages) {
			t.Errorf("f01 at stages %v, want %v", stages, wantStages)
		}
		checkHiddenIn(t, r, []string{"f02"}, ls)
	}
	check([]int{1, 2, 3})
	r.write("f01", "resolved\n", 0o644)
	r.git("-c", "splitIndex.maxPercentChange=100", "add", "f01")
	check([]int{0})
}

// ewahOf is an EWAH bitmap, as git's ewah_io.c reads it, with the given
// bits (all below 64) set: one run-length word (no run, one literal
// word) and the literal word.
func ewahOf(bits ...int) ewah {
	var lit uint64
	for _, b := range bits {
		lit |= 1 << b
	}
	return ewah{words: []uint64{1 << 33, lit}}
}

// TestMergeRules proves Merge applies a split index as git's
// merge_base_index and add_index_entry do, on entries built by hand for
// what git writes only in rare states: replacements take the flags of
// the split index's nameless entries in bitmap order; deleted shared
// entries go; an added entry replaces the shared entry of its path and
// stage, a stage 0 one every stage of its path, and of two added entries
// of one path and stage the later wins; a replacement with a path, an
// added entry without one, too many replacements and a bit past the
// shared entries are errors.
func TestMergeRules(t *testing.T) {
	e := func(path string, stage int, oid string, skip bool) Entry {
		return Entry{Path: path, Stage: stage, OID: oid, SkipWorktree: skip, Mode: 0o100644}
	}
	shared := &Index{Version: 2, HashSize: SHA1Size, Checksum: "base", Entries: []Entry{
		e("a", 0, "a0", false), e("b", 0, "b0", false), e("c", 1, "c1", false), e("c", 2, "c2", false),
		e("c", 3, "c3", false), e("d", 0, "d0", false), e("f", 1, "f1", false), e("g", 0, "g0", false),
	}}
	split := &Index{Version: 2, HashSize: SHA1Size, Shared: "base",
		link: &link{base: "base", replace: ewahOf(1, 5), del: ewahOf(0)},
		Entries: []Entry{
			e("", 0, "b-new", true),      // replaces b
			e("", 0, "d-new", false),     // replaces d
			e("c", 0, "c-merged", false), // resolves c
			e("f", 1, "f1-first", false),
			e("f", 1, "f1-second", true), // the later wins
			e("h", 0, "h0", true),        // added
		}}
	merged, err := split.Merge(shared)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		e("b", 0, "b-new", true), e("c", 0, "c-merged", false), e("d", 0, "d-new", false),
		e("f", 1, "f1-second", true), e("g", 0, "g0", false), e("h", 0, "h0", true),
	}
	if !reflect.DeepEqual(merged.Entries, want) {
		t.Errorf("merged:\n got %+v\nwant %+v", merged.Entries, want)
	}
	if h := paths(merged.Hidden()); !slices.Equal(h, []string{"b", "f", "h"}) {
		t.Errorf("hidden %q", h)
	}
	if split.Entries[0].Path != "" || shared.Entries[1].OID != "b0" {
		t.Error("Merge changed its arguments")
	}
	bad := []struct {
		name string
		link link
		mine []Entry
	}{
		{"a replacement with a path", link{base: "base", replace: ewahOf(1)}, []Entry{e("b", 0, "x", false)}},
		{"an added entry without a path", link{base: "base"}, []Entry{e("", 0, "x", false)}},
		{"more replacements than entries", link{base: "base", replace: ewahOf(1, 2)}, []Entry{e("", 0, "x", false)}},
		{"a replace bit past the shared entries", link{base: "base", replace: ewahOf(8)}, []Entry{e("", 0, "x", false)}},
		{"a delete bit past the shared entries", link{base: "base", del: ewahOf(63)}, nil},
		{"a literal word missing", link{base: "base", del: ewah{words: []uint64{2 << 33, 1}}}, nil},
	}
	for _, c := range bad {
		ix := &Index{HashSize: SHA1Size, Shared: "base", link: &c.link, Entries: c.mine}
		if _, err := ix.Merge(shared); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}

// TestSparseIndex proves a sparse index (cone mode, index.sparse) parses:
// the sdir extension is accepted and a sparse directory entry (mode
// 040000, path ending in "/") is reported hidden, as it is skip-worktree,
// matching git ls-files --sparse.
func TestSparseIndex(t *testing.T) {
	r := newRepo(t)
	for _, f := range []string{"in/a", "out/b", "out/deep/c", "top"} {
		r.write(f, f+"\n", 0o644)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "x")
	if _, err := r.run(nil, "", "sparse-checkout", "set", "--cone", "--sparse-index", "in"); err != nil {
		t.Skipf("git here cannot make a sparse index: %v", err)
	}
	ix := mustParse(t, r.index())
	if !slices.Contains(ix.Extensions, "sdir") {
		t.Skipf("git wrote no sdir extension: %q", ix.Extensions)
	}
	ls := r.lsFiles("--sparse")
	checkEntries(t, ix.Entries, ls)
	checkHidden(t, ix.Hidden(), []string{"out/"}, ls)
	if h := ix.Hidden(); len(h) != 1 || h[0].Mode != 0o40000 {
		t.Errorf("hidden %+v, want the sparse directory out/", h)
	}
	checkHiddenIn(t, r, []string{"out/"}, ls)
}

// TestUntrackedCacheAndFSMonitor proves an index holding the untracked
// cache (UNTR) and fsmonitor (FSMN) extensions parses, its entries as git
// lists them.
func TestUntrackedCacheAndFSMonitor(t *testing.T) {
	r := newRepo(t)
	r.write("x/f", "1\n", 0o644)
	r.write("g", "2\n", 0o644)
	r.git("add", ".")
	r.git("commit", "-q", "-m", "x")
	r.git("update-index", "--assume-unchanged", "g")
	r.write("untracked", "u\n", 0o644)
	if _, err := r.run(nil, "", "update-index", "--untracked-cache"); err != nil {
		t.Skipf("no untracked cache here: %v", err)
	}
	r.git("status", "--porcelain")
	hook := filepath.Join(r.home, "fsmonitor-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nprintf 'token\\0/\\0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fsm := []string{"-c", "core.fsmonitor=" + hook, "-c", "core.fsmonitorHookVersion=2"}
	r.git(append(fsm, "update-index", "--fsmonitor")...)
	r.git(append(fsm, "status", "--porcelain")...)
	ix := mustParse(t, r.index())
	for _, ext := range []string{"UNTR", "FSMN"} {
		if !slices.Contains(ix.Extensions, ext) {
			t.Skipf("git wrote no %s extension: %q", ext, ix.Extensions)
		}
	}
	ls := r.lsFiles()
	checkEntries(t, ix.Entries, ls)
	checkHiddenIn(t, r, []string{"g"}, ls)
}

// TestSkipHash proves an index git writes with index.skipHash (an
// all-zero trailer, git 2.40 and later) parses, its checksum reported as
// zeros. Older git writes the hash: the test is skipped.
func TestSkipHash(t *testing.T) {
	r := newRepo(t)
	r.write("a", "a\n", 0o644)
	r.git("-c", "index.skipHash=true", "add", "a")
	r.git("-c", "index.skipHash=true", "update-index", "--skip-worktree", "a")
	data := r.index()
	if !bytes.Equal(data[len(data)-SHA1Size:], make([]byte, SHA1Size)) {
		t.Skip("git here does not know index.skipHash")
	}
	ix := mustParse(t, data)
	if ix.Checksum != strings.Repeat("0", 40) || ix.HashSize != SHA1Size {
		t.Errorf("checksum %s, hash size %d", ix.Checksum, ix.HashSize)
	}
	ls := r.lsFiles()
	checkEntries(t, ix.Entries, ls)
	checkHiddenIn(t, r, []string{"a"}, ls)
}

// TestZeroTrailer proves the reading of an unverified index, whatever the
// git here writes: a real SHA-1 or SHA-256 index with its trailer zeroed
// (what index.skipHash writes) reads as the same entries, the hash told
// by which layout reads, and naming the hash reads it too.
func TestZeroTrailer(t *testing.T) {
	for _, hs := range []int{SHA1Size, SHA256Size} {
		t.Run(hashName(hs), func(t *testing.T) {
			t.Parallel()
			r := newRepo(t, "--object-format="+map[int]string{SHA1Size: "sha1", SHA256Size: "sha256"}[hs])
			r.populate(5)
			r.git("update-index", "--skip-worktree", "b")
			data := r.index()
			want := mustParse(t, data)
			zeroed := bytes.Clone(data)
			clear(zeroed[len(zeroed)-hs:])
			for _, o := range []Options{{}, {HashSize: hs}} {
				ix, err := o.Parse(zeroed)
				if err != nil {
					t.Fatalf("%+v: %v", o, err)
				}
				if ix.HashSize != hs || ix.Checksum != strings.Repeat("0", 2*hs) || !reflect.DeepEqual(ix.Entries, want.Entries) {
					t.Errorf("%+v: hash size %d, checksum %s, entries differ: %v", o, ix.HashSize, ix.Checksum, !reflect.DeepEqual(ix.Entries, want.Entries))
				}
			}
		})
	}
}

// TestOptions proves a bad Options.HashSize is the caller's error
// (errdefs.ErrInvalid, not ErrCorrupt), and what Parse and HiddenIn say
// of empty and foreign input.
func TestOptions(t *testing.T) {
	r := newRepo(t)
	r.write("a", "a\n", 0o644)
	r.git("add", "a")
	data := r.index()
	for _, hs := range []int{-1, 1, 21, 64} {
		_, err := Options{HashSize: hs}.Parse(data)
		if !errors.Is(err, errdefs.ErrInvalid) || errors.Is(err, ErrCorrupt) {
			t.Errorf("HashSize %d: %v, want ErrInvalid and not ErrCorrupt", hs, err)
		}
		if _, err := (Options{HashSize: hs}).HiddenIn(r.gitDir); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("HiddenIn with HashSize %d: %v", hs, err)
		}
	}
	for _, in := range [][]byte{nil, {}, []byte("DIRC"), []byte("not an index at all, just some text here")} {
		if _, err := Parse(in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Parse(%q): %v, want ErrCorrupt", in, err)
		}
	}
	if !errors.Is(ErrCorrupt, errdefs.ErrInvalid) {
		t.Error("ErrCorrupt does not wrap ErrInvalid")
	}
}

// TestHiddenInFiles proves what HiddenIn does with the files it is
// given: a repository with no index is NoIndex; a gitDir or index (or
// shared index) that is a symlink is refused, not followed, as are a
// FIFO (without hanging), a directory or a gitDir that is a file
// (errdefs.ErrForbidden); a file over MaxSize is errdefs.ErrLimit, the
// index and the shared index each; a corrupt index is ErrCorrupt and a
// missing gitDir or shared index fs.ErrNotExist.
func TestHiddenInFiles(t *testing.T) {
	good := newRepo(t)
	good.write("a", "a\n", 0o644)
	good.git("add", "a")
	good.git("update-index", "--skip-worktree", "a")
	goodIndex := filepath.Join(good.gitDir, "index")

	t.Run("no index", func(t *testing.T) {
		r := newRepo(t)
		rep, err := HiddenIn(r.gitDir)
		if err != nil || !rep.NoIndex || rep.Index != "" || rep.Hidden != nil {
			t.Errorf("%+v, %v; want NoIndex", rep, err)
		}
	})
	t.Run("the index is hidden", func(t *testing.T) {
		rep, err := HiddenIn(good.gitDir)
		if err != nil || len(rep.Hidden) != 1 || rep.Hidden[0].Path != "a" {
			t.Errorf("%+v, %v", rep, err)
		}
	})
	t.Run("no gitDir", func(t *testing.T) {
		if _, err := HiddenIn(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v, want ErrNotExist", err)
		}
	})
	forbidden := func(t *testing.T, gitDir string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := HiddenIn(gitDir); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, errdefs.ErrForbidden) {
				t.Errorf("%v, want ErrForbidden", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("HiddenIn hangs")
		}
	}
	t.Run("gitDir a symlink", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "git")
		if err := os.Symlink(good.gitDir, link); err != nil {
			t.Fatal(err)
		}
		forbidden(t, link)
	})
	t.Run("gitDir a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), ".git")
		if err := os.WriteFile(f, []byte("gitdir: "+good.gitDir+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		forbidden(t, f)
	})
	t.Run("index a symlink", func(t *testing.T) {
		r := newRepo(t)
		if err := os.Symlink(goodIndex, filepath.Join(r.gitDir, "index")); err != nil {
			t.Fatal(err)
		}
		forbidden(t, r.gitDir)
	})
	t.Run("index a FIFO", func(t *testing.T) {
		r := newRepo(t)
		if err := syscall.Mkfifo(filepath.Join(r.gitDir, "index"), 0o644); err != nil {
			t.Fatal(err)
		}
		forbidden(t, r.gitDir)
	})
	t.Run("index a directory", func(t *testing.T) {
		r := newRepo(t)
		if err := os.Mkdir(filepath.Join(r.gitDir, "index"), 0o755); err != nil {
			t.Fatal(err)
		}
		forbidden(t, r.gitDir)
	})
	t.Run("corrupt index", func(t *testing.T) {
		r := newRepo(t)
		data := good.index()
		data[len(data)-1] ^= 1
		if err := os.WriteFile(filepath.Join(r.gitDir, "index"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := HiddenIn(r.gitDir); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v, want ErrCorrupt", err)
		}
	})
	t.Run("MaxSize", func(t *testing.T) {
		size := int64(len(good.index()))
		if _, err := (Options{MaxSize: size - 1}).HiddenIn(good.gitDir); !errors.Is(err, errdefs.ErrLimit) {
			t.Errorf("MaxSize %d for %d bytes: %v, want ErrLimit", size-1, size, err)
		}
		if rep, err := (Options{MaxSize: size}).HiddenIn(good.gitDir); err != nil || len(rep.Hidden) != 1 {
			t.Errorf("MaxSize %d for %d bytes: %+v, %v", size, size, rep, err)
		}
	})
	t.Run("split", func(t *testing.T) {
		r := splitRepo(t, 3, 30)
		split := mustParse(t, r.index())
		sharedPath := filepath.Join(r.gitDir, "sharedindex."+split.Shared)
		splitSize, sharedSize := int64(len(r.index())), int64(len(r.read("sharedindex."+split.Shared)))
		if sharedSize <= splitSize {
			t.Fatalf("the shared index (%d bytes) is not larger than the split one (%d)", sharedSize, splitSize)
		}
		if _, err := (Options{MaxSize: splitSize}).HiddenIn(r.gitDir); !errors.Is(err, errdefs.ErrLimit) {
			t.Errorf("a shared index over MaxSize: %v, want ErrLimit", err)
		}
		if _, err := (Options{MaxSize: sharedSize}).HiddenIn(r.gitDir); err != nil {
			t.Errorf("MaxSize the larger file's size: %v", err)
		}
		moved := filepath.Join(t.TempDir(), "shared")
		if err := os.Rename(sharedPath, moved); err != nil {
			t.Fatal(err)
		}
		if _, err := HiddenIn(r.gitDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("no shared index: %v, want ErrNotExist", err)
		}
		if err := os.Symlink(moved, sharedPath); err != nil {
			t.Fatal(err)
		}
		forbidden(t, r.gitDir)
	})
}

// corruptFixtures are two indexes git wrote, a version 3 one (entries a,
// b skip-worktree, c, d/e; a TREE extension) and the same as version 4,
// and the repository to run git fsck in.
func corruptFixtures(t *testing.T) (r *gitRepo, v3, v4 []byte) {
	r = newRepo(t)
	for _, f := range []string{"a", "b", "c", "d/e"} {
		r.write(f, f+"\n", 0o644)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "x")
	r.git("update-index", "--skip-worktree", "b")
	v3 = r.index()
	r.git("update-index", "--index-version", "4")
	v4 = r.index()
	r.git("update-index", "--index-version", "3")
	if !bytes.Equal(r.index(), v3) {
		t.Fatal("git did not write the version 3 index back as it was")
	}
	return r, v3, v4
}

// TestCorrupt proves that bytes git would not write are refused with
// ErrCorrupt: each case changes a real index (fixing the checksum, but
// where the checksum is the point), and where git fsck refuses it too the
// test checks that it does, so the case is corruption by git's measure
// and not the parser's alone. Two controls, an unknown optional extension
// and the extensions cut off, must parse, as git reads them.
func TestCorrupt(t *testing.T) {
	r, v3, v4 := corruptFixtures(t)
	if ix := mustParse(t, v3); ix.Version != 3 || !slices.Equal(paths(ix.Entries), []string{"a", "b", "c", "d/e"}) || !ix.Entries[1].SkipWorktree {
		t.Fatalf("fixture: %+v", ix)
	}
	offs := entryOffsets(v3, SHA1Size) // a, b, c, d/e, the extensions
	body := v3[:len(v3)-SHA1Size]
	set := func(data []byte, at int, b ...byte) []byte {
		out := bytes.Clone(data)
		copy(out[at:], b)
		return out
	}
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	const flags = 40 + SHA1Size // an entry's flags, from its start
	cases := []struct {
		name    string
		data    []byte
		gitToo  bool // git fsck refuses it as well
		reparse bool // fix the checksum
	}{
		{"checksum byte flipped", set(v3, len(v3)-1, v3[len(v3)-1]^1), true, false},
		{"first checksum byte flipped", set(v3, len(v3)-SHA1Size, v3[len(v3)-SHA1Size]^0x80), true, false},
		{"object id byte flipped", set(v3, offs[0]+40, v3[offs[0]+40]^1), true, false},
		{"a byte after the checksum", append(bytes.Clone(v3), 0), true, false},
		{"signature", set(v3, 0, 'D', 'I', 'R', 'X'), true, true},
		{"version 1", set(v3, 4, be32(1)...), true, true},
		{"version 5", set(v3, 4, be32(5)...), true, true},
		{"one entry more than there are", set(v3, 8, be32(5)...), true, true},
		{"a huge entry count", set(v3, 8, be32(1<<31)...), true, true},
		{"unsorted entries", set(v3, offs[0]+flags+2, 'c'), true, true},
		{"a path twice at stage 0", set(v3, offs[1]+flags+4, 'a'), true, true},
		{"stage 0 and 1 of a path", set(set(v3, offs[1]+flags+4, 'a'), offs[1]+flags, 0x50), true, true},
		{"stages out of order", set(set(set(v3, offs[1]+flags+4, 'a'), offs[1]+flags, 0x50), offs[0]+flags, 0x20), true, true},
		{"an unknown extended flag", set(v3, offs[1]+flags+3, 0x01), true, true},
		{"the name length in the flags", set(v3, offs[0]+flags+1, 2), false, true},
		{"a path longer than its flags say", set(v3, offs[3]+flags+2+3, 'x', 'x', 'x', 'x', 'x'), false, true},
		{"non-NUL padding", set(v3, offs[2]-1, 'x'), false, true},
		{"an unknown required extension", sum(append(bytes.Clone(body), "zzzz\x00\x00\x00\x00"...), SHA1Size), true, false},
		{"an extension past the end", set(v3, offs[4]+4, be32(1000)...), false, true},
		{"three trailing bytes", sum(append(bytes.Clone(body), "abc"...), SHA1Size), false, false},
		{"eight trailing bytes", sum(append(bytes.Clone(body), "garbage!"...), SHA1Size), true, false},
		// git ignores what the first entry says to drop (there is nothing
		// before it), and never writes other than 0 there.
		{"version 4: the first path dropping bytes", set(v4, 12+flags+2, 5), false, true},
		// Entry 0 is a (65 bytes); entry 1, b, has extended flags.
		{"version 4: a path dropping more than the previous has", set(v4, 12+65+flags+2+2, 2), true, true},
		{"version 4: an overlong varint", set(v4, 12+flags+2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), false, true},
		{"version 4 read as version 3", set(v4, 4, be32(3)...), true, true},
		{"version 3 read as version 4", set(v3, 4, be32(4)...), true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.data
			if c.reparse {
				data = resum(data, SHA1Size)
			}
			if bytes.Equal(data, v3) || bytes.Equal(data, v4) {
				t.Fatal("the case changes nothing")
			}
			for _, o := range []Options{{}, {HashSize: SHA1Size}} {
				if ix, err := o.Parse(data); !errors.Is(err, ErrCorrupt) || ix != nil {
					t.Errorf("%+v: %v, want ErrCorrupt", o, err)
				}
			}
			if c.gitToo {
				if err := r.fsck(data); err == nil {
					t.Error("git fsck accepts it: the case is not corrupt by git's measure")
				}
			}
		})
	}
	t.Run("control: an unknown optional extension", func(t *testing.T) {
		data := sum(append(bytes.Clone(body), "ZZZZ\x00\x00\x00\x02hi"...), SHA1Size)
		ix := mustParse(t, data)
		if !slices.Equal(ix.Extensions, []string{"TREE", "ZZZZ"}) {
			t.Errorf("extensions %q", ix.Extensions)
		}
		if err := r.fsck(data); err != nil {
			t.Errorf("git fsck: %v", err)
		}
	})
	t.Run("control: no extensions", func(t *testing.T) {
		data := sum(v3[:offs[4]], SHA1Size)
		ix := mustParse(t, data)
		if len(ix.Extensions) != 0 || len(ix.Entries) != 4 {
			t.Errorf("%+v", ix)
		}
		if err := r.fsck(data); err != nil {
			t.Errorf("git fsck: %v", err)
		}
	})
}

// truncFixtures are real indexes of each kind: name to bytes.
func truncFixtures(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, format := range []string{"sha1", "sha256"} {
		r := newRepo(t, "--object-format="+format)
		r.populate(8)
		r.git("update-index", "--skip-worktree", "b")
		out[format+"/v3"] = r.index()
		r.git("-c", "index.recordOffsetTable=true", "-c", "index.recordEndOfIndexEntries=true", "-c", "index.threads=2",
			"update-index", "--index-version", "4")
		out[format+"/v4"] = r.index()
	}
	r := splitRepo(t, 3, 30)
	split := r.index()
	out["split"] = split
	out["shared"] = r.read("sharedindex." + mustParse(t, split).Shared)
	return out
}

// TestTruncated proves every strict prefix of a real index is refused
// with ErrCorrupt, without a panic, hashed as it is and with the checksum
// made right for the cut (so the parser's own bounds checks, not the
// checksum, must catch it); the latter reads only where the cut falls
// between extensions, once per extension and once with none, giving the
// same entries.
func TestTruncated(t *testing.T) {
	for name, data := range truncFixtures(t) {
		t.Run(name, func(t *testing.T) {
			full := mustParse(t, data)
			hs := full.HashSize
			for n := range len(data) {
				for _, o := range []Options{{}, {HashSize: hs}} {
					if ix, err := o.Parse(data[:n]); !errors.Is(err, ErrCorrupt) || ix != nil {
						t.Fatalf("%d of %d bytes, %+v: %v, want ErrCorrupt", n, len(data), o, err)
					}
				}
			}
			body := data[:len(data)-hs]
			reads := 0
			for n := 0; n <= len(body); n++ {
				ix, err := Options{HashSize: hs}.Parse(sum(body[:n], hs))
				if err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("body cut at %d: %v, want ErrCorrupt", n, err)
					}
					continue
				}
				reads++
				if !reflect.DeepEqual(ix.Entries, full.Entries) || !slices.Equal(ix.Extensions, full.Extensions[:len(ix.Extensions)]) {
					t.Errorf("body cut at %d reads otherwise: %q", n, ix.Extensions)
				}
			}
			want := len(full.Extensions) + 1
			if link := slices.Index(full.Extensions, "link"); link >= 0 {
				// Without the link extension the entries with no path
				// are an error.
				want = len(full.Extensions) - link
			}
			if reads != want {
				t.Errorf("%d cuts read, want %d (extensions %q)", reads, want, full.Extensions)
			}
		})
	}
}
