package gitimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// gitDir finds the git directory of repo, an absolute path: repo/.git if
// that is a directory (a working tree), else repo itself if it is one (a
// bare repository). It takes no redirection: a .git that is a file (the
// "gitdir:" pointer of a linked worktree or a submodule) or a symlink is
// refused, as is a git directory holding "commondir" (whose objects and
// refs live elsewhere), so the directory checked is the one written.
// It also says who owns the git directory.
func gitDir(repo string) (dir string, uid uint32, err error) {
	if !filepath.IsAbs(repo) {
		return "", 0, fmt.Errorf("repository %q: the path must be absolute: %w", repo, errdefs.ErrInvalid)
	}
	repo = filepath.Clean(repo)
	dot := filepath.Join(repo, ".git")
	fi, err := os.Lstat(dot)
	switch {
	case err == nil && fi.Mode().Type() == fs.ModeSymlink:
		return "", 0, fmt.Errorf("%s is a symbolic link: paddock imports only into a repository whose .git is a directory "+
			"(use the path of the git directory itself): %w", dot, errdefs.ErrInvalid)
	case err == nil && fi.Mode().IsRegular():
		return "", 0, fmt.Errorf("%s is a file (a linked worktree's or a submodule's pointer to its git directory): "+
			"paddock imports only into a repository whose .git is a directory; use the main working tree or the git directory: %w", dot, errdefs.ErrInvalid)
	case err == nil && fi.IsDir():
		dir = dot
	case err == nil:
		return "", 0, fmt.Errorf("%s is neither a directory nor a file: %w", dot, errdefs.ErrInvalid)
	case errors.Is(err, fs.ErrNotExist) && looksLikeGitDir(repo):
		dir = repo
	case errors.Is(err, fs.ErrNotExist):
		return "", 0, fmt.Errorf("%s is not a git repository (no .git directory, and not a bare repository): %w", repo, errdefs.ErrNotFound)
	default:
		return "", 0, fmt.Errorf("repository %s: %w", repo, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "commondir")); !errors.Is(err, fs.ErrNotExist) {
		return "", 0, fmt.Errorf("%s holds a commondir file (it is a linked worktree's git directory, its objects and refs elsewhere): "+
			"use the main repository: %w", dir, errdefs.ErrInvalid)
	}
	fi, err = os.Lstat(dir)
	if err != nil {
		return "", 0, fmt.Errorf("repository %s: %w", repo, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0, fmt.Errorf("repository %s: no owner", repo)
	}
	return dir, st.Uid, nil
}

// looksLikeGitDir says dir has what every git directory has (git's own
// test, is_git_directory, is much the same): a HEAD file and objects and
// refs directories, none of them a symlink.
func looksLikeGitDir(dir string) bool {
	for name, isDir := range map[string]bool{"HEAD": false, "objects": true, "refs": true} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() != isDir || !fi.IsDir() && !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}
