package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestDockerignore(t *testing.T) {
	ig, err := parseDockerignore(strings.NewReader(`
# comment
.git
/node_modules
*.log
!keep.log
docs
!docs/README.md
**/*.tmp
build/**
a?c
[xy].txt
`))
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		".git":               true,
		".git/config":        true,
		"node_modules/x/y":   true,
		"sub/node_modules":   false,
		"app.log":            true,
		"keep.log":           false,
		"sub/app.log":        false, // * stops at a slash
		"docs":               true,
		"docs/guide.md":      true,
		"docs/README.md":     false,
		"x.tmp":              true,
		"a/b/c/x.tmp":        true,
		"build":              false, // build/** is what is in it
		"build/out/bin":      true,
		"abc":                true,
		"abbc":               false,
		"x.txt":              true,
		"z.txt":              false,
		"main.go":            false,
		"Dockerfile":         false,
		"src/.git/something": false,
	} {
		if got := ig.excluded(rel); got != want {
			t.Errorf("%s: excluded %v, want %v", rel, got, want)
		}
	}
	if (*ignorer)(nil).excluded("x") {
		t.Error("no .dockerignore leaves something out")
	}
	for _, bad := range []string{"[a", `x\`} {
		if _, err := parseDockerignore(strings.NewReader(bad)); !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestReadContext: what a context sends, in the tar stream as in the
// hash; what is refused, with what to do.
func TestReadContext(t *testing.T) {
	dir := t.TempDir()
	for rel, s := range map[string]string{
		"Dockerfile":      "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\n",
		"tool":            "#!/bin/sh\n",
		"src/main.go":     "package main\n",
		".git/HEAD":       "ref: x\n",
		".dockerignore":   ".git\n*.log\n",
		"debug.log":       "noise\n",
		"src/sub/data.db": "data",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tool"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "outside")); err != nil {
		t.Fatal(err)
	}
	bc, err := ReadContext(filepath.Join(dir, "Dockerfile"), "")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sent := newRecipeHash(Recipe{})
	if err := bc.writeTar(&buf, sent); err != nil {
		t.Fatal(err)
	}
	hashed := newRecipeHash(Recipe{})
	if err := bc.hashInto(hashed); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%x", sent.Sum(nil)) != fmt.Sprintf("%x", hashed.Sum(nil)) {
		t.Fatal("what writeTar hashed is not what hashInto hashed")
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d, time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		switch h.Name {
		case "tool":
			if h.Mode != 0o4755 {
				t.Errorf("tool: mode %o", h.Mode)
			}
		case "outside":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/passwd" {
				t.Errorf("outside: sent as %c %q, not as the link it is", h.Typeflag, h.Linkname)
			}
		case "Dockerfile":
			b, _ := io.ReadAll(tr)
			if !strings.HasPrefix(string(b), "ARG PADDOCK_BASE") {
				t.Errorf("Dockerfile sent as %q", b)
			}
		}
	}
	want := []string{".dockerignore", "Dockerfile", "outside", "src/", "src/main.go", "src/sub/", "src/sub/data.db", "tool"}
	if !slices.Equal(names, want) {
		t.Fatalf("sent %v, want %v", names, want)
	}

	// Nothing below the directory is read through a symlink: a file
	// that turned into one since ReadContext is refused, not followed.
	if err := os.Rename(filepath.Join(dir, "tool"), filepath.Join(dir, "tool.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "tool")); err != nil {
		t.Fatal(err)
	}
	if err := bc.writeTar(io.Discard, newRecipeHash(Recipe{})); err == nil || !strings.Contains(err.Error(), "follows no symlink") {
		t.Fatalf("a file swapped for a symlink: %v", err)
	}
	if err := os.Rename(filepath.Join(dir, "tool.old"), filepath.Join(dir, "tool")); err != nil {
		t.Fatal(err)
	}
	// A linked directory is sent as the link; a linked Dockerfile or
	// context directory is refused.
	if err := os.Symlink("/etc", filepath.Join(dir, "etc")); err != nil {
		t.Fatal(err)
	}
	if bc, err = ReadContext(filepath.Join(dir, "Dockerfile"), ""); err != nil || !slices.ContainsFunc(bc.entries, func(e ctxEntry) bool {
		return e.rel == "etc" && e.kind == tar.TypeSymlink && e.link == "/etc"
	}) {
		t.Fatalf("a linked directory: %v %+v", err, bc)
	}
	if err := os.Symlink("Dockerfile", filepath.Join(dir, "linked.Dockerfile")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadContext(filepath.Join(dir, "linked.Dockerfile"), ""); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "not a symlink") {
		t.Errorf("a linked Dockerfile: %v", err)
	}
	linked := filepath.Join(t.TempDir(), "ctx")
	if err := os.Symlink(dir, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadContext(filepath.Join(linked, "Dockerfile"), ""); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "not a symlink to one") {
		t.Errorf("a linked context directory: %v", err)
	}
	if _, err := ReadContext(filepath.Join(dir, "missing", "Dockerfile"), ""); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a missing context: %v", err)
	}
	// Within a workspace, a link on the way down to the context is
	// refused too (a box may have swapped a directory for one), and a
	// path out of the workspace is.
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "ctx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "ctx", "Dockerfile"), []byte("ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "tools")); err != nil {
		t.Fatal(err)
	}
	through := filepath.Join(ws, "tools", "ctx", "Dockerfile")
	if _, err := ReadContext(through, ""); err != nil {
		t.Fatalf("a link on the way, not within a workspace: %v", err)
	}
	if _, err := ReadContext(through, ws); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a context through a link inside the workspace: %v", err)
	}
	if _, err := ReadContext(filepath.Join(dir, "Dockerfile"), ws); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "not inside") {
		t.Errorf("a Dockerfile outside the workspace: %v", err)
	}
	if _, err := ReadContext(filepath.Join(dir, "Dockerfile"), filepath.Dir(dir)); err != nil {
		t.Errorf("a Dockerfile inside, with no link on the way: %v", err)
	}

	// A socket is refused; so is a context too big to send.
	l, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadContext(filepath.Join(dir, "Dockerfile"), ""); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "remove it or list it in") {
		t.Errorf("a socket in the context: %v", err)
	}
	l.Close()
	os.Remove(filepath.Join(dir, "s.sock"))
	big, err := os.Create(filepath.Join(dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxContextBytes + 1); err != nil { // sparse: nothing written
		t.Fatal(err)
	}
	big.Close()
	if _, err := ReadContext(filepath.Join(dir, "Dockerfile"), ""); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "more than 512 MiB") || !strings.Contains(err.Error(), "directory of its own") {
		t.Errorf("a context over the limit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte(".git\n*.bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadContext(filepath.Join(dir, "Dockerfile"), ""); err != nil {
		t.Errorf("the big file, ignored: %v", err)
	}
}

// FuzzDockerignore: whatever a .dockerignore holds, it is read or refused
// and its matcher answers, never panics.
func FuzzDockerignore(f *testing.F) {
	f.Add("*.log\n!keep.log\n**/tmp\n[ab]?\n", "a/b/keep.log")
	f.Add("\\", "x")
	f.Add("[!a-", "b")
	f.Fuzz(func(t *testing.T, pats, rel string) {
		ig, err := parseDockerignore(strings.NewReader(pats))
		if err == nil {
			_ = ig.excluded(rel)
		}
	})
}
