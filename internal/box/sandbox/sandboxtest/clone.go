package sandboxtest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// cloneOrigin (issue 33, item 1): a box made with CreateOptions.Clone sees
// its host repository's git directory at sandbox.OriginDir, readable as its
// own and read-only, and a /workspace of its own that is empty, writable
// and not the repository; the Runner's clone recipe (a repository whose
// objects are borrowed from the origin, a branch at the base, checked out,
// a commit) works there; and the host repository, git directory and
// worktree, is byte for byte what it was. A backend that cannot lend a host
// directory gives a clone box an empty /workspace and no origin when its
// clones are streamed (Capabilities.StreamedClone), and else refuses Clone
// with errdefs.ErrUnavailable, and the case skips.
func cloneOrigin(t *testing.T, s Setup) {
	ctx := context.Background()
	session := uniqueSession("clone")
	if s.Workspace == nil {
		// No host directory reaches this backend's boxes: a clone is
		// refused as unavailable, before anything is made, unless the
		// backend's clone boxes take their history streamed in
		// (StreamedClone): then a /workspace of their own, empty and
		// writable, and no origin at all.
		dir := OwnedWorkspace(t, t.TempDir())
		bx, err := s.Backend.Create(ctx, sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime, Workspace: dir, Clone: true})
		if !s.Backend.Capabilities(ctx).StreamedClone {
			if errdefs.Is(err, errdefs.ErrUnavailable) {
				if objs := objectsOf(t, s.Backend, session); len(objs) != 0 {
					t.Fatalf("left behind by the refusal: %+v", objs)
				}
				t.Skipf("the backend lends no host repository: %v", err)
			}
			if err == nil {
				_ = s.Backend.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
			}
			t.Fatalf("a backend that takes no host workspace must refuse a clone with ErrUnavailable: %v", err)
		}
		if err != nil {
			t.Fatalf("create a streamed clone box: %v", err)
		}
		t.Cleanup(func() { _ = s.Backend.Remove(context.Background(), bx.ID, sandbox.RemoveOptions{}) })
		if bx, err = s.Backend.Start(ctx, bx.ID); err != nil {
			t.Fatalf("start: %v", err)
		}
		b := &Box{Box: bx, Client: Connect(t, s.Backend, bx.ID)}
		t.Cleanup(func() { b.Client.Close() })
		out, errs, code := b.Run(t, `ls -A /workspace; test ! -e `+sandbox.OriginDir+` && echo no-origin; echo x > /workspace/probe && cat /workspace/probe`)
		if code != 0 || out != "no-origin\nx\n" {
			t.Fatalf("a streamed clone box's /workspace and origin: exit %d %q %q", code, out, errs)
		}
		return
	}
	repo := s.Workspace(t)
	for p, c := range map[string]string{"README": "hello\n", "src/main.go": "package main\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chownAll(t, repo)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-qm", "first"}} {
		if out, err := hostGit(t, repo, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := hostGit(t, repo, "rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("rev-parse: %v\n%s", err, out)
	}
	base := strings.TrimSpace(out)
	before := treeSnapshot(t, repo)

	bx, err := s.Backend.Create(ctx, sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime, Workspace: repo, Clone: true})
	if errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Skipf("the backend lends no host repository: %v", err)
	}
	if err != nil {
		t.Fatalf("create a clone box: %v", err)
	}
	t.Cleanup(func() { _ = s.Backend.Remove(context.Background(), bx.ID, sandbox.RemoveOptions{}) })
	if bx, err = s.Backend.Start(ctx, bx.ID); err != nil {
		t.Fatalf("start: %v", err)
	}
	b := &Box{Box: bx, Client: Connect(t, s.Backend, bx.ID)}
	t.Cleanup(func() { b.Client.Close() })
	run := func(what, script string) string {
		t.Helper()
		out, errs, code := b.Run(t, script)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", what, code, out, errs)
		}
		return out
	}
	origin := sandbox.OriginDir

	// The origin: the box user's own (idmapped), so git reads it without
	// any safe.directory, and it holds the history.
	if got := run("the origin's owner", `stat -c %u `+origin); strings.TrimSpace(got) != fmt.Sprint(sandbox.BoxUID) {
		t.Fatalf("%s shows uid %q, not the box user's %d", origin, got, sandbox.BoxUID)
	}
	if got := run("git log of the origin", `git --git-dir=`+origin+` log --format=%H:%s`); strings.TrimSpace(got) != base+":first" {
		t.Fatalf("git log of the origin: %q, want %s:first", got, base)
	}
	// ... and nothing of it is writable.
	for _, script := range []string{
		`touch ` + origin + `/probe`,
		`echo '[core]' >> ` + origin + `/config`,
		`mkdir ` + origin + `/objects/zz`,
		`echo /tmp > ` + origin + `/objects/info/alternates`,
		`rm ` + origin + `/HEAD`,
		`mv ` + origin + `/hooks ` + origin + `/hooks.old`,
	} {
		out, errs, code := b.Run(t, script)
		if code == 0 {
			t.Errorf("the box could %s: %q", script, out)
		} else if !strings.Contains(errs, "Read-only file system") {
			t.Errorf("%s failed, but not for a read-only file system: %q", script, errs)
		}
	}
	// /workspace: the box's own, empty and writable, not the repository.
	if got := run("list /workspace", `ls -A /workspace`); got != "" {
		t.Fatalf("/workspace of a clone box is not empty: %q", got)
	}
	run("write /workspace", `echo box > /workspace/probe && cat /workspace/probe >/dev/null`)
	if _, err := os.Lstat(filepath.Join(repo, "probe")); err == nil {
		t.Fatal("a file written at /workspace in the box is in the host repository")
	}
	run("clear /workspace", `rm /workspace/probe`)

	// The Runner's recipe: a clone that borrows the origin's objects, on a
	// branch at the base, checked out, and committed to.
	g := `git -c user.name=a -c user.email=a@b`
	run("the clone recipe", `set -e; cd /workspace && git init -q -b paddock/t . && echo `+origin+`/objects > .git/objects/info/alternates &&
		git update-ref refs/heads/paddock/t `+base+` && git reset -q --hard && `+g+` commit -q --allow-empty -m x`)
	if got := run("the clone's log", `cd /workspace && git log --format=%s paddock/t && cat README && git status --porcelain`); got != "x\nfirst\nhello\n" {
		t.Fatalf("the clone: %q, want its commit on the base, the base's files checked out and nothing else changed", got)
	}

	b.Client.Close()
	if err := s.Backend.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		after := treeSnapshot(t, repo)
		paths := maps.Clone(before)
		maps.Copy(paths, after)
		for p := range paths {
			if before[p] != after[p] {
				t.Errorf("%s: the host repository's %s is now %q, was %q (\"\": none)", when, p, after[p], before[p])
			}
		}
	}
	unchanged("after the box stopped")

	// A restarted Runner starts the box again as a clone box: the origin
	// again, read-only, and the clone kept on the session's volume.
	be := s.Backend
	if s.Reopen != nil {
		be = s.Reopen(t)
	}
	if bx, err = be.Start(ctx, bx.ID); err != nil {
		t.Fatalf("start again: %v", err)
	}
	b = &Box{Box: bx, Client: Connect(t, be, bx.ID)}
	t.Cleanup(func() { b.Client.Close() })
	if got := run("after a restart", `git --git-dir=`+origin+` rev-parse HEAD && cd /workspace && git log -1 --format=%s`); got != base+"\nx\n" {
		t.Fatalf("after a restart: %q, want the origin's HEAD and the clone's commit", got)
	}
	if out, _, code := b.Run(t, `touch `+origin+`/probe`); code == 0 {
		t.Fatalf("after a restart the origin is writable: %q", out)
	}
	b.Client.Close()
	if err := be.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	unchanged("after the second start")
	if err := be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNothingLeft(t, be, session)
}

// treeSnapshot is every path under root (the root itself as "."), with its
// type, mode, owner and, for a file, a hash of its content, for a link
// its target: what a box must not have changed.
func treeSnapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		what := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			what += " link " + l
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			what += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[rel] = what
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
