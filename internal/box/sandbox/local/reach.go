package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Reachable checks that a box's uid can reach what bwrap, running as
// that uid, opens by path: every directory from "/" down to each of dirs,
// and each of execs, needs search (and for execs, execute) permission for
// others: box uids own nothing on the host and are in no group. Without
// it a box dies as it starts. A Runner that is not root runs boxes as
// itself, so there is nothing to check. The error names the directory
// and the command that fixes it.
func Reachable(dirs, execs []string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	seen := map[string]bool{}
	check := func(p string, what string) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		fi, err := os.Stat(p)
		if err != nil {
			return nil // made later (the state directory), or reported elsewhere
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("local boxes run as uids of their own, which cannot %s %s (mode %04o: others may not): chmod o+x %s, or use a --state-dir below directories everyone may search (e.g. /var/lib/paddock): %w",
				what, p, fi.Mode().Perm(), p, errdefs.ErrUnavailable)
		}
		return nil
	}
	walk := func(p string) error {
		var chain []string
		for d := filepath.Clean(p); ; d = filepath.Dir(d) {
			chain = append(chain, d)
			if d == "/" || d == "." {
				break
			}
		}
		for i := len(chain) - 1; i >= 0; i-- { // from "/" down: name the highest first
			if err := check(chain[i], "search"); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs {
		if err := walk(d); err != nil {
			return err
		}
	}
	for _, x := range execs {
		if x == "" {
			continue
		}
		if real, err := filepath.EvalSymlinks(x); err == nil {
			x = real
		}
		if err := walk(filepath.Dir(x)); err != nil {
			return err
		}
		if err := check(x, "run"); err != nil {
			return err
		}
	}
	return nil
}
