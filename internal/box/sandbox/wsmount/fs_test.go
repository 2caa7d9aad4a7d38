package wsmount

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

// TestRefusedFilesystem: a workspace on a filesystem without idmapped
// mounts (ramfs) is refused by Check with the reason and the ways out,
// not bound read-only or as nobody's.
func TestRefusedFilesystem(t *testing.T) {
	testenv.Root(t)
	dir := filepath.Join(t.TempDir(), "ramfs")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("none", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("cannot mount a ramfs here: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := unix.Chown(dir, ownerUID, ownerUID); err != nil {
		t.Fatal(err)
	}
	_, _, err := Check(dir)
	if err == nil || !errdefs.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "refuses an idmapped mount") || !strings.Contains(err.Error(), "leave out --workspace") {
		t.Fatalf("a workspace on ramfs: %v", err)
	}
}
