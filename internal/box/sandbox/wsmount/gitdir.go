package wsmount

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"golang.org/x/sys/unix"
)

// The workspace's git directory, as the box sees it.
//
// Git reads commands from its git directory (config's core.fsmonitor,
// hooks/*, a commondir that points at another config, ...), and new ways
// to do so come with new git versions, so no list of what to refuse can be
// complete. The box is therefore given an allow list instead: its .git is
// a directory of its own (the box's git directory, kept by the Runner
// beside the mount's state, never inside the workspace) in which
//
//   - GitShared, the directories git keeps data in (objects, refs, lfs),
//     are the host's own, bound writable (through the idmap: what the box
//     writes there is the owner's), except objects/info, which can name
//     other object stores (alternates) and is the box's own;
//   - GitPrivate, the reflogs (logs), start empty and are the box's own:
//     the host's git appends to a reflog following symlinks, with ref
//     names the box chooses in the line, so a reflog the box could plant
//     a link in would let it write a line of its choosing into any file
//     of the owner's (a shell's rc file);
//   - GitSynced, the files at the top that git rewrites as it works
//     (HEAD, index, packed-refs, ORIG_HEAD, ...), are the box's own
//     copies, and the Runner carries each change across, both ways
//     (syncGit): from the box to the host only those names, only regular
//     files, only what parses as what git would write there (an index that
//     would make the owner's git look away from a file is kept back);
//   - GitSession, the linked worktrees' administrative directories
//     (worktrees), is a directory of the session's, kept beside the
//     mount's state across the box's restarts and removed with the box;
//     the host's is not in the box at all, and nothing of the session's
//     ever reaches the host: the owner's git in the main worktree reads
//     worktrees/<id>/ too, and what it finds there can make it delete a
//     directory (gc of an entry that is a symlink), write a .git file
//     anywhere (worktree repair of a gitdir), append to any file (a
//     reflog that is a symlink) or run a program (worktree remove runs
//     git status with the entry's commondir and config.worktree); see
//     docs/SECURITY.md, "What a linked worktree can carry". A linked
//     worktree the box makes works in the box (git worktree add, Claude
//     Code's --worktree); its commits reach the host as branches, in
//     refs/ and objects/, as every other commit does;
//   - everything else the host's git directory holds (config, hooks, info,
//     modules, description, ...) is the host's, bound read-only.
//
// Whatever else the box makes in its .git (a commondir, a config of its
// own, hooks, a rebase's todo list) stays in the box's directory, which
// the host's git never reads. The box cannot rename or remove its .git:
// it is a mount point.

// GitShared lists the directories of a git directory that git keeps data
// in, bound writable from the host's.
var GitShared = []string{"objects", "refs", "lfs"}

// GitPrivate lists the directories of a git directory that the box's git
// writes and the host's must never read from the box: the box gets them
// empty, of its own (see the list above).
var GitPrivate = []string{"logs"}

// GitSession lists the directories of a git directory that are the
// session's own, kept across the box's restarts, never the host's (see
// the list above).
var GitSession = []string{"worktrees"}

// worktreesOf is where the session's .git/worktrees is kept for the
// mount whose state file is state.
func worktreesOf(state string) string { return strings.TrimSuffix(state, ".json") + ".worktrees" }

// Forget removes what a mount keeps for its session across the box's
// restarts (its .git/worktrees), when the box goes for good. It never
// follows a symlink or leaves the file system.
func Forget(state string) error { return removeTree(worktreesOf(state)) }

// GitSynced lists the files at the top of a git directory that git
// rewrites as it works, each only data, carried between the box's copy
// and the host's (see syncGit).
var GitSynced = []string{"HEAD", "index", "packed-refs", "ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG",
	"MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD"}

// maxSynced caps the size of a file carried across (an index of a very
// large repository is tens of MiB).
const maxSynced = 256 << 20

// SyncInterval is how often a mounted workspace's git files are carried
// across while its box runs (and once more at Unmount).
var SyncInterval = time.Second

var logger atomic.Pointer[slog.Logger]

// SetLogger sets where wsmount says what it kept from the host's git
// directory, and why (the Runner's log). Without it nothing is said.
func SetLogger(l *slog.Logger) { logger.Store(l) }

func logf() *slog.Logger {
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// gitDirOf is where the box's own git directory is kept for the mount
// whose state file is state: beside it, in a directory of the Runner's.
func gitDirOf(state string) string { return strings.TrimSuffix(state, ".json") + ".git" }

// gitBox is the state of one box's git directory, kept (root's, 0600) in
// <gitDirOf>/sync.json so a final sync after a restarted Runner still
// knows what each file was when last carried.
type gitBox struct {
	Source  string `json:"source"`
	Session string `json:"session,omitempty"`
	Owner   Owner  `json:"owner"`
	BoxUID  int    `json:"box_uid"`
	BoxGID  int    `json:"box_gid"`
	// Base is each synced file's content when both sides last agreed, as
	// a hash ("" for absent).
	Base map[string]string `json:"base"`
	// Kept is the box's version of a file last kept back (its hash), so
	// it is said once, not every round.
	Kept map[string]string `json:"kept,omitempty"`
	// IndexEntries is indexEntries of the index in Base: what its entries
	// say, without the stat data a refresh rewrites.
	IndexEntries string `json:"index_entries,omitempty"`
}

// mountGitDir gives the box its own git directory over <target>/.git (see
// the comment at the top of this file). g is the host's .git under the
// mounted (idmapped) workspace, a directory. dir is gitDirOf the mount.
func mountGitDir(root int, o Options, own Owner) error {
	dir := gitDirOf(o.State)
	if err := removeTree(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("workspace: the box's git directory: %w", err)
	}
	boxRoot, objInfo := filepath.Join(dir, "root"), filepath.Join(dir, "objects-info")
	for _, d := range []string{boxRoot, objInfo} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("workspace: the box's git directory: %w", err)
		}
		if err := os.Lchown(d, o.BoxUID, o.BoxGID); err != nil {
			return fmt.Errorf("workspace: the box's git directory: %w", err)
		}
	}
	g, err := openBeneath(root, ".git")
	if err != nil {
		return fmt.Errorf("workspace: .git: %w", err)
	}
	defer unix.Close(g)
	names, err := readDirNames(g)
	if err != nil {
		return fmt.Errorf("workspace: read .git: %w", err)
	}
	// Every entry of the host's .git, cloned before the box's directory
	// covers it: writable for GitShared, read-only for the rest.
	type bind struct {
		name  string
		clone int
	}
	var binds []bind
	defer func() {
		for _, b := range binds {
			unix.Close(b.clone)
		}
	}()
	st := gitBox{Source: o.Source, Session: o.Session, Owner: own, BoxUID: o.BoxUID, BoxGID: o.BoxGID, Base: map[string]string{}}
	for _, name := range names {
		var fi unix.Stat_t
		if err := unix.Fstatat(g, name, &fi, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("workspace: .git/%s: %w", name, err)
		}
		kind := fi.Mode & unix.S_IFMT
		switch {
		case kind == unix.S_IFREG && slices.Contains(GitSynced, name):
			continue // copied below
		case kind == unix.S_IFLNK:
			// A link in the host's .git: the box gets the same link in its
			// own directory, which the host never reads.
			target, err := readlinkat(g, name)
			if err != nil {
				return fmt.Errorf("workspace: .git/%s: %w", name, err)
			}
			if err := unix.Symlinkat(target, -1, filepath.Join(boxRoot, name)); err != nil {
				return fmt.Errorf("workspace: .git/%s: %w", name, err)
			}
			_ = unix.Fchownat(unix.AT_FDCWD, filepath.Join(boxRoot, name), o.BoxUID, o.BoxGID, unix.AT_SYMLINK_NOFOLLOW)
			continue
		case kind != unix.S_IFREG && kind != unix.S_IFDIR:
			continue // a socket or fifo: nothing the box needs
		case slices.Contains(GitPrivate, name) || slices.Contains(GitSession, name):
			continue // the box's or the session's own, made below
		}
		fd, err := openBeneath(g, name)
		if err != nil {
			return fmt.Errorf("workspace: .git/%s: %w", name, err)
		}
		clone, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("workspace: clone .git/%s: %w", name, err)
		}
		binds = append(binds, bind{name, clone})
		if !(kind == unix.S_IFDIR && slices.Contains(GitShared, name)) {
			if err := unix.MountSetattr(clone, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("workspace: make .git/%s read-only: %w", name, err)
			}
		}
		// Its mount point in the box's directory.
		p := filepath.Join(boxRoot, name)
		if kind == unix.S_IFDIR {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err == nil {
			err = os.Lchown(p, o.BoxUID, o.BoxGID)
		}
		if err != nil {
			return fmt.Errorf("workspace: .git/%s: %w", name, err)
		}
	}
	for _, name := range GitPrivate {
		p := filepath.Join(boxRoot, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("workspace: the box's .git/%s: %w", name, err)
		}
		if err := os.Lchown(p, o.BoxUID, o.BoxGID); err != nil {
			return fmt.Errorf("workspace: the box's .git/%s: %w", name, err)
		}
	}
	// The session's own, kept from the box's last run (made at the first).
	for _, name := range GitSession {
		keep := worktreesOf(o.State)
		if err := os.Mkdir(keep, 0o755); err == nil {
			err = os.Lchown(keep, o.BoxUID, o.BoxGID)
			if err != nil {
				return fmt.Errorf("workspace: the session's .git/%s: %w", name, err)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("workspace: the session's .git/%s: %w", name, err)
		}
		clone, err := unix.OpenTree(unix.AT_FDCWD, keep, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("workspace: the session's .git/%s: %w", name, err)
		}
		binds = append(binds, bind{name, clone})
		p := filepath.Join(boxRoot, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("workspace: the box's .git/%s: %w", name, err)
		}
		if err := os.Lchown(p, o.BoxUID, o.BoxGID); err != nil {
			return fmt.Errorf("workspace: the box's .git/%s: %w", name, err)
		}
	}
	// The synced files: the host's, copied.
	hostGit, err := hostGitDir(o.Source)
	if err != nil {
		return err
	}
	defer unix.Close(hostGit)
	rootFD, err := unix.Open(boxRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootFD)
	for _, name := range GitSynced {
		data, _, err := readRegular(hostGit, name)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotRegular) {
			st.Base[name] = ""
			continue
		}
		if err != nil {
			return fmt.Errorf("workspace: .git/%s: %w", name, err)
		}
		if err := writeLocked(rootFD, name, data, 0o644, o.BoxUID, o.BoxGID); err != nil {
			return fmt.Errorf("workspace: copy .git/%s for the box: %w", name, err)
		}
		st.Base[name] = sum(data)
		if name == "index" {
			st.IndexEntries = indexEntries(data)
		}
	}
	if err := saveGitBox(dir, &st); err != nil {
		return err
	}
	// objects/info: the box's own, with the host's alternates (where the
	// host's objects are also kept) so its git finds every object.
	for _, name := range []string{"alternates", "http-alternates"} {
		if data, _, err := readRegular(hostGit, filepath.Join("objects", "info", name)); err == nil {
			p := filepath.Join(objInfo, name)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
			_ = os.Lchown(p, o.BoxUID, o.BoxGID)
		}
	}

	// Cover the host's .git with the box's directory (private: nothing
	// mounted on it shows anywhere else), then put each clone in place.
	cover, err := unix.OpenTree(unix.AT_FDCWD, boxRoot, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("workspace: clone the box's git directory: %w", err)
	}
	defer unix.Close(cover)
	if err := unix.MountSetattr(cover, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Propagation: unix.MS_PRIVATE}); err != nil {
		return fmt.Errorf("workspace: the box's git directory: %w", err)
	}
	if err := unix.MoveMount(cover, "", g, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("workspace: put the box's git directory over .git: %w", err)
	}
	for _, b := range binds {
		if err := moveOnto(root, ".git/"+b.name, b.clone); err != nil {
			return err
		}
	}
	if fd, err := openBeneath(root, ".git/objects/info"); err == nil {
		unix.Close(fd)
		info, err := unix.OpenTree(unix.AT_FDCWD, objInfo, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("workspace: clone objects/info: %w", err)
		}
		err = moveOnto(root, ".git/objects/info", info)
		unix.Close(info)
		if err != nil {
			return err
		}
	} else if _, err := openBeneath(root, ".git/objects"); err == nil {
		// makePlaceholders made objects/info wherever objects is a
		// directory: without it the box could write alternates.
		return fmt.Errorf("workspace: .git/objects/info is missing and could not be made: %w", errdefs.ErrConflict)
	}
	startSync(dir)
	return nil
}

// moveOnto attaches the detached mount clone at rel under root, reached
// with no symlink followed.
func moveOnto(root int, rel string, clone int) error {
	fd, err := openBeneath(root, rel)
	if err != nil {
		return fmt.Errorf("workspace: %s: %w", rel, err)
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(clone, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("workspace: bind %s in the box's git directory: %w", rel, err)
	}
	return nil
}

// hostGitDir opens the host's <source>/.git, the real one (not through
// any mount of paddock's), walked with no symlink followed.
func hostGitDir(source string) (int, error) {
	ws, err := sandbox.OpenWorkspace(source)
	if err != nil {
		return -1, err
	}
	defer unix.Close(ws)
	g, err := openBeneath(ws, ".git")
	if err != nil {
		return -1, fmt.Errorf("workspace %s: .git: %w", source, err)
	}
	return g, nil
}

var errNotRegular = errors.New("not a regular file")

// readRegular reads rel under dir, a regular file reached with no symlink
// followed, of at most maxSynced bytes. It returns its mode bits too.
func readRegular(dir int, rel string) ([]byte, uint32, error) {
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, 0, os.ErrNotExist
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EXDEV) {
		return nil, 0, errNotRegular
	}
	if err != nil {
		return nil, 0, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, errNotRegular
	}
	if fi.Size() > maxSynced {
		return nil, 0, fmt.Errorf("%s: %d bytes, more than %d: %w", rel, fi.Size(), maxSynced, errdefs.ErrLimit)
	}
	data := make([]byte, 0, fi.Size()+512)
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, 4096)
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if len(data) > maxSynced {
			return nil, 0, fmt.Errorf("%s grew past %d bytes: %w", rel, maxSynced, errdefs.ErrLimit)
		}
		if err != nil {
			break
		}
	}
	return data, uint32(fi.Mode().Perm()), nil
}

// writeLocked replaces name in dir with data the way git does: name.lock
// made exclusively (so a git at work there, which holds that lock, is
// never overwritten: the call fails with EEXIST and is tried next round),
// owned by uid:gid, then renamed over name. data nil with remove set
// removes name instead (removeLocked).
func writeLocked(dir int, name string, data []byte, perm uint32, uid, gid int) error {
	lock := name + ".lock"
	fd, err := unix.Openat(dir, lock, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), lock)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		err = f.Chmod(os.FileMode(perm))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, lock, dir, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, lock, 0)
	}
	return err
}

// removeLocked removes the regular file name in dir under git's lock.
func removeLocked(dir int, name string) error {
	lock := name + ".lock"
	fd, err := unix.Openat(dir, lock, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	unix.Close(fd)
	defer unix.Unlinkat(dir, lock, 0)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errNotRegular
	}
	return unix.Unlinkat(dir, name, 0)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h[:])
}

func readDirNames(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".git")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func saveGitBox(dir string, st *gitBox) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return atomicfile.WriteNoSync(filepath.Join(dir, "sync.json"), b, 0o600)
}

func loadGitBox(dir string) (*gitBox, error) {
	b, err := os.ReadFile(filepath.Join(dir, "sync.json"))
	if err != nil {
		return nil, err
	}
	var st gitBox
	if err := json.Unmarshal(b, &st); err != nil || st.Source == "" {
		return nil, fmt.Errorf("workspace: %s/sync.json is damaged: %w", dir, errdefs.ErrInvalid)
	}
	if st.Base == nil {
		st.Base = map[string]string{}
	}
	return &st, nil
}

// removeTree removes dir and everything in it, never leaving its
// filesystem (a mount under it is skipped, and then dir stays) and never
// following a symlink.
func removeTree(dir string) error {
	parent, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	return removeAt(parent, filepath.Base(dir))
}

func removeAt(parent int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(parent, name, 0)
	}
	fd, err := unix.Openat2(parent, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("workspace: %s is a mount point; left in place: %w", name, errdefs.ErrConflict)
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	var first error
	for _, n := range names {
		if err := removeAt(fd, n); err != nil && first == nil {
			first = err
		}
	}
	f.Close()
	if first != nil {
		return first
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}
