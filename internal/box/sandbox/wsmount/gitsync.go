package wsmount

// gitsync.go: the sync of the box's .git files to the host's, and the
// checks each passes first.

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/box/gitindex"
	"golang.org/x/sys/unix"
)

// syncers are the running sync loops of this process, by git directory.
var syncers struct {
	sync.Mutex
	m map[string]*syncer
}

type syncer struct {
	mu   sync.Mutex // one round at a time, loop or final
	stop chan struct{}
	done chan struct{}
	// last is what both sides' synced files looked like (statKeys) after
	// the last round: a round that finds the same does nothing more.
	last string
}

func syncerOf(dir string) *syncer {
	syncers.Lock()
	defer syncers.Unlock()
	if syncers.m == nil {
		syncers.m = map[string]*syncer{}
	}
	s := syncers.m[dir]
	if s == nil {
		s = &syncer{}
		syncers.m[dir] = s
	}
	return s
}

// startSync carries the git files of dir across every SyncInterval until
// stopSync.
func startSync(dir string) {
	s := syncerOf(dir)
	s.mu.Lock()
	if s.stop != nil {
		s.mu.Unlock()
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(SyncInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.mu.Lock()
				err := s.syncLocked(dir)
				gone := errors.Is(err, os.ErrNotExist)
				if gone && s.done == done {
					s.stop, s.done = nil, nil // the directory went with its box
				}
				s.mu.Unlock()
				if gone {
					return
				}
			}
		}
	}()
}

// Resume carries the git files of the box whose mount has the state file
// state across every SyncInterval again, if that mount has a git directory
// of the box's and no loop runs for it in this process: a Runner that
// restarted and found the box running calls it (through the backend's
// Inspect). Calling it again is nothing.
func Resume(state string) {
	dir := gitDirOf(state)
	if _, err := os.Lstat(filepath.Join(dir, "sync.json")); err == nil {
		startSync(dir)
	}
}

// finishGit stops dir's loop, carries the files across once more and
// removes the box's git directory. A dir that does not exist is nothing.
func finishGit(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	s := syncerOf(dir)
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	s.mu.Lock()
	err := s.syncLocked(dir)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		logf().Warn("workspace git: the last carry to the host failed; the box's copies are removed, the host keeps its own", "dir", dir, "err", err)
	}
	syncers.Lock()
	delete(syncers.m, dir)
	syncers.Unlock()
	// What is left of the box's directory is the box's own making: a
	// failure to remove it never fails the box's stop (the next Mount, or
	// the box's removal, tries again).
	if err := removeTree(dir); err != nil {
		logf().Warn("workspace git: the box's git directory could not be removed", "dir", dir, "err", err)
	}
	return nil
}

// SyncGit carries the git files of the box whose mount has the state file
// state across now (for tests, and for callers that need the host's view
// current at once). No box git directory is no error.
func SyncGit(state string) error {
	dir := gitDirOf(state)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	s := syncerOf(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLocked(dir)
}

// syncLocked is one round for every GitSynced name: three ways, from
// what both sides last agreed on (Base).
//
//   - changed in the box only: the box's copy goes to the host, if it is
//     a regular file that passes checkSynced; else it is kept back (said
//     once) and the host's stays;
//   - changed on the host only: the host's goes to the box;
//   - changed on both, differently: the host's wins (it is the owner's).
//
// A lock held on either side (a git at work) puts the name off to the
// next round.
func (s *syncer) syncLocked(dir string) error {
	st, err := loadGitBox(dir)
	if err != nil {
		return err
	}
	hostGit, err := hostGitDir(st.Source)
	if err != nil {
		return err
	}
	defer unix.Close(hostGit)
	box, err := unix.Open(filepath.Join(dir, "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(box)
	// Most rounds find nothing changed: a stat of each file tells, without
	// reading (and hashing) an index of many MiB every second.
	keys := statKeys(hostGit, box)
	if keys == s.last {
		return nil
	}
	pending := false // a name put off to the next round (a lock held)
	defer func() {
		s.last = ""
		if !pending {
			s.last = statKeys(hostGit, box)
		}
	}()
	changed := false
	setBase := func(name, h string, data []byte) {
		st.Base[name], changed = h, true
		if name == "index" {
			st.IndexEntries = indexEntries(data)
		}
	}
	for _, name := range GitSynced {
		hdata, hperm, herr := readRegular(hostGit, name)
		bdata, _, berr := readRegular(box, name)
		hs, bs := "", ""
		if herr == nil {
			hs = sum(hdata)
		} else if !errors.Is(herr, os.ErrNotExist) {
			continue // the host's is no regular file, or unreadable: leave both
		}
		if berr == nil {
			bs = sum(bdata)
		} else if !errors.Is(berr, os.ErrNotExist) {
			bs = st.Base[name] // the box made it something else: nothing to carry
		}
		base := st.Base[name]
		// The host's index rewritten by a refresh alone (the owner's
		// prompt runs git status, which stores the stat data it read) is
		// no change of the owner's: the box's goes on to the host.
		refreshed := name == "index" && hs != base && hs != "" && st.IndexEntries != "" && indexEntries(hdata) == st.IndexEntries
		switch {
		case hs == base && bs == base:
		case hs == bs:
			setBase(name, hs, hdata)
		case bs != base && (hs == base || refreshed): // the box's changed: to the host, if it may
			if st.Kept[name] == bs {
				continue
			}
			if bs != "" {
				if why := checkSynced(name, bdata, hostGit); why != "" {
					if st.Kept == nil {
						st.Kept = map[string]string{}
					}
					st.Kept[name], changed = bs, true
					logf().Warn("workspace git: a file the box changed in .git is kept from the host", "session", st.Session, "workspace", st.Source, "file", ".git/"+name, "why", why)
					continue
				}
				if hperm == 0 {
					hperm = 0o644
				}
				if err := writeLocked(hostGit, name, bdata, hperm, st.Owner.UID, st.Owner.GID); err != nil {
					pending = true // a lock held: next round
					continue
				}
			} else if err := removeLocked(hostGit, name); err != nil {
				pending = true
				continue
			}
			setBase(name, bs, bdata)
		default: // the host's changed (alone, or both): to the box
			if hs != "" {
				if err := writeLocked(box, name, hdata, 0o644, st.BoxUID, st.BoxGID); err != nil {
					pending = true
					continue
				}
			} else if err := removeLocked(box, name); err != nil {
				pending = true
				continue
			}
			if bs != base && bs != "" {
				logf().Warn("workspace git: the box and the host both changed a file in .git; the host's is kept", "session", st.Session, "workspace", st.Source, "file", ".git/"+name)
			}
			setBase(name, hs, hdata)
			delete(st.Kept, name)
		}
	}
	if changed {
		return saveGitBox(dir, st)
	}
	return nil
}

// statKeys describes every synced file on both sides as stat sees it
// (inode, size, change and modification times), "-" for one missing.
func statKeys(hostGit, box int) string {
	var b strings.Builder
	for _, dfd := range []int{hostGit, box} {
		for _, name := range GitSynced {
			var st unix.Stat_t
			if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				b.WriteString("-;")
				continue
			}
			fmt.Fprintf(&b, "%d.%d.%o.%d.%d.%d.%d.%d;", st.Dev, st.Ino, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		}
	}
	return b.String()
}

// indexEntries is a digest of what an index's entries say (path, mode,
// object id, stage, flags), without the stat data git caches in them: two
// indexes with the same digest differ only by a refresh. "" for one that
// does not parse, or is split.
func indexEntries(data []byte) string {
	ix, err := gitindex.Parse(data)
	if err != nil || ix.Shared != "" {
		return ""
	}
	h := sha256.New()
	for _, e := range ix.Entries {
		fmt.Fprintf(h, "%q %o %s %d %t %t %t\n", e.Path, e.Mode, e.OID, e.Stage, e.AssumeValid, e.SkipWorktree, e.IntentToAdd)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

var (
	hexID  = `[0-9a-f]{40}(?:[0-9a-f]{24})?`
	refOK  = regexp.MustCompile(`^ref: refs/[A-Za-z0-9._/@+-]+\n?$`)
	idOK   = regexp.MustCompile(`^` + hexID + `\n?$`)
	idsOK  = regexp.MustCompile(`^(?:` + hexID + `\n)*` + hexID + `\n?$`)
	textOK = func(b []byte) bool { return !slices.Contains(b, 0) }
)

// checkSynced says why the box's version of a GitSynced file may not go
// to the host, or "". Each must be what git writes there; the index must
// not make the owner's git look away from a file it looked at before (a
// skip-worktree or assume-unchanged flag the host's index did not have:
// `git status` and `git diff` would then hide a change the box made).
func checkSynced(name string, data []byte, hostGit int) string {
	switch name {
	case "HEAD":
		if refOK.Match(data) || idOK.Match(data) {
			return ""
		}
		return "HEAD is neither a ref under refs/ nor an object id"
	case "ORIG_HEAD", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD":
		if idOK.Match(data) {
			return ""
		}
		return "not an object id"
	case "MERGE_HEAD":
		if idsOK.Match(data) {
			return ""
		}
		return "not a list of object ids"
	case "index":
		return checkIndex(data, hostGit)
	default: // packed-refs, FETCH_HEAD, COMMIT_EDITMSG, MERGE_MSG, MERGE_MODE
		if textOK(data) {
			return ""
		}
		return "holds a NUL byte: not text git writes there"
	}
}

// checkIndex refuses an index that does not parse, that is split (its
// shared part would live in the box's directory alone), or that hides an
// entry the host's index did not hide.
func checkIndex(data []byte, hostGit int) string {
	ix, err := gitindex.Parse(data)
	if err != nil {
		return "the index does not parse: " + err.Error()
	}
	if ix.Shared != "" {
		return "a split index (core.splitIndex): its shared part stays in the box"
	}
	hidden := ix.Hidden()
	if len(hidden) == 0 {
		return ""
	}
	was := map[string]bool{}
	if old, _, err := readRegular(hostGit, "index"); err == nil {
		if oix, err := gitindex.Parse(old); err == nil && oix.Shared == "" {
			for _, e := range oix.Hidden() {
				was[e.Path] = true
			}
		}
	}
	var newly []string
	for _, e := range hidden {
		if !was[e.Path] {
			newly = append(newly, fmt.Sprintf("%q", e.Path))
		}
	}
	if len(newly) == 0 {
		return ""
	}
	if len(newly) > 5 {
		newly = append(newly[:5], fmt.Sprintf("and %d more", len(newly)-5))
	}
	return "the box's index flags " + strings.Join(newly, ", ") + " skip-worktree or assume-unchanged, so your git status and git diff would not show changes to them; the host keeps its own index (look with git status, and git ls-files -v | grep -v '^H' in the box)"
}
