package project

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Status is what the AllowStore says of a workspace's project file.
type Status string

// Statuses.
const (
	// Allowed: the owner accepted exactly these bytes.
	Allowed Status = "allowed"
	// New: the owner never accepted a project file for this workspace.
	New Status = "new"
	// Changed: the owner accepted other bytes than the file has now.
	Changed Status = "changed"
)

// Decision is the AllowStore's answer for a workspace's project file.
type Decision struct {
	Status Status
	// Diff is a unified diff from what the owner accepted to the file
	// now (Changed), or the whole file as added lines (New); "" when
	// Allowed.
	Diff string
}

// Err is nil when the file is Allowed, else a *NotAllowedError for
// workspace that carries the diff.
func (d Decision) Err(workspace string) error {
	if d.Status == Allowed {
		return nil
	}
	return &NotAllowedError{Workspace: workspace, Decision: d}
}

// NotAllowedError refuses a project file its owner has not accepted as
// it is. It is an errdefs.ErrForbidden; its message says what to run and
// holds the diff to read first.
type NotAllowedError struct {
	Workspace string
	Decision  Decision
}

func (e *NotAllowedError) Error() string {
	what := "is new: paddock has never been told to use it"
	if e.Decision.Status == Changed {
		what = "changed since you allowed it"
	}
	return fmt.Sprintf("%s %s. It is configuration a box can write: read it below, then run `paddock project allow %s` to use it as it is (or remove the file):\n%s",
		filepath.Join(e.Workspace, FileName), what, shellQuote(e.Workspace), e.Decision.Diff)
}

// Unwrap makes a NotAllowedError an errdefs.ErrForbidden.
func (e *NotAllowedError) Unwrap() error { return errdefs.ErrForbidden }

// AllowStore records, per workspace, the project file its owner accepted.
// It is a directory the Runner owns (0700), holding one file per
// workspace (0600), named by the hex SHA-256 of the workspace's absolute,
// cleaned path and holding the accepted bytes. Writes are atomic
// (atomicfile): a reader sees the old acceptance or the new. Safe for
// concurrent use; two Allows of one workspace race, the last one wins.
type AllowStore struct {
	dir string
}

// NewAllowStore opens the store in dir, making the directory (0700) if it
// does not exist. A dir that is a symbolic link or not a directory is
// refused.
func NewAllowStore(dir string) (*AllowStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("project allow store: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("project allow store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("project allow store %s is not a directory: %w", dir, errdefs.ErrInvalid)
	}
	return &AllowStore{dir: dir}, nil
}

// record is the path of workspace's record; workspace must be absolute.
func (s *AllowStore) record(workspace string) (string, error) {
	if !filepath.IsAbs(workspace) {
		return "", fmt.Errorf("workspace %q is not an absolute path: %w", workspace, errdefs.ErrInvalid)
	}
	h := sha256.Sum256([]byte(filepath.Clean(workspace)))
	return filepath.Join(s.dir, hex.EncodeToString(h[:])), nil
}

// accepted returns the bytes accepted for workspace, or nil, false.
func (s *AllowStore) accepted(workspace string) ([]byte, bool, error) {
	p, err := s.record(workspace)
	if err != nil {
		return nil, false, err
	}
	fh, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("project allow store: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxSize+MaxDockerfile+1024))
	if err != nil {
		return nil, false, fmt.Errorf("project allow store: %w", err)
	}
	return b, true, nil
}

// Check says whether the owner accepted f, the project file of workspace
// (an absolute path, as the Runner resolved it: the same directory by
// another path is another workspace to the store). A nil f (no file) is
// Allowed: with no file there is nothing to accept. Otherwise the answer
// is Allowed when the recorded bytes equal f.Accepted(), New (with the
// whole of it as the diff) when none are recorded, Changed (with the diff
// from the recorded bytes) when others are.
func (s *AllowStore) Check(workspace string, f *File) (Decision, error) {
	if _, err := s.record(workspace); err != nil {
		return Decision{}, err
	}
	if f == nil {
		return Decision{Status: Allowed}, nil
	}
	old, ok, err := s.accepted(workspace)
	if err != nil {
		return Decision{}, err
	}
	now := f.Accepted()
	switch {
	case !ok:
		return Decision{Status: New, Diff: unifiedDiff("/dev/null", FileName, nil, now)}, nil
	case bytes.Equal(old, now):
		return Decision{Status: Allowed}, nil
	}
	return Decision{Status: Changed, Diff: unifiedDiff(FileName+" (allowed)", FileName+" (now)", old, now)}, nil
}

// Allow records that the owner accepts f (as Load read it: the file and
// its Dockerfile) as workspace's project file. sum is the hex SHA-256 of
// what the person was shown (File.Sum of the file they read); when f
// does not match it, the file changed in between and nothing is recorded
// (errdefs.ErrConflict). Allowing what is already allowed changes
// nothing.
func (s *AllowStore) Allow(workspace string, sum string, f *File) error {
	p, err := s.record(workspace)
	if err != nil {
		return err
	}
	raw := f.Accepted()
	if got := Sum(raw); got != strings.ToLower(sum) {
		return fmt.Errorf("%s changed since it was shown (it is now %.12s…, the copy shown was %.12s…): read it again and allow what it says now: %w",
			filepath.Join(workspace, FileName), got, clip(sum), errdefs.ErrConflict)
	}
	if err := atomicfile.Write(p, raw, 0o600); err != nil {
		return fmt.Errorf("project allow store: %w", err)
	}
	return nil
}

// Revoke forgets what the owner accepted for workspace: its project file
// is New again. Revoking a workspace with nothing recorded is no error.
func (s *AllowStore) Revoke(workspace string) error {
	p, err := s.record(workspace)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("project allow store: %w", err)
	}
	return nil
}

// shellQuote quotes a path for a command line a person copies, if it
// needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
