package claudecode

import (
	"encoding/json"

	"github.com/paddockhq/paddock/internal/sessions/activity"
)

// ManagedSettingsPath is where Claude Code on Linux reads its managed
// (policy) settings: verified in the pinned 2.1.328 binary, whose default
// managed directory on Linux is /etc/claude-code. The file is bound
// read-only into every box (local) or baked into the image (docker), so
// neither the box user nor a repository's .claude/ can remove it.
//
// Hooks in managed settings run alongside the user's and the project's
// (paddock does not set allowManagedHooksOnly, so the owner's own hooks
// still run), and keep running when a user's settings say
// disableAllHooks: the pinned CLI then falls back to the managed hooks
// only.
const ManagedSettingsPath = "/etc/claude-code/managed-settings.json"

// HookTimeoutSeconds bounds one paddock hook in Claude Code (its own
// timeout; the hook command itself gives up after a second).
const HookTimeoutSeconds = 5

// ManagedSettings is the managed settings file for a box whose paddock
// binary is at paddockPath (an absolute path: the hook must not depend on
// a PATH the agent can change). It installs one command hook per event of
// activity.HookEvents: `paddock guest hook EVENT`, which reports to the
// guest, prints nothing (output of a SessionStart or UserPromptSubmit
// hook would reach the model) and always exits 0.
func ManagedSettings(paddockPath string) []byte {
	type hook struct {
		Type    string `json:"type"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}
	type matcher struct {
		Matcher string `json:"matcher,omitempty"`
		Hooks   []hook `json:"hooks"`
	}
	hooks := map[string][]matcher{}
	for _, ev := range activity.HookEvents {
		m := matcher{Hooks: []hook{{Type: "command", Command: paddockPath + " guest hook " + ev, Timeout: HookTimeoutSeconds}}}
		if ev == activity.EventPreToolUse {
			m.Matcher = "*"
		}
		hooks[ev] = []matcher{m}
	}
	b, _ := json.MarshalIndent(map[string]any{"hooks": hooks}, "", "  ") // strings and ints only: cannot fail
	return append(b, '\n')
}
