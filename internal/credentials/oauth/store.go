package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// ErrNoLogin is wrapped when no login is stored.
var ErrNoLogin = fmt.Errorf("paddock has no login of its own: run paddock credential login: %w", errdefs.ErrUnavailable)

// Store is a login's file (mode 0600). Save replaces it atomically and
// durably (a temporary file, fsync, rename, fsync of the directory): a
// crash leaves the old file or the new, never neither, never half.
type Store struct{ Path string }

type fileDoc struct {
	Version      int       `json:"version"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	ExpiresAt    time.Time `json:"expires_at"`
	Scopes       []string  `json:"scopes,omitempty"`
	Obtained     time.Time `json:"obtained"`
}

// Load reads the login; ErrNoLogin if there is none.
func (s Store) Load() (Token, error) {
	f, err := os.Open(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Token{}, ErrNoLogin
	}
	if err != nil {
		return Token{}, fmt.Errorf("read paddock's login: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Token{}, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0) {
		return Token{}, fmt.Errorf("paddock's login file %s must be yours and mode 0600 (it is %v): %w", s.Path, fi.Mode().Perm(), errdefs.ErrForbidden)
	}
	var d fileDoc
	dec := json.NewDecoder(f)
	if err := dec.Decode(&d); err != nil || d.AccessToken == "" || d.RefreshToken == "" {
		return Token{}, fmt.Errorf("paddock's login file %s is damaged; run paddock credential login again: %w", s.Path, errdefs.ErrInvalid)
	}
	return Token{Access: secret.New(d.AccessToken), Refresh: secret.New(d.RefreshToken), Expires: d.ExpiresAt,
		Scopes: d.Scopes, Obtained: d.Obtained}, nil
}

// Save writes t in place of the stored login.
func (s Store) Save(t Token) error {
	b, err := json.Marshal(fileDoc{Version: 1, AccessToken: t.Access.Reveal(), RefreshToken: t.Refresh.Reveal(),
		ExpiresAt: t.Expires, Scopes: t.Scopes, Obtained: t.Obtained})
	if err != nil {
		return err
	}
	return atomicfile.Write(s.Path, append(b, '\n'), 0o600)
}

// Remove deletes the login (a missing one is not an error).
func (s Store) Remove() error {
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeStale deletes temporary files a crash during Save left beside the
// login (never read). Only the one writer calls it, at its start, with no
// Save of its own under way.
func (s Store) removeStale() {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".tmp*"))
	for _, f := range left {
		_ = os.Remove(f)
	}
}
