package gitproto

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// pushCapture pushes refspecs from work to a bare repository with a
// receive-pack that keeps what git sent it: the bytes a smart-HTTP push
// POSTs (protocol v0, the same in both).
func pushCapture(t *testing.T, work, bare string, args ...string) []byte {
	t.Helper()
	capFile := filepath.Join(t.TempDir(), "sent")
	rp := fmt.Sprintf(`sh -c 'tee %s | git-receive-pack "$0"'`, capFile)
	cmd := exec.Command("git", append([]string{"push", "--receive-pack=" + rp, bare}, args...)...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	b, rerr := os.ReadFile(capFile)
	if rerr != nil {
		t.Fatalf("push %v: %v %s", args, err, out)
	}
	return b
}

// repo makes a work repository with n commits on main, each with a long,
// similar message (so that pack-objects deltifies commits), and a bare
// copy of its first commit.
func repo(t *testing.T, n int) (work, bare string) {
	t.Helper()
	dir := t.TempDir()
	work, bare = filepath.Join(dir, "work"), filepath.Join(dir, "bare.git")
	gitIn(t, dir, "init", "-q", "-b", "main", work)
	long := strings.Repeat("a long message that repeats, so that commits delta against each other\n", 200)
	for i := range n {
		os.WriteFile(filepath.Join(work, "f"), []byte(fmt.Sprint(i)), 0o644)
		gitIn(t, work, "add", "f")
		gitIn(t, work, "commit", "-q", "-m", fmt.Sprintf("commit %d\n\n%s", i, long))
	}
	gitIn(t, dir, "init", "-q", "--bare", bare)
	gitIn(t, work, "push", "-q", bare, "HEAD~"+fmt.Sprint(n-1)+":refs/heads/main")
	return work, bare
}

// TestReadRequestAndCommits: what real git sends for a push reads back as
// its ref updates, and the pack after them as the commits git made, with
// their parents as git has them.
func TestReadRequestAndCommits(t *testing.T) {
	work, bare := repo(t, 30)
	old := gitIn(t, bare, "rev-parse", "main")
	sent := pushCapture(t, work, bare, "main:main", "main:refs/heads/paddock/s1")
	br := bufio.NewReader(bytes.NewReader(sent))
	req, err := ReadRequest(br)
	if err != nil {
		t.Fatal(err)
	}
	head := gitIn(t, work, "rev-parse", "main")
	want := []Command{{old, head, "refs/heads/main"}, {ZeroID, head, "refs/heads/paddock/s1"}}
	if fmt.Sprint(req.Commands) != fmt.Sprint(want) {
		t.Fatalf("commands %v, want %v", req.Commands, want)
	}
	if !req.Has("report-status-v2") && !req.Has("report-status") || !req.Has("side-band-64k") {
		t.Fatalf("capabilities %v", req.Capabilities)
	}
	if !bytes.Equal(req.Raw, sent[:len(req.Raw)]) {
		t.Fatal("Raw is not the bytes read")
	}
	g, err := ReadCommits(br)
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 29 {
		t.Fatalf("%d commits in the pack, want 29", len(g))
	}
	for _, l := range strings.Split(gitIn(t, work, "rev-list", "--parents", old+".."+head), "\n") {
		f := strings.Fields(l)
		if fmt.Sprint(g[f[0]]) != fmt.Sprint(f[1:]) {
			t.Fatalf("commit %s: parents %v, git says %v", f[0], g[f[0]], f[1:])
		}
	}
	if !g.FastForward(old, head) {
		t.Fatal("a fast-forward push is not one")
	}
}

// TestCommitDeltas: a pack whose commits are stored as deltas on other
// commits (as git verify-pack shows) reads back as every commit with its
// parents.
func TestCommitDeltas(t *testing.T) {
	work, _ := repo(t, 40)
	cmd := exec.Command("git", "pack-objects", "--revs", "--stdout", "--window=50", "--depth=50", "--no-reuse-delta")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader("main\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.pack"), pack, 0o644)
	gitIn(t, dir, "index-pack", "p.pack")
	deltas := 0
	for _, l := range strings.Split(gitIn(t, dir, "verify-pack", "-v", "p.idx"), "\n") {
		if f := strings.Fields(l); len(f) >= 7 && f[1] == "commit" {
			deltas++
		}
	}
	if deltas == 0 {
		t.Fatal("git stored no commit as a delta: the case this test is for is not there")
	}
	g, err := ReadCommits(bytes.NewReader(pack))
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 40 {
		t.Fatalf("%d commits, want 40", len(g))
	}
	for _, l := range strings.Split(gitIn(t, work, "rev-list", "--parents", "main"), "\n") {
		f := strings.Fields(l)
		if fmt.Sprint(g[f[0]]) != fmt.Sprint(f[1:]) {
			t.Fatalf("commit %s: parents %v, git says %v", f[0], g[f[0]], f[1:])
		}
	}
}

// TestForcePushIsNoFastForward: a rewritten branch pushed with --force
// reads as no fast-forward; a deletion as a delete, with no pack.
func TestForcePushIsNoFastForward(t *testing.T) {
	work, bare := repo(t, 3)
	gitIn(t, work, "push", "-q", bare, "main:main")
	old := gitIn(t, bare, "rev-parse", "main")
	gitIn(t, work, "commit", "-q", "--amend", "-m", "rewritten")
	sent := pushCapture(t, work, bare, "--force", "main:main")
	br := bufio.NewReader(bytes.NewReader(sent))
	req, err := ReadRequest(br)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ReadCommits(br)
	if err != nil {
		t.Fatal(err)
	}
	if c := req.Commands[0]; c.Old != old || g.FastForward(c.Old, c.New) {
		t.Fatalf("a force push reads as a fast-forward: %v %v", c, g)
	}
	sent = pushCapture(t, work, bare, ":refs/heads/main")
	req, err = ReadRequest(bufio.NewReader(bytes.NewReader(sent)))
	if err != nil {
		t.Fatal(err)
	}
	if c := req.Commands[0]; !c.Delete() || c.Ref != "refs/heads/main" {
		t.Fatalf("a deletion: %v", c)
	}
}

// TestPackRefusesDamage: a pack cut short, with a wrong checksum or with
// bytes after it is an error.
func TestPackRefusesDamage(t *testing.T) {
	work, bare := repo(t, 4)
	sent := pushCapture(t, work, bare, "main:main")
	br := bufio.NewReader(bytes.NewReader(sent))
	if _, err := ReadRequest(br); err != nil {
		t.Fatal(err)
	}
	pack := append([]byte(nil), sent[len(sent)-br.Buffered():]...)
	if _, err := ReadCommits(bytes.NewReader(pack)); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"cut":      pack[:len(pack)-30],
		"checksum": append(append([]byte(nil), pack[:len(pack)-1]...), pack[len(pack)-1]^1),
		"trailing": append(append([]byte(nil), pack...), 'x'),
		"empty":    nil,
	} {
		if _, err := ReadCommits(bytes.NewReader(b)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRefusedResultGitPrints: a push refused with RefusedResult makes
// real git print the message and each ref's reason, and fail.
func TestRefusedResultGitPrints(t *testing.T) {
	work, bare := repo(t, 2)
	// A receive-pack that answers any push with the refusal.
	dir := t.TempDir()
	req := &Request{Commands: []Command{{ZeroID, gitIn(t, work, "rev-parse", "main"), "refs/heads/other"}},
		Capabilities: []string{"report-status", "side-band-64k"}}
	body := RefusedResult(req, "paddock: this session may push only refs/heads/paddock/s1", map[string]string{"refs/heads/other": "not this session's branch"})
	// Replay: git-receive-pack's advertisement, then our answer.
	script := filepath.Join(dir, "rp")
	advBytes, err := exec.Command("git", "-C", bare, "receive-pack", "--advertise-refs", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "adv"), advBytes, 0o644)
	os.WriteFile(filepath.Join(dir, "answer"), body, 0o644)
	os.WriteFile(script, []byte("#!/bin/sh\ncat "+dir+"/adv\ncat > /dev/null\ncat "+dir+"/answer\n"), 0o755)
	cmd := exec.Command("git", "push", "--receive-pack="+script, bare, "main:other")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("git push succeeded: %s", out)
	}
	for _, want := range []string{"remote: paddock: this session may push only refs/heads/paddock/s1", "[remote rejected] main -> other (not this session's branch)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("git printed no %q:\n%s", want, out)
		}
	}
}

func FuzzCommands(f *testing.F) {
	f.Add([]byte("00770000000000000000000000000000000000000000 1111111111111111111111111111111111111111 refs/heads/x\x00report-status side-band-64k\n0000PACK"))
	f.Add([]byte("0000"))
	f.Add([]byte("0031shallow 1111111111111111111111111111111111111111\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		req, err := ReadRequest(br)
		if err != nil {
			return
		}
		if len(req.Commands) == 0 || !bytes.Equal(req.Raw, b[:len(req.Raw)]) {
			t.Fatalf("%v %q", req.Commands, req.Raw)
		}
		for _, c := range req.Commands {
			if !isOID(c.Old) || !isOID(c.New) || c.Ref == "" || strings.ContainsAny(c.Ref, " \x00") {
				t.Fatalf("a command read from bytes it should refuse: %v", c)
			}
		}
		_ = RefusedResult(req, "m", nil)
	})
}

func FuzzPack(f *testing.F) {
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ReadCommits(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("an error not marked malformed: %v", err)
			}
			return
		}
		for id := range g {
			g.FastForward(ZeroID, id)
		}
	})
}

func FuzzDelta(f *testing.F) {
	f.Add([]byte("base text"), []byte{9, 4, 0x91, 0, 4})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := applyDelta(base, delta)
		if err == nil && len(out) > MaxCommitBytes {
			t.Fatal("a delta past the limit")
		}
	})
}
