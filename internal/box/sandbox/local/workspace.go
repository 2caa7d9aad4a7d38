// A host workspace's view, mounted at each start, taken off at each stop.

package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"golang.org/x/sys/unix"
)

// wsMountPoint is where a box's host workspace view is mounted (in its
// box directory, which no box can write), and wsState its record.
func (b *Backend) wsMountPoint(id string) string { return filepath.Join(b.boxDir(id), "workspace") }

func (b *Backend) wsState(id string) string { return filepath.Join(b.boxDir(id), "workspace.json") }

// mountWorkspace makes the box's view of its host workspace (wsmount:
// idmapped to the box's uid, host code read-only), or for a clone box the
// read-only view of the repository's git directory (wsmount.MountOrigin),
// and opens it for bwrap.
// The path is the one resolved when the box was made, walked without
// following any symlink; a box made before that resolution was recorded
// gets it now, once.
func (b *Backend) mountWorkspace(r *record) (*os.File, error) {
	if r.WorkspaceReal == "" {
		real, err := filepath.EvalSymlinks(r.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace %s is gone: %v: %w", r.Workspace, err, errdefs.ErrConflict)
		}
		r.WorkspaceReal = real
		if err := b.save(r); err != nil {
			return nil, err
		}
	}
	mp := b.wsMountPoint(r.ID)
	mount := wsmount.Mount
	if r.Clone {
		mount = wsmount.MountOrigin
	}
	// bwrap's box writes as its host uid; gVisor's sentry as root, then
	// chowns to the box user, with no user namespace of the box's between
	// (runsc.go).
	boxUID, gvisor := r.UID, onGVisor(r)
	if gvisor {
		boxUID = sandbox.BoxUID
	}
	own, err := mount(wsmount.Options{Source: r.WorkspaceReal, Target: mp, State: b.wsState(r.ID),
		BoxUID: boxUID, BoxGID: boxUID, UnsafeHostCode: r.UnsafeHostCode, OwnerUID: r.WorkspaceUID, Session: r.Session, RootCreates: gvisor})
	if err != nil {
		return nil, err
	}
	if r.WorkspaceUID == 0 { // a record from before the owner was kept
		r.WorkspaceUID = own.UID
		if err := b.save(r); err != nil {
			b.unmountWorkspace(r)
			return nil, err
		}
	}
	fd, err := sandbox.OpenNoFollow(unix.AT_FDCWD, mp)
	if err != nil {
		b.unmountWorkspace(r)
		return nil, err
	}
	return os.NewFile(uintptr(fd), mp), nil
}

// unmountWorkspace undoes mountWorkspace: the box has stopped (its own
// mount namespace, which held a copy, is gone with it).
func (b *Backend) unmountWorkspace(r *record) error {
	if r.Workspace == "" {
		return nil
	}
	mp := b.wsMountPoint(r.ID)
	if err := wsmount.Unmount(mp, b.wsState(r.ID)); err != nil {
		return fmt.Errorf("box %s: take its workspace mount off: %w", r.ID, err)
	}
	return nil
}
