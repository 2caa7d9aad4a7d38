// Package statedir finds, creates and locks paddock's state directory.
//
// Layout (all owner-only):
//
//	<state-dir>/
//	  paddock.toml      optional config (internal/daemon/config)
//	  paddock.lock      flock held by the one running `paddock serve`
//	  paddock.sock      the Runner's HTTP API (0600)
//	  proxy.sock        the credential proxy on the host (0600), unless configured otherwise
//	  paddock.db        the embedded store (internal/base/store)
//	  credential.json   the owner's credential when stored as a file (0600)
//	  logs/<id>.jsonl   per-session proxy decision log (internal/sessions/decisionlog),
//	                    with its rotated parts <id>.jsonl.<n> and <id>.carry.json
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// EnvVar names the environment variable that sets the state directory.
const EnvVar = "PADDOCK_STATE_DIR"

// File names inside the state directory.
const (
	LockFile    = "paddock.lock"
	APISocket   = "paddock.sock"
	ProxySocket = "proxy.sock"
	DBFile      = "paddock.db"
	ConfigFile  = "paddock.toml"
	LogsDir     = "logs"
	AuditFile   = "audit.jsonl"
)

// Default returns the state directory used when neither --state-dir nor
// PADDOCK_STATE_DIR is set: /var/lib/paddock for root, else
// $XDG_STATE_HOME/paddock (default ~/.local/state/paddock).
func Default() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/paddock", nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "paddock"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state directory: %w (set --state-dir or %s)", err, EnvVar)
	}
	return filepath.Join(home, ".local", "state", "paddock"), nil
}

// SystemDir is the state directory of a Runner run by root, as the
// systemd unit runs it: the team server of a host.
const SystemDir = "/var/lib/paddock"

// ForClient picks the state directory of a client command (not serve)
// that neither --state-dir nor the environment names: the caller's own
// Default when a Runner's socket is there, else the host's system Runner
// (SystemDir) when its socket exists, else the caller's own. So a member
// of a team server's group reaches it without flags.
func ForClient() (string, error) {
	own, err := Default()
	if err != nil || own == SystemDir {
		return own, err
	}
	if _, err := os.Stat(filepath.Join(own, APISocket)); err == nil {
		return own, nil
	}
	if _, err := os.Stat(filepath.Join(SystemDir, APISocket)); err == nil {
		return SystemDir, nil
	}
	return own, nil
}

// Resolve picks the state directory: flag, then environment, then Default.
// The result is absolute and clean.
func Resolve(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv(EnvVar)
	}
	if dir == "" {
		return Default()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory %q: %w", dir, err)
	}
	return abs, nil
}

// Ensure creates dir (mode 0711) if needed and makes sure it belongs to the
// current user and is not open to others beyond traversal: others may pass
// through it (a local box's unprivileged uid must reach its own volume and
// the pinned CLI below it) but never list or read it. Everything secret
// inside has its own owner-only mode (sockets and files 0600, logs 0700).
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state directory %s belongs to uid %d, not to you (uid %d); use your own --state-dir", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o066 != 0 || fi.Mode().Perm()&0o011 != 0o011 {
		if err := os.Chmod(dir, 0o711); err != nil {
			return fmt.Errorf("make state directory %s owner-only: %w", dir, err)
		}
	}
	return nil
}

// Lock is an exclusive lock on a state directory, held for the life of a Runner.
type Lock struct{ f *os.File }

// ErrLocked is wrapped by Acquire when another process holds the lock.
var ErrLocked = errors.New("state directory is in use")

// Acquire takes the lock on dir without waiting. If another `paddock serve`
// holds it, the error wraps ErrLocked and names that process.
func Acquire(dir string) (*Lock, error) {
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		holder := strings.TrimSpace(string(b[:n]))
		if _, perr := strconv.Atoi(holder); perr != nil {
			holder = "unknown"
		}
		return nil, fmt.Errorf("%w: another paddock serve (pid %s) holds %s; stop it, or give this one its own --state-dir: %w",
			ErrLocked, holder, p, err)
	}
	// Record our pid for the message above; the lock, not the pid, is the truth.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing releases the flock
	l.f = nil
	return err
}
