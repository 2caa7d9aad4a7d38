package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testenv"
)

func TestConformance(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	cfg := Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"), GuestBinary: testenv.PaddockBinary(t)}
	open := func(t *testing.T) sandbox.Backend {
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend: open(t),
		Reopen:  open,
		Workspace: func(t *testing.T) string {
			d := filepath.Join(testenv.TraversableTempDir(t), "ws")
			os.Mkdir(d, 0o777)
			os.Chmod(d, 0o777) // the box's uid writes here
			return d
		},
	})
}
