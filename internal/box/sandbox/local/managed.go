package local

import (
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// guestPath is where args binds the paddock binary in a box.
const guestPath = "/opt/paddock/bin/paddock"

// managedSettingsArgs writes Claude Code's managed settings for a box
// (paddock's activity hooks, claudecode.ManagedSettings) to its etc/
// directory and returns the bwrap arguments that bind the file read-only
// at claudecode.ManagedSettingsPath, where neither the box user nor a
// repository can change or remove it. If the file cannot be written the
// box starts without it (nil): claude runs, its activity goes unreported.
func (b *Backend) managedSettingsArgs(dir string) []string {
	p := filepath.Join(dir, "etc", "claude-managed-settings.json")
	if err := os.WriteFile(p, claudecode.ManagedSettings(guestPath), 0o644); err != nil {
		return nil
	}
	return []string{"--ro-bind", p, claudecode.ManagedSettingsPath}
}
