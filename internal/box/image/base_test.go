package image

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBaseSpecCheck(t *testing.T) {
	good := DefaultBase()
	good.Mirror = "http://deb.debian.org/debian"
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*BaseSpec){
		"suite with a slash":  func(b *BaseSpec) { b.Suite = "../bookworm" },
		"suite with options":  func(b *BaseSpec) { b.Suite = "--foreign" },
		"mirror not a URL":    func(b *BaseSpec) { b.Mirror = "deb.debian.org" },
		"mirror file URL":     func(b *BaseSpec) { b.Mirror = "file:///srv/debian" },
		"mirror with a space": func(b *BaseSpec) { b.Mirror = "http://x/debian --keyring=/k" },
		"package option":      func(b *BaseSpec) { b.Packages = []string{"--foo"} },
		"package list":        func(b *BaseSpec) { b.Packages = []string{"tmux,git"} },
	} {
		b := good
		b.Packages = append([]string(nil), good.Packages...)
		mut(&b)
		if err := b.Check(); err == nil {
			t.Errorf("%s: accepted %+v", name, b)
		}
	}
}

// TestBaseRecipe: the recipe names what the base holds, not where it came
// from; any change of content is a new tag.
func TestBaseRecipe(t *testing.T) {
	a, b := DefaultBase(), DefaultBase()
	b.Mirror = "http://mirror.example/debian"
	if a.Recipe() != b.Recipe() || a.Tag() != b.Tag() {
		t.Fatalf("the mirror changed the recipe: %s %s", a.Tag(), b.Tag())
	}
	c := DefaultBase()
	c.Packages = append(c.Packages, "vim-tiny")
	d := DefaultBase()
	d.Suite = "trixie"
	seen := map[string]bool{a.Tag(): true}
	for _, s := range []BaseSpec{c, d} {
		if seen[s.Tag()] {
			t.Fatalf("%+v has the tag of another recipe: %s", s, s.Tag())
		}
		seen[s.Tag()] = true
	}
	if !strings.HasPrefix(a.Tag(), "paddock/base:bookworm-") || len(a.Recipe()) != 12 {
		t.Fatalf("tag %s", a.Tag())
	}
}

func TestMirrorIn(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ file, want string }{
		"deb822":          {"Types: deb\nURIs: http://deb.debian.org/debian/\nSuites: bookworm bookworm-updates\n", "http://deb.debian.org/debian"},
		"one-line":        {"# a comment\ndeb http://ftp.de.debian.org/debian bookworm main\n", "http://ftp.de.debian.org/debian"},
		"security only":   {"URIs: http://deb.debian.org/debian-security\n", ""},
		"options skipped": {"deb [arch=amd64] http://x.example/debian bookworm main\n", ""},
		"not a URL":       {"URIs: cdrom:/media/debian\n", ""},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := mirrorIn(p); got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
}

// TestShow: the daemon's messages rendered as the docker CLI renders them
// on a pipe (no cursor moves), the build's id taken from its aux message,
// an import's from its last status, and the daemon's error returned.
func TestShow(t *testing.T) {
	build := `{"stream":"Step 1/2 : FROM sha256:aa\n"}
{"stream":" ---\u003e aa\n"}
{"aux":{"ID":"sha256:1111111111111111111111111111111111111111111111111111111111111111"}}
{"stream":"Successfully built 111111111111\n"}
`
	var out bytes.Buffer
	id, err := Show(strings.NewReader(build), &out)
	if err != nil || id != "sha256:1111111111111111111111111111111111111111111111111111111111111111" {
		t.Fatalf("build: id %q err %v", id, err)
	}
	if got := out.String(); got != "Step 1/2 : FROM sha256:aa\n ---> aa\nSuccessfully built 111111111111\n" {
		t.Fatalf("build rendered as %q", got)
	}
	pull := `{"status":"Pulling from library/debian","id":"bookworm"}
{"status":"Downloading","progressDetail":{"current":10,"total":100},"progress":"[=>   ]","id":"abc123"}
{"status":"Pull complete","id":"abc123"}
{"status":"sha256:2222222222222222222222222222222222222222222222222222222222222222"}
`
	out.Reset()
	id, err = Show(strings.NewReader(pull), &out)
	if err != nil || id != "sha256:2222222222222222222222222222222222222222222222222222222222222222" {
		t.Fatalf("pull/import: id %q err %v", id, err)
	}
	for _, want := range []string{"bookworm: Pulling from library/debian\n", "abc123: Pull complete\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pull rendered as %q, missing %q", out.String(), want)
		}
	}
	failed := `{"stream":"Step 1/1 : RUN false\n"}
{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"},"error":"The command '/bin/sh -c false' returned a non-zero code: 1"}
`
	if _, err := Show(strings.NewReader(failed), &out); err == nil || !strings.Contains(err.Error(), "returned a non-zero code: 1") {
		t.Fatalf("a failed build: %v", err)
	}
	if _, err := Show(strings.NewReader(`{"stream":`), &out); err == nil {
		t.Fatal("a cut stream: no error")
	}
}

// FuzzShow: whatever a daemon sends, Show returns (an id, an error or
// both) and never panics.
func FuzzShow(f *testing.F) {
	f.Add(`{"stream":"Step 1/2\n"}` + "\n" + `{"aux":{"ID":"sha256:1111111111111111111111111111111111111111111111111111111111111111"}}`)
	f.Add(`{"status":"Downloading","progressDetail":{"current":10,"total":100},"id":"abc"}`)
	f.Add(`{"errorDetail":{"code":1,"message":"no"},"error":"no"}`)
	f.Add(`{"aux":null}{"aux":"x"}{"progressDetail":{"current":-1,"total":-5}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var out bytes.Buffer
		_, _ = Show(strings.NewReader(s), &out)
	})
}
