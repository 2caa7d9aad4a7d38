package access

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// OwnWorkspace checks that path, symlinks resolved, is a directory uid
// owns, and returns its resolved absolute path (what is then mounted). A
// person may give a session only a directory of their own: the Runner,
// often root, could otherwise mount another user's files, or /etc.
func OwnWorkspace(path string, uid uint32) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("workspace %q: give an absolute path: %w", path, errdefs.ErrInvalid)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w: %w", path, err, errdefs.ErrInvalid)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w: %w", path, err, errdefs.ErrInvalid)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return "", fmt.Errorf("workspace %s is not a directory: %w", path, errdefs.ErrInvalid)
	}
	if st.Uid != uid {
		return "", fmt.Errorf("workspace %s belongs to uid %d, not to you (uid %d); a session may mount only a directory you own: %w", real, st.Uid, uid, errdefs.ErrForbidden)
	}
	return real, nil
}
