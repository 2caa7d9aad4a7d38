// The box image a docker box is made from: what is checked at create.

package docker

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// checkImage refuses a box image that this paddock cannot run, by its
// labels, each mismatch with the command that builds the right one:
//   - no paddock.image label: not built by `paddock image build`;
//   - a guest protocol older than this paddock's (its guest lacks what
//     the Runner asks of it);
//   - a Claude Code version other than the one its tag names
//     (…:claude-V), or, for a tag that names none, Config.ClaudeVersion;
//   - a base not pinned by digest;
//   - a paddock version other than Config.PaddockVersion (when set): the
//     guest in the image is another paddock's.
func (b *Backend) checkImage(ref string, labels map[string]string) error {
	rebuild := func(what string) error {
		return fmt.Errorf("image %s %s: rebuild it with `%s`: %w", ref, what, b.buildCommand(ref), pdkerr.ErrConflict)
	}
	if labels[labelImage] == "" {
		return rebuild("was not built by paddock (no " + labelImage + " label)")
	}
	if v, err := strconv.Atoi(labels[sandbox.LabelGuestProtocol]); err != nil || v < sandbox.GuestProtocol {
		return rebuild(fmt.Sprintf("was built by an older paddock (guest protocol %q, this one needs %d)", labels[sandbox.LabelGuestProtocol], sandbox.GuestProtocol))
	}
	if want := claudeOfTag(ref, b.cfg.ClaudeVersion); want != "" && labels[sandbox.LabelClaudeVersion] != want {
		return rebuild(fmt.Sprintf("carries Claude Code %q, not %s", labels[sandbox.LabelClaudeVersion], want))
	}
	if base := labels[sandbox.LabelBase]; !pinnedBase.MatchString(base) {
		return rebuild(fmt.Sprintf("names its base %q, not pinned by digest", base))
	}
	if want := b.cfg.PaddockVersion; want != "" && labels[sandbox.LabelPaddockVersion] != want {
		return rebuild(fmt.Sprintf("carries paddock %q as its guest, not this paddock (%s)", labels[sandbox.LabelPaddockVersion], want))
	}
	return nil
}

// labelImage marks an image `paddock image build` made.
const labelImage = "paddock.image"

// pinnedBase is a base named by digest: a local image id or name@sha256.
var pinnedBase = regexp.MustCompile(`^(?:[^@\s]+@)?sha256:[0-9a-f]{64}$`)

// claudeOfTag is the Claude Code version a box image must carry: the one
// its tag names (…:claude-V), else def.
func claudeOfTag(ref, def string) string {
	if i := strings.LastIndex(ref, ":claude-"); i >= 0 && !strings.Contains(ref[i:], "/") {
		return ref[i+len(":claude-"):]
	}
	return def
}

// buildCommand is the command that builds ref for this paddock.
func (b *Backend) buildCommand(ref string) string {
	cmd := "paddock image build"
	v := claudeOfTag(ref, b.cfg.ClaudeVersion)
	if v != "" && v != claudecode.PinnedVersion {
		cmd += " --claude-version " + v
	}
	if v == "" {
		v = claudecode.PinnedVersion
	}
	if ref != "paddock/box:claude-"+v {
		cmd += " --tag " + ref
	}
	return cmd
}
