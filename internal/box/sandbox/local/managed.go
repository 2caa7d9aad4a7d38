package local

import (
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// guestPath is where args binds the paddock binary in a box.
const guestPath = "/opt/paddock/bin/paddock"

// managedSettings writes Claude Code's managed settings for a box
// (paddock's activity hooks, claudecode.ManagedSettings) to its etc/
// directory and returns the layout entry that binds the file read-only
// at claudecode.ManagedSettingsPath, where neither the box user nor a
// repository can change or remove it. If the file cannot be written the
// box starts without it (false): claude runs, its activity goes unreported.
func (b *Backend) managedSettings(dir string) (mnt, bool) {
	p := filepath.Join(dir, "etc", "claude-managed-settings.json")
	if err := os.WriteFile(p, claudecode.ManagedSettings(guestPath), 0o644); err != nil {
		return mnt{}, false
	}
	return mnt{mROBind, p, claudecode.ManagedSettingsPath}, true
}
