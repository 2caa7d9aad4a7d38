// A host workspace's view for a docker box: mounted at each start, taken
// off at each stop, and the checks made before a box gets one.

package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"

	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
)

// ownMounts: a root Runner binds each host workspace onto a directory of
// its own (wsMount) from a descriptor, and Docker binds that directory,
// whose path no box can write: nothing a box does to the workspace's path
// after the box is made changes what Docker binds. A Runner that is not
// root cannot, and takes no host workspace (wsmount.ErrNotRoot).
func (b *Backend) ownMounts() bool { return os.Geteuid() == 0 }

func (b *Backend) wsMount(session string) string {
	return filepath.Join(b.cfg.Dir, "workspaces", session)
}

// wsState is wsmount's record of a session's workspace mount: beside the
// mount point, never inside it.
func (b *Backend) wsState(session string) string {
	return filepath.Join(b.cfg.Dir, "workspaces", session+".json")
}

// mountWorkspace makes the box's view of the workspace real at the
// session's wsMount (see wsmount), as the box's labels say: the workspace
// (labelWorkspace) with its host code read-only unless labelUnsafeHostCode,
// or for a clone box (labelClone) only its git directory, read-only. The
// box's user is sandbox.BoxUID on the host too, since Docker maps no user
// namespace. On a gVisor runtime, whose sentry makes the box's files as
// root and then gives them to the box user, the view maps root as well
// (wsmount.Options.RootCreates).
func (b *Backend) mountWorkspace(session string, labels map[string]string, runtime string) error {
	if err := sandbox.ValidSession(session); err != nil {
		return err
	}
	mountView := wsmount.Mount
	if labels[labelClone] == "1" {
		mountView = wsmount.MountOrigin
	}
	// A box made before the owner was kept has no label: 0, unchecked.
	ownerUID, _ := strconv.Atoi(labels[labelWorkspaceUID])
	_, err := mountView(wsmount.Options{Source: labels[labelWorkspace], Target: b.wsMount(session), State: b.wsState(session),
		BoxUID: sandbox.BoxUID, BoxGID: sandbox.BoxUID, UnsafeHostCode: labels[labelUnsafeHostCode] == "1", OwnerUID: ownerUID, Session: session,
		RootCreates: runtimes.KindOf(runtime, "") == runtimes.GVisor})
	return err
}

// unmountWorkspace takes the view off (the box has stopped) and keeps the
// mount point, which the container's bind names.
func (b *Backend) unmountWorkspace(session string) {
	if sandbox.ValidSession(session) != nil {
		return
	}
	_ = wsmount.Unmount(b.wsMount(session), b.wsState(session))
}

// dropWorkspaceMount undoes mountWorkspace when the box is removed. The
// mount point is removed as an empty directory only, never recursively;
// what the session kept across restarts (its .git/worktrees) goes too.
func (b *Backend) dropWorkspaceMount(session string) {
	if sandbox.ValidSession(session) != nil {
		return
	}
	b.unmountWorkspace(session)
	_ = os.Remove(b.wsMount(session))
	_ = wsmount.Forget(b.wsState(session)) // the session's .git/worktrees
}

// checkWorkspace refuses host directories that would hand the box the
// daemon or the host: the Docker socket, /, and the kernel's trees. It
// returns the directory's path with its symlinks resolved, which is what is
// checked and bound.
func checkWorkspace(ws string) (string, error) {
	if !filepath.IsAbs(ws) {
		return "", fmt.Errorf("workspace %q must be absolute: %w", ws, pdkerr.ErrInvalid)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("workspace %q must be an existing directory: %w", ws, pdkerr.ErrInvalid)
	}
	// The check is of where the path leads, not of its text: a symlink
	// to /run would otherwise pass. Docker binds the resolved path.
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %v: %w", ws, err, pdkerr.ErrInvalid)
	}
	for _, bad := range []string{"/", "/proc", "/sys", "/dev", "/run", "/var/run", "/var/lib/docker", "/etc", "/boot"} {
		if real == bad || strings.HasPrefix(real, bad+"/") && bad != "/" {
			return "", fmt.Errorf("workspace %s is a system directory (%s): %w", ws, real, pdkerr.ErrForbidden)
		}
	}
	for _, sock := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"} {
		if rel, err := filepath.Rel(real, sock); err == nil && !strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("workspace %s contains the daemon socket %s: %w", ws, sock, pdkerr.ErrForbidden)
		}
	}
	return real, nil
}
