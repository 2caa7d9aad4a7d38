package gitimport

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// TestPack: the pack of a base holds everything it reaches: a repository made from it alone checks out the base; the host
// repository is unchanged; a base that is not an object id is refused.
func TestPack(t *testing.T) {
	f := newFixture(t)
	before := snapshot(t, f.gitDir)
	var pack bytes.Buffer
	if err := Pack(context.Background(), f.opts("x"), f.base, &pack); err != nil {
		t.Fatal(err)
	}
	diffSnapshots(t, before, snapshot(t, f.gitDir), nil)

	clone := filepath.Join(f.dir, "from-pack")
	f.git(f.dir, "init", "-q", "-b", "paddock/x", clone)
	if _, err := f.gitIn(clone, pack.Bytes(), "index-pack", "--stdin", "--strict"); err != nil {
		t.Fatalf("index-pack: %v", err)
	}
	f.git(clone, "update-ref", "refs/heads/paddock/x", f.base)
	f.git(clone, "reset", "-q", "--hard")
	if got := f.git(clone, "rev-list", "--objects", "--missing=print", "HEAD"); bytes.Contains([]byte(got), []byte("?")) {
		t.Fatalf("objects missing from the pack:\n%s", got)
	}
	if got := f.git(clone, "show", "HEAD:README"); got != "hello" {
		t.Fatalf("README from the pack: %q", got)
	}
	if err := Pack(context.Background(), f.opts("x"), "HEAD", &pack); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a base by name: %v", err)
	}
}
