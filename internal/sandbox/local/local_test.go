package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testenv"
)

func newBackend(t *testing.T) *Backend {
	t.Helper()
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	guest := testenv.PaddockBinary(t)
	root := filepath.Join(testenv.TraversableTempDir(t), "local")
	b, err := New(Config{Root: root, GuestBinary: guest})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	b := newBackend(t)
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend: b,
		Workspace: func(t *testing.T) string {
			d := filepath.Join(testenv.TraversableTempDir(t), "ws")
			os.Mkdir(d, 0o777)
			os.Chmod(d, 0o777) // the box's uid writes here
			return d
		},
	})
}
