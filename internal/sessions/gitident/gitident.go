// Package gitident carries the invoking user's git identity (user.name and
// user.email, nothing else of their git config) into a box: the CLI reads
// it (Read), the Runner checks it (Check) and writes the box's ~/.gitconfig
// from it (Render).
package gitident

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Identity is a git author identity. Either field may be empty.
type Identity struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// MaxField bounds each field.
const MaxField = 256

// IsZero reports whether there is nothing to write.
func (i Identity) IsZero() bool { return i.Name == "" && i.Email == "" }

// Check rejects a field that is over MaxField bytes, not UTF-8, or holds
// a control character (a newline would start a new config line).
func (i Identity) Check() error {
	for _, f := range []struct{ key, v string }{{"user.name", i.Name}, {"user.email", i.Email}} {
		if len(f.v) > MaxField || !utf8.ValidString(f.v) {
			return fmt.Errorf("git identity: %s is longer than %d bytes or not UTF-8: %w", f.key, MaxField, errdefs.ErrInvalid)
		}
		for _, r := range f.v {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("git identity: %s holds a control character (a newline?): %w", f.key, errdefs.ErrInvalid)
			}
		}
	}
	return nil
}

// Render is a git config file with a [user] section holding the identity's
// non-empty fields, each value double-quoted with '\' and '"' escaped, so
// '#', ';' and spaces in it stay part of the value. It checks first.
func (i Identity) Render() ([]byte, error) {
	if err := i.Check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# Written by paddock from the git identity of the person who ran `paddock run`.\n[user]\n")
	for _, f := range []struct{ key, v string }{{"name", i.Name}, {"email", i.Email}} {
		if f.v == "" {
			continue
		}
		fmt.Fprintf(&b, "\t%s = \"%s\"\n", f.key, quote.Replace(f.v))
	}
	return b.Bytes(), nil
}

var quote = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// Read asks git for user.name and user.email in the global config of the
// user whose home is home (~/.gitconfig, ~/.config/git/config and what
// they include), as `git config --global --includes --get`: the system
// config and any repository's are not read. A key that is not set is
// empty; no git on PATH gives the zero Identity and no error. env supplies
// PATH.
func Read(ctx context.Context, home string, env []string) (Identity, error) {
	gitBin, err := lookPath(env)
	if err != nil {
		return Identity{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	get := func(key string) (string, error) {
		cmd := exec.CommandContext(ctx, gitBin, "config", "--global", "--includes", "--get", key)
		cmd.Dir = home
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return "", nil // not set
		}
		if err != nil {
			return "", fmt.Errorf("git config --global --get %s: %w", key, err)
		}
		return strings.TrimRight(string(out), "\n"), nil
	}
	var id Identity
	if id.Name, err = get("user.name"); err != nil {
		return Identity{}, err
	}
	if id.Email, err = get("user.email"); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// lookPath finds git on env's PATH, else in the usual places.
func lookPath(env []string) (string, error) {
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range strings.Split(p, ":") {
				if d != "" && strings.HasPrefix(d, "/") {
					if p, err := exec.LookPath(d + "/git"); err == nil {
						return p, nil
					}
				}
			}
		}
	}
	for _, p := range []string{"/usr/bin/git", "/usr/local/bin/git", "/bin/git"} {
		if p, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no git")
}
