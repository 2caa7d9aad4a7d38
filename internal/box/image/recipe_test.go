package image

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestNormalPackages(t *testing.T) {
	got, err := NormalPackages([]string{"python3-venv", "golang", "build-essential", "golang", "g++", "libc6.1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"build-essential", "g++", "golang", "libc6.1", "python3-venv"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "a", "Golang", "jq=1.6", "jq:amd64", "--foo", "-x", "jq,git", "jq git", "../x", "jq\n", "ĵq"} {
		_, err := NormalPackages([]string{"git", bad})
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "is not a Debian package name") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestRecipeBase: the packages join DefaultBase's, sorted, so the base of
// a recipe with none is the default base, tag and all.
func TestRecipeBase(t *testing.T) {
	def := DefaultBase()
	b, err := Recipe{}.BaseSpec("")
	if err != nil || b.Tag() != def.Tag() || !slices.Equal(b.Packages, def.Packages) {
		t.Fatalf("the zero recipe's base is %v %v, not the default %s", b, err, def.Tag())
	}
	b, err = Recipe{Packages: []string{"jq", "git", "build-essential"}}.BaseSpec("http://m.example/debian")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(b.Packages) || !slices.Contains(b.Packages, "jq") || !slices.Contains(b.Packages, "tmux") ||
		len(b.Packages) != len(def.Packages)+2 || b.Mirror != "http://m.example/debian" {
		t.Fatalf("base %+v", b)
	}
	if b.Tag() == def.Tag() {
		t.Fatal("a base with more packages has the default's tag")
	}
}

func TestRecipeCheck(t *testing.T) {
	for name, c := range map[string]struct {
		r    Recipe
		want string // "" when accepted
	}{
		"zero":                {Recipe{}, ""},
		"packages":            {Recipe{Packages: []string{"jq"}}, ""},
		"dockerfile":          {Recipe{Dockerfile: "/p/Dockerfile", BuildNetwork: "default"}, ""},
		"host network":        {Recipe{Dockerfile: "/p/Dockerfile", BuildNetwork: "host"}, ""},
		"relative":            {Recipe{Dockerfile: "p/Dockerfile"}, "not an absolute path"},
		"bad network":         {Recipe{Dockerfile: "/p/Dockerfile", BuildNetwork: "bridge"}, "is none of none, default or host"},
		"network, no file":    {Recipe{BuildNetwork: "default"}, "there is no Dockerfile"},
		"bad package":         {Recipe{Packages: []string{"JQ"}}, "not a Debian package name"},
		"none, no file is ok": {Recipe{BuildNetwork: "none"}, ""},
	} {
		err := c.r.Check()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestRecipeHash: the order packages come in does not matter; every
// package, the Dockerfile, and every context file's path, mode and
// contents do; the build network and the mirror do not.
func TestRecipeHash(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	df := filepath.Join(dir, "Dockerfile")
	write("Dockerfile", "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\nCOPY tool /usr/local/bin/tool\n", 0o644)
	write("tool", "#!/bin/sh\necho tool\n", 0o755)
	write("lib/data.txt", "data\n", 0o644)
	hash := func(r Recipe) string {
		t.Helper()
		h, err := r.Hash()
		if err != nil {
			t.Fatal(err)
		}
		if !hex64Re.MatchString(h) {
			t.Fatalf("hash %q", h)
		}
		return h
	}
	seen := map[string]string{}
	differs := func(what, h string) {
		t.Helper()
		if prev, ok := seen[h]; ok {
			t.Fatalf("%s hashes as %s did: %s", what, prev, h)
		}
		seen[h] = what
	}
	zero := hash(Recipe{})
	differs("the zero recipe", zero)
	jq := hash(Recipe{Packages: []string{"jq", "golang"}})
	if again := hash(Recipe{Packages: []string{"golang", "jq", "jq"}}); again != jq {
		t.Fatalf("order or duplicates changed the hash: %s %s", jq, again)
	}
	if def := hash(Recipe{Packages: []string{"git", "tmux"}}); def != zero {
		t.Fatalf("packages the default base has already changed the hash: %s %s", zero, def)
	}
	differs("jq golang", jq)
	differs("jq", hash(Recipe{Packages: []string{"jq"}}))
	differs("golang", hash(Recipe{Packages: []string{"golang"}}))
	withFile := hash(Recipe{Dockerfile: df})
	differs("a Dockerfile", withFile)
	if h := hash(Recipe{Dockerfile: df, BuildNetwork: NetworkDefault}); h != withFile {
		t.Fatal("the build network changed the hash")
	}
	if h := hash(Recipe{Dockerfile: df}); h != withFile {
		t.Fatal("the same context hashed twice differs")
	}
	differs("a Dockerfile and jq", hash(Recipe{Dockerfile: df, Packages: []string{"jq"}}))
	for _, c := range []struct {
		what   string
		change func()
	}{
		{"the Dockerfile's contents", func() {
			write("Dockerfile", "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\nCOPY tool /usr/bin/tool\n", 0o644)
		}},
		{"a file's contents", func() { write("tool", "#!/bin/sh\necho tool 2\n", 0o755) }},
		{"a file's mode", func() { write("tool", "#!/bin/sh\necho tool 2\n", 0o700) }},
		{"a nested file", func() { write("lib/data.txt", "data 2\n", 0o644) }},
		{"a new file", func() { write("lib/more.txt", "", 0o644) }},
		{"a renamed file", func() {
			if err := os.Rename(filepath.Join(dir, "lib/more.txt"), filepath.Join(dir, "lib/more2.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink", func() {
			if err := os.Symlink("tool", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
		}},
		{"an empty directory", func() {
			if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"a .dockerignore", func() { write(".dockerignore", "lib/more2.txt\n", 0o644) }},
	} {
		c.change()
		differs(c.what, hash(Recipe{Dockerfile: df}))
	}
	// What .dockerignore leaves out is not hashed.
	before := hash(Recipe{Dockerfile: df})
	write("lib/more2.txt", "ignored\n", 0o644)
	if h := hash(Recipe{Dockerfile: df}); h != before {
		t.Fatal("an ignored file changed the hash")
	}
	// A Dockerfile other than the one accepted has no hash.
	accepted, err := os.ReadFile(df)
	if err != nil {
		t.Fatal(err)
	}
	if h := hash(Recipe{Dockerfile: df, AcceptedDockerfile: accepted}); h != before {
		t.Fatal("the accepted Dockerfile changed the hash")
	}
	if _, err := (Recipe{Dockerfile: df, AcceptedDockerfile: append(accepted, "RUN x\n"...)}).Hash(); !errdefs.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "changed since it was accepted") {
		t.Fatalf("a Dockerfile other than the accepted one: %v", err)
	}
	// A Dockerfile that breaks the contract has no hash.
	write("Dockerfile", "FROM debian:bookworm\n", 0o644)
	if _, err := (Recipe{Dockerfile: df}).Hash(); err == nil || !strings.Contains(err.Error(), "FROM ${PADDOCK_BASE}") {
		t.Fatalf("a floating FROM: %v", err)
	}
	if _, err := (Recipe{Dockerfile: filepath.Join(dir, "missing")}).Hash(); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a missing Dockerfile: %v", err)
	}
}

func TestRecipeTag(t *testing.T) {
	h := strings.Repeat("0123456789ab", 5) + "cdef"
	for _, c := range []struct {
		r    Recipe
		want string
	}{
		{Recipe{}, "paddock/box:claude-2.1.328"},
		{Recipe{BuildNetwork: "none"}, "paddock/box:claude-2.1.328"},
		{Recipe{Packages: []string{"jq"}}, "paddock/box-0123456789ab:claude-2.1.328"},
		{Recipe{Dockerfile: "/p/Dockerfile"}, "paddock/box-0123456789ab:claude-2.1.328"},
	} {
		if got := RecipeTag(c.r, h, "2.1.328"); got != c.want {
			t.Errorf("%+v: %s, want %s", c.r, got, c.want)
		}
	}
	// The docker backend reads the Claude Code version after the last
	// ":claude-": a recipe's tag must keep it the whole of what follows.
	tag := RecipeTag(Recipe{Packages: []string{"jq"}}, h, "2.1.328")
	if i := strings.LastIndex(tag, ":claude-"); i < 0 || tag[i+len(":claude-"):] != "2.1.328" {
		t.Fatalf("%s does not end in :claude-<version>", tag)
	}
}

// TestEnsureRefuses: what Ensure refuses before it asks Docker anything
// (the client is nil), each with what to give.
func TestEnsureRefuses(t *testing.T) {
	ok := EnsureOptions{ClaudeVersion: "2.1.328", ClaudeBin: "/bin/true", GuestBin: "/bin/true"}
	for name, c := range map[string]struct {
		r    Recipe
		o    func(*EnsureOptions)
		want string
	}{
		"claude version": {Recipe{}, func(o *EnsureOptions) { o.ClaudeVersion = "latest" }, "not an exact version"},
		"no claude":      {Recipe{}, func(o *EnsureOptions) { o.ClaudeBin = "" }, "EnsureOptions.ClaudeBin or InstallClaude"},
		"no guest":       {Recipe{}, func(o *EnsureOptions) { o.GuestBin = "" }, "EnsureOptions.GuestBin"},
		"bad package":    {Recipe{Packages: []string{"jq=1.6"}}, func(*EnsureOptions) {}, "not a Debian package name"},
		"relative file":  {Recipe{Dockerfile: "Dockerfile"}, func(*EnsureOptions) {}, "not an absolute path"},
	} {
		o := ok
		c.o(&o)
		_, built, err := Ensure(t.Context(), nil, c.r, o)
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) || built {
			t.Errorf("%s: %v (built %v), want %q", name, err, built, c.want)
		}
	}
}
