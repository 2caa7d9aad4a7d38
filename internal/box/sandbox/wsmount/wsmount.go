// Package wsmount makes the view of a host workspace that a box binds at
// /workspace: the owner's directory, writable by the box, where what the
// box writes belongs on the host to the directory's owner, and where the
// files the host itself will run later stay read-only.
//
// How, for a root Runner (only root can make these mounts):
//
//  1. The workspace is opened once, walking its resolved path with no
//     symlink followed (sandbox.OpenWorkspace); everything below works
//     from that descriptor or from the mount made of it, never from a path
//     a box could change.
//  2. A clone of it (open_tree) gets an idmap (mount_setattr with
//     MOUNT_ATTR_IDMAP, Linux ≥ 5.12) from a user namespace whose only
//     mapping is owner uid → the box's host uid (and the same for the
//     group): files of the owner show, through the mount, as the box
//     user's, and what the box writes lands on disk as the owner's. No
//     other id is mapped: files of anyone else show as nobody and cannot
//     be chowned to. The mount is also nosuid and nodev.
//  3. It is attached at Target, a directory of the Runner's that no box can
//     write, which the backend binds (bwrap --bind-fd, Docker's bind).
//  4. The paths of HostCode are made read-only on top (a read-only clone of
//     each bound over itself). A path of HostCode that does not exist gets
//     an empty directory as its placeholder, owned by the owner, so that
//     the box cannot create it either; Unmount removes each placeholder it
//     made that is still empty.
//  5. A .git directory is covered by a git directory of the box's own, a
//     mount point the box can neither rename nor replace, in which only
//     what git keeps as data is the host's, writable, and the rest of the
//     host's is read-only (an allow list: see gitdir.go). The Runner
//     carries the few files git rewrites at the top (HEAD, the index,
//     packed-refs, ...) between the box's copies and the host's.
//
// A workspace owned by root (uid or gid 0) is refused: its files would
// show as the box user's and the box would write as root on the host.
// What the box's seccomp filter adds (internal/box/seccomp): no file it creates
// or changes can be setuid or setgid.
package wsmount

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"golang.org/x/sys/unix"
)

// HostCode lists the workspace paths, relative to its root, that code on
// the host runs or reads as commands later, with why; a box sees them
// read-only (docs/SECURITY.md has the same list). Order matters: .git
// comes before what is inside it.
var HostCode = []struct{ Path, Why string }{
	{".git", "the box gets a git directory of its own in its place, where only what git keeps as data reaches the host's (GitShared, GitSynced; see gitdir.go); read-only where it is a file (a worktree's or submodule's gitdir pointer), or where it is missing"},
	{".gitmodules", "submodule URLs and update settings the host's git follows"},
	{".vscode", "tasks that run on folder open, launch configurations, settings that name programs"},
	{".idea", "JetBrains run configurations and startup tasks"},
	{".devcontainer", "initializeCommand runs on the host when the folder opens in a dev container"},
	{".envrc", "direnv runs it in the owner's shell on cd"},
	{".paddock.toml", "paddock's project file: the next session's image, setup command, environment and egress (a changed one also needs paddock project allow)"},
}

// Options describe one workspace mount.
type Options struct {
	// Source is the workspace's path as resolved when its box was made.
	Source string
	// Target is the mount point: a directory only the Runner can write.
	Target string
	// State is a file where Mount records its placeholders for Unmount.
	State string
	// BoxUID and BoxGID are the host ids the box's user writes as.
	BoxUID, BoxGID int
	// Session names the box's session in what wsmount logs (optional).
	Session string
	// UnsafeHostCode leaves HostCode writable (the owner's explicit,
	// per-session choice); the idmap still applies.
	UnsafeHostCode bool
	// OwnerUID, when not 0, is the uid the workspace must belong to at
	// this mount: its owner's when the box was made (Check). A directory
	// that changed hands since (another one renamed into its path) is
	// refused, never mounted for its new owner. It is read from the
	// descriptor that is mounted, so no swap falls between check and mount.
	OwnerUID int
	// RootCreates: the box's file operations reach the mount as root, not
	// as BoxUID (gVisor's sentry creates a file as root, then chowns it to
	// the box user; root has no mapping in the idmap, so the create
	// fails with EOVERFLOW). The idmap then also maps root's view to
	// TransientUID and TransientGID on disk: the owner of a new file for
	// the moment between the sentry's create and its chown.
	RootCreates bool
}

// TransientUID and TransientGID are the on-disk ids a RootCreates mount
// gives root's view: ids no account has, on a file only between a gVisor
// sentry's create and its chown to the box user (the owner's, on disk).
const TransientUID, TransientGID = 2147483646, 2147483646

// state is what Mount leaves for Unmount.
type state struct {
	Source       string        `json:"source"`
	Placeholders []placeholder `json:"placeholders,omitempty"`
}

type placeholder struct {
	Path string `json:"path"`
	Ino  uint64 `json:"ino,omitempty"` // 0 until made
}

// Owner reports the owner of a workspace directory: the ids the box's
// user stands for through the idmap.
type Owner struct{ UID, GID int }

// SameOwner refuses a workspace at path whose owner own is not uid, the
// one it had when its session was made (0: none kept, nothing to check).
func SameOwner(path string, own Owner, uid int) error {
	if uid == 0 || own.UID == uid {
		return nil
	}
	return fmt.Errorf("workspace %s now belongs to uid %d, and belonged to uid %d when the session was made: paddock mounts a workspace only for the person it was made for; put their directory back at %s, or remove the session: %w",
		path, own.UID, uid, path, ErrChangedHands)
}

// ErrChangedHands is wrapped when a workspace belongs to someone other
// than it did when its box was made (Options.OwnerUID).
var ErrChangedHands = fmt.Errorf("the workspace changed hands: %w", errdefs.ErrForbidden)

// ErrRootOwned is wrapped when a workspace belongs to root.
var ErrRootOwned = errors.New("root-owned workspace")

// Check refuses, before anything is made, a workspace that Mount would
// refuse: not an absolute path to an existing directory, a symlink itself,
// owned by root, or on a filesystem (or kernel) without idmapped mounts. It
// returns the resolved path and the owner. Only root can probe the idmap;
// others get errdefs.ErrForbidden.
func Check(path string) (string, Owner, error) {
	if !filepath.IsAbs(path) {
		return "", Owner{}, fmt.Errorf("workspace %q must be an absolute path: %w", path, errdefs.ErrInvalid)
	}
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return "", Owner{}, fmt.Errorf("workspace %s does not exist (%v); give an existing directory: %w", path, errors.Unwrap(err), errdefs.ErrInvalid)
	case fi.Mode()&os.ModeSymlink != 0:
		return "", Owner{}, fmt.Errorf("workspace %s is a symlink; give the directory it points to: %w", path, errdefs.ErrInvalid)
	case !fi.IsDir():
		return "", Owner{}, fmt.Errorf("workspace %s is not a directory: %w", path, errdefs.ErrInvalid)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", Owner{}, fmt.Errorf("workspace %s: %v: %w", path, err, errdefs.ErrInvalid)
	}
	if os.Geteuid() != 0 {
		return "", Owner{}, ErrNotRoot
	}
	fd, err := sandbox.OpenWorkspace(real)
	if err != nil {
		return "", Owner{}, err
	}
	defer unix.Close(fd)
	own, err := ownerOf(fd, real)
	if err != nil {
		return "", Owner{}, err
	}
	// The probe: an idmapped clone, never attached, closed at once.
	ns, err := userns(own, 0, 0, false)
	if err != nil {
		return "", Owner{}, err
	}
	defer unix.Close(ns)
	tree, err := idmapped(fd, ns, real)
	if err != nil {
		return "", Owner{}, err
	}
	unix.Close(tree)
	return real, own, nil
}

// ErrNotRoot: only a root Runner makes idmapped mounts; docs/SECURITY.md
// says what a Runner that is not root can do instead.
var ErrNotRoot = fmt.Errorf("a host workspace needs a Runner running as root (it makes an idmapped mount so that what the box writes belongs to you); run `sudo paddock serve`, or leave out --workspace and use the session's own /workspace: %w", errdefs.ErrForbidden)

func ownerOf(fd int, path string) (Owner, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Owner{}, err
	}
	if st.Uid == 0 || st.Gid == 0 {
		return Owner{}, fmt.Errorf("workspace %s belongs to root (uid %d, gid %d); paddock never lets a box write as root on the host: give it to the user who works in it (sudo chown -R NAME: %s) or use a directory of yours: %w: %w",
			path, st.Uid, st.Gid, path, ErrRootOwned, errdefs.ErrForbidden)
	}
	return Owner{UID: int(st.Uid), GID: int(st.Gid)}, nil
}

// openSource is how Mount and MountOrigin begin: as root only, with what
// an earlier mount left at o.Target taken off, the workspace opened
// following no symlink and found to be still its owner's. The caller
// closes fd.
func openSource(o Options) (fd int, own Owner, err error) {
	if os.Geteuid() != 0 {
		return -1, Owner{}, ErrNotRoot
	}
	if err := Unmount(o.Target, o.State); err != nil {
		return -1, Owner{}, err
	}
	if fd, err = sandbox.OpenWorkspace(o.Source); err != nil {
		return -1, Owner{}, err
	}
	if own, err = ownerOf(fd, o.Source); err == nil {
		err = SameOwner(o.Source, own, o.OwnerUID)
	}
	if err != nil {
		unix.Close(fd)
		return -1, own, err
	}
	return fd, own, nil
}

// Mount makes the workspace view at o.Target (see the package comment).
// Anything an earlier Mount left at o.Target is taken off first. On error
// nothing stays mounted.
func Mount(o Options) (Owner, error) {
	fd, own, err := openSource(o)
	if err != nil {
		return own, err
	}
	defer unix.Close(fd)
	st := state{Source: o.Source}
	if !o.UnsafeHostCode {
		if err := withShared(o.Source, func(sh *shared) error {
			sh.Users = append(sh.Users, o.State)
			err := makePlaceholders(fd, own, o.State, &st)
			sh.Placeholders = union(sh.Placeholders, st.Placeholders)
			return err
		}); err != nil {
			_ = Unmount(o.Target, o.State)
			return own, err
		}
	}
	ns, err := userns(own, o.BoxUID, o.BoxGID, o.RootCreates)
	if err != nil {
		_ = Unmount(o.Target, o.State)
		return own, err
	}
	defer unix.Close(ns)
	tree, err := idmapped(fd, ns, o.Source)
	if err != nil {
		_ = Unmount(o.Target, o.State)
		return own, err
	}
	defer unix.Close(tree)
	if err := os.MkdirAll(o.Target, 0o700); err != nil {
		_ = Unmount(o.Target, o.State)
		return own, fmt.Errorf("workspace mount point: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, o.Target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		_ = Unmount(o.Target, o.State)
		return own, fmt.Errorf("attach the workspace mount at %s: %w", o.Target, err)
	}
	if !o.UnsafeHostCode {
		gitDir, err := protect(o.Target, st.Placeholders)
		if err == nil && gitDir {
			err = withRoot(o.Target, func(root int) error { return mountGitDir(root, o, own) })
		}
		if err != nil {
			_ = Unmount(o.Target, o.State)
			return own, err
		}
	}
	// What the box will see: the owner's files as the box user's.
	var fi unix.Stat_t
	if err := unix.Stat(o.Target, &fi); err != nil || int(fi.Uid) != o.BoxUID {
		_ = Unmount(o.Target, o.State)
		return own, fmt.Errorf("workspace mount of %s shows uid %d, not the box's %d: %v", o.Source, fi.Uid, o.BoxUID, err)
	}
	return own, nil
}

// MountVolume mounts the directory source, a volume of one box that no
// one else writes, at target through an idmap in which its owner on disk
// (uid and gid owner) is seen as box, and root's view is TransientUID and
// TransientGID on disk (as Options.RootCreates): the view a gVisor box,
// whose sentry and gofer are not the box's host uid, needs to write as its
// user. source is opened following no symlink. UnmountVolume takes it
// off; on error nothing stays mounted.
func MountVolume(source, target string, owner, box int) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	UnmountVolume(target)
	fd, err := sandbox.OpenWorkspace(source)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ns, err := userns(Owner{UID: owner, GID: owner}, box, box, true)
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	tree, err := idmapped(fd, ns, source)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return fmt.Errorf("volume mount point: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the volume mount at %s: %w", target, err)
	}
	return nil
}

// UnmountVolume takes off what MountVolume mounted at target, if anything.
func UnmountVolume(target string) {
	for i := 0; i < 8; i++ {
		if unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW) != nil {
			return
		}
	}
}

// MountOrigin makes at o.Target a read-only view of the git directory of
// the repository at o.Source (its .git, which must be a directory: a
// linked worktree's or a submodule's .git file is refused), idmapped as
// Mount's is, so the box's user reads it as its own. It is what a box's
// clone borrows its objects from (sandbox.CreateOptions.Clone): nothing in
// it is writable from the box, so no placeholder, protection or git
// directory of the box's own is needed. o.UnsafeHostCode is ignored.
// Unmount takes it off. On error nothing stays mounted.
func MountOrigin(o Options) (Owner, error) {
	fd, own, err := openSource(o)
	if err != nil {
		return own, err
	}
	defer unix.Close(fd)
	git, err := OpenGitDir(fd, o.Source)
	if err != nil {
		return own, err
	}
	defer unix.Close(git)
	ns, err := userns(own, o.BoxUID, o.BoxGID, o.RootCreates)
	if err != nil {
		return own, err
	}
	defer unix.Close(ns)
	tree, err := idmapped(git, ns, o.Source)
	if err != nil {
		return own, err
	}
	defer unix.Close(tree)
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &ro); err != nil {
		return own, fmt.Errorf("repository %s: make its view read-only: %w", o.Source, err)
	}
	if err := os.MkdirAll(o.Target, 0o700); err != nil {
		return own, fmt.Errorf("repository mount point: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, o.Target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return own, fmt.Errorf("attach the repository's view at %s: %w", o.Target, err)
	}
	var fi unix.Stat_t
	if err := unix.Stat(o.Target, &fi); err != nil || int(fi.Uid) != o.BoxUID {
		_ = Unmount(o.Target, o.State)
		return own, fmt.Errorf("repository view of %s shows uid %d, not the box's %d (is %s/.git someone else's, made with sudo git? chown -R %d: %s/.git): %v",
			o.Source, fi.Uid, o.BoxUID, o.Source, own.UID, o.Source, err)
	}
	if err := blankConfig(o.Target, o.State, o.BoxUID, o.BoxGID); err != nil {
		_ = Unmount(o.Target, o.State)
		return own, err
	}
	return own, nil
}

// originConfig is the config a box reads in its view of a repository,
// in place of the repository's own, which may hold credentials (a token
// in a remote's URL, an http.extraHeader) and names nothing a clone
// needs: the clone borrows objects, which git finds without any config.
const originConfig = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"

// blankConfig binds a file of originConfig, read-only, over the config
// of the repository's view at target; the file lives beside state (the
// Runner's, out of every box's reach), owned by the box's user as the
// rest of the view shows. Unmount takes it off with the view.
func blankConfig(target, state string, uid, gid int) error {
	f := state + ".origin-config"
	if err := os.WriteFile(f, []byte(originConfig), 0o644); err != nil {
		return fmt.Errorf("the repository view's config: %w", err)
	}
	if err := os.Lchown(f, uid, gid); err != nil {
		return fmt.Errorf("the repository view's config: %w", err)
	}
	src, err := unix.OpenTree(unix.AT_FDCWD, f, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("the repository view's config: %w", err)
	}
	defer unix.Close(src)
	if err := unix.MountSetattr(src, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return fmt.Errorf("the repository view's config: %w", err)
	}
	dst, err := openBeneathPath(target, "config")
	if err != nil {
		return nil // a repository with no config: nothing to hide
	}
	defer unix.Close(dst)
	if err := unix.MoveMount(src, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("hide the repository's config from the box: %w", err)
	}
	return nil
}

// openBeneathPath is openBeneath from a directory's path.
func openBeneathPath(dir, rel string) (int, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(d)
	return openBeneath(d, rel)
}

// CheckOrigin refuses, before anything is made, a repository that
// MountOrigin would: no .git directory (a linked worktree's or a
// submodule's .git file, a symlink), or one whose objects are kept in
// another repository too (objects/info/alternates names host paths the
// box cannot see, so its clone would miss objects).
func CheckOrigin(path string) error {
	fd, err := sandbox.OpenWorkspace(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	git, err := OpenGitDir(fd, path)
	if err != nil {
		return err
	}
	defer unix.Close(git)
	alt, err := unix.Openat2(git, "objects/info/alternates", &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil // none: the usual case
	}
	defer unix.Close(alt)
	var st unix.Stat_t
	if unix.Fstat(alt, &st) == nil && st.Size == 0 {
		return nil
	}
	return fmt.Errorf("%s keeps some of its objects in another repository (.git/objects/info/alternates), which a box cannot see; "+
		"make it self-contained first (git -C %s repack -a -d, then remove that file), or leave out --clone: %w", path, path, errdefs.ErrInvalid)
}

// OpenGitDir opens the git directory of the repository whose worktree is
// the directory ws (named path in errors), following no symlink: an
// O_PATH descriptor of <ws>/.git, which must be a directory.
func OpenGitDir(ws int, path string) (int, error) {
	git, err := openBeneath(ws, ".git")
	if errors.Is(err, unix.ENOENT) {
		return -1, fmt.Errorf("%s is not a git repository (no .git in it): a clone session needs one; run git init there, or leave out --clone: %w", path, errdefs.ErrInvalid)
	}
	if err != nil {
		return -1, fmt.Errorf("%s/.git: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(git, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(git)
		return -1, fmt.Errorf("%s/.git is not a directory (a linked worktree's or a submodule's pointer, or a symlink): a clone session needs the repository's main worktree; give its path: %w", path, errdefs.ErrInvalid)
	}
	return git, nil
}

// userns returns a descriptor of a new user namespace whose one mapping
// is own's uid → uid and own's gid → gid: the idmap of the mount (with
// root, TransientUID → 0 and TransientGID → 0 as well: see
// Options.RootCreates). It is held by a short-lived helper process (a
// namespace lives while something refers to it; the descriptor does).
func userns(own Owner, uid, gid int, root bool) (int, error) {
	if uid == 0 {
		uid = own.UID + 1 // the probe: any id but the owner's own works
	}
	if gid == 0 {
		gid = own.GID + 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer r.Close()
	defer w.Close()
	cat, err := exec.LookPath("cat")
	if err != nil {
		cat = "/bin/cat"
	}
	cmd := exec.Command(cat)
	cmd.Stdin = r
	uids := []syscall.SysProcIDMap{{ContainerID: own.UID, HostID: uid, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: own.GID, HostID: gid, Size: 1}}
	if root {
		uids = append(uids, syscall.SysProcIDMap{ContainerID: TransientUID, HostID: 0, Size: 1})
		gids = append(gids, syscall.SysProcIDMap{ContainerID: TransientGID, HostID: 0, Size: 1})
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: uids, GidMappings: gids}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("idmapped workspace: make its user namespace: %w", err)
	}
	defer func() { w.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ns, err := unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("idmapped workspace: open its user namespace: %w", err)
	}
	return ns, nil
}

// idmapped returns a detached clone of the directory fd with the idmap of
// the user namespace ns, nosuid and nodev. A filesystem or kernel that
// refuses is a clear error with the ways out.
func idmapped(fd, ns int, path string) (int, error) {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("workspace %s: clone its mount (open_tree needs Linux 5.2): %w: %w", path, err, errdefs.ErrUnavailable)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		fs := "its filesystem"
		if t := fsType(fd); t != "" {
			fs = "its filesystem (" + t + ")"
		}
		return -1, fmt.Errorf("workspace %s: %s or this kernel refuses an idmapped mount (%v), so the box could not write it as you; "+
			"put the workspace on ext4, xfs, btrfs or tmpfs (Linux ≥ 5.12; 6.x for more), or leave out --workspace and copy your files in and out with `paddock exec`: %w",
			path, fs, err, errdefs.ErrUnavailable)
	}
	return tree, nil
}

// openBeneath opens rel under dir as an O_PATH descriptor, following no
// symlink on the way or at the end (a symlink at the end is opened itself).
func openBeneath(dir int, rel string) (int, error) {
	return unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// makePlaceholders makes an empty directory, owned by the owner, at every
// path of HostCode that is missing and whose parent is a directory (so not
// inside a missing .git: the read-only placeholder .git covers it). All of
// them are recorded in the state file before any is made, and again with
// their inodes once made: two writes, whatever their number.
func makePlaceholders(ws int, own Owner, stateFile string, st *state) error {
	save := func() error {
		b, _ := json.Marshal(st)
		return atomicfile.WriteNoSync(stateFile, b, 0o600)
	}
	first := len(st.Placeholders)
	paths := []string{".git/objects/info"} // the box's own objects/info is bound there
	for _, h := range HostCode {
		paths = append(paths, h.Path)
	}
	for _, path := range paths {
		fd, err := openBeneath(ws, path)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			continue // a symlink on the way: protect refuses it with the reason
		}
		if parent := filepath.Dir(path); parent != "." {
			pfd, err := openBeneath(ws, parent)
			if err != nil {
				continue // no parent (.git missing): its own placeholder covers it
			}
			var pst unix.Stat_t
			err = unix.Fstat(pfd, &pst)
			unix.Close(pfd)
			if err != nil || pst.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
		}
		st.Placeholders = append(st.Placeholders, placeholder{Path: path})
	}
	if err := save(); err != nil {
		return err
	}
	if len(st.Placeholders) == first {
		return nil
	}
	for i := first; i < len(st.Placeholders); i++ {
		ino, err := mkPlaceholder(ws, st.Placeholders[i].Path, own)
		if err != nil {
			_ = save()
			return err
		}
		st.Placeholders[i].Ino = ino
	}
	return save()
}

// mkPlaceholder makes the empty directory rel (its parent reached without
// following a symlink), owned by own, and returns its inode.
func mkPlaceholder(ws int, rel string, own Owner) (uint64, error) {
	pfd := ws
	if parent := filepath.Dir(rel); parent != "." {
		var err error
		if pfd, err = openBeneath(ws, parent); err != nil {
			return 0, fmt.Errorf("workspace: placeholder %s: %w", rel, err)
		}
		defer unix.Close(pfd)
	}
	name := filepath.Base(rel)
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil {
		return 0, fmt.Errorf("workspace: make the read-only placeholder %s: %w", rel, err)
	}
	if err := unix.Fchownat(pfd, name, own.UID, own.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, fmt.Errorf("workspace: placeholder %s: %w", rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// protect binds HostCode read-only over itself under the mounted
// workspace at target, except a real .git directory, which mountGitDir
// covers with the box's own; it reports whether there is one. A symlink
// at one of those paths is refused: a mount cannot cover it, and the box
// could replace it.
func protect(target string, placeholders []placeholder) (gitDir bool, err error) {
	made := map[string]bool{}
	for _, p := range placeholders {
		made[p.Path] = true
	}
	root, err := sandbox.OpenNoFollow(unix.AT_FDCWD, target)
	if err != nil {
		return false, err
	}
	defer unix.Close(root)
	for _, h := range HostCode {
		fd, err := openBeneath(root, h.Path)
		if errors.Is(err, unix.ENOENT) {
			continue // inside a .git that is a file, or a placeholder could not be made
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return false, fmt.Errorf("workspace: %s goes through a symlink; paddock cannot keep it read-only in the box: replace the link with the file or directory, or start the session with --unsafe-host-code: %w", h.Path, errdefs.ErrConflict)
		}
		if err != nil {
			return false, fmt.Errorf("workspace: %s: %w", h.Path, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = fmt.Errorf("workspace: %s is a symlink; paddock cannot keep it read-only in the box: replace the link with what it points to, or start the session with --unsafe-host-code: %w", h.Path, errdefs.ErrConflict)
		}
		if err == nil && h.Path == ".git" && st.Mode&unix.S_IFMT == unix.S_IFDIR && !made[h.Path] {
			gitDir = true // covered by mountGitDir
		} else if err == nil {
			err = bindOver(fd, true, h.Path)
		}
		unix.Close(fd)
		if err != nil {
			return false, err
		}
	}
	return gitDir, nil
}

// withRoot runs f with a descriptor of the mounted workspace at target.
func withRoot(target string, f func(root int) error) error {
	root, err := sandbox.OpenNoFollow(unix.AT_FDCWD, target)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	return f(root)
}

// bindOver mounts a clone of what fd names over itself, read-only if asked.
func bindOver(fd int, readOnly bool, rel string) error {
	clone, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("workspace: clone %s: %w", rel, err)
	}
	defer unix.Close(clone)
	if readOnly {
		if err := unix.MountSetattr(clone, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("workspace: make %s read-only: %w", rel, err)
		}
	}
	if err := unix.MoveMount(clone, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("workspace: bind %s over itself: %w", rel, err)
	}
	return nil
}

// Unmount takes the workspace view off target (all of it: the protections
// on top go with it) and removes the placeholders Mount recorded in
// stateFile that are still the empty directories it made. Nothing mounted
// and no state file is not an error.
func Unmount(target, stateFile string) error {
	for i := 0; i < 64; i++ {
		if err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			break
		}
	}
	_ = os.Remove(stateFile + ".origin-config") // MountOrigin's (blankConfig)
	// The box's git directory: its files carried to the host a last
	// time, then removed.
	if err := finishGit(gitDirOf(stateFile)); err != nil {
		return err
	}
	b, err := os.ReadFile(stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st state
	if json.Unmarshal(b, &st) != nil || st.Source == "" {
		return os.Remove(stateFile)
	}
	// The placeholders go with the last box that uses the workspace:
	// removing one under another running box would lift its protection
	// there (a directory removed on the host is unmounted everywhere).
	err = withShared(st.Source, func(sh *shared) error {
		sh.Users = slices.DeleteFunc(sh.Users, func(u string) bool { return u == stateFile })
		sh.Placeholders = union(sh.Placeholders, st.Placeholders)
		if len(sh.Users) > 0 {
			return nil
		}
		if fd, err := sandbox.OpenWorkspace(st.Source); err == nil {
			for i := len(sh.Placeholders) - 1; i >= 0; i-- { // .git's inner ones first
				removePlaceholder(fd, sh.Placeholders[i])
			}
			unix.Close(fd)
		}
		sh.Placeholders = nil
		return nil
	})
	if err != nil {
		return err
	}
	return os.Remove(stateFile)
}

// SharedDir keeps, per host workspace, which boxes use its placeholders
// (one file per workspace, locked while read and written): every Runner
// on the host shares it, since two sessions, of one Runner or two, may
// bind the same workspace. It lives as long as the mounts do (a tmpfs).
var SharedDir = "/run/paddock-wsmount"

// shared is the record of one workspace in SharedDir.
type shared struct {
	Users        []string      `json:"users"` // the state files of the boxes that use it
	Placeholders []placeholder `json:"placeholders,omitempty"`
}

// withShared runs f on the workspace's shared record under its lock, and
// saves it (or removes it when nothing is left). Users whose state file is
// gone (a box removed while its Runner was down, a test's) are dropped.
func withShared(source string, f func(*shared) error) error {
	if err := os.MkdirAll(SharedDir, 0o700); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	sum := sha256.Sum256([]byte(source))
	base := filepath.Join(SharedDir, hex.EncodeToString(sum[:16]))
	lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("workspace: lock %s: %w", base, err)
	}
	var sh shared
	if b, err := os.ReadFile(base + ".json"); err == nil {
		_ = json.Unmarshal(b, &sh) // a damaged record counts no user
	}
	sh.Users = slices.DeleteFunc(sh.Users, func(u string) bool {
		_, err := os.Stat(u)
		return err != nil
	})
	ferr := f(&sh)
	if len(sh.Users) == 0 && len(sh.Placeholders) == 0 {
		if err := os.Remove(base + ".json"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return ferr
	}
	b, _ := json.Marshal(sh)
	if err := atomicfile.WriteNoSync(base+".json", b, 0o600); err != nil {
		return err
	}
	return ferr
}

// union is a with the placeholders of b it lacks (by path).
func union(a, b []placeholder) []placeholder {
	for _, p := range b {
		if !slices.ContainsFunc(a, func(q placeholder) bool { return q.Path == p.Path }) {
			a = append(a, p)
		}
	}
	return a
}

// removePlaceholder removes p if it is still the directory Mount made
// (same inode) and empty; otherwise (the owner put something there since)
// it stays.
func removePlaceholder(ws int, p placeholder) {
	parent, name := filepath.Split(p.Path)
	pfd := ws
	if parent != "" {
		var err error
		if pfd, err = openBeneath(ws, strings.TrimSuffix(parent, "/")); err != nil {
			return
		}
		defer unix.Close(pfd)
	}
	var st unix.Stat_t
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return
	}
	if p.Ino != 0 && st.Ino != p.Ino {
		return
	}
	_ = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) // fails, and keeps it, if not empty
}

// fsType names the filesystem type of the mount fd is on, as
// /proc/self/mountinfo says it ("ext4", "nfs4", "fuse.sshfs"), or "".
func fsType(fd int) string {
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return ""
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	id := strconv.FormatUint(stx.Mnt_id, 10) + " "
	for _, l := range strings.Split(string(mi), "\n") {
		if !strings.HasPrefix(l, id) {
			continue
		}
		// ... optional fields - FSTYPE SOURCE OPTIONS
		if _, after, ok := strings.Cut(l, " - "); ok {
			if f := strings.Fields(after); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}
