package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Import gives a session that has no log yet the log of a session moved
// from elsewhere (paddock session import): entries, oldest first, become
// its part being written, each with the session's id and clamped as Record
// clamps; carried, if not nil, becomes its carry (what the moved log's
// dropped parts counted; Through is reset, no part of this Runner being
// gone). Each file is written whole or not at all. A session that has a
// log already is refused (ErrConflict): Import never mixes two logs.
func (d *Dir) Import(session string, entries []Entry, carried *Carry) error {
	if !validSession(session) {
		return fmt.Errorf("session id %q: %w", session, errdefs.ErrInvalid)
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range []string{d.file(session), d.carryFile(session)} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("session %s has a decision log already (%s); an import never mixes two: %w", session, p, errdefs.ErrConflict)
		}
	}
	if ns, err := d.parts(session); err != nil || len(ns) > 0 {
		return fmt.Errorf("session %s has rotated decision log parts already: %w", session, errdefs.ErrConflict)
	}
	if carried != nil {
		c := *carried
		c.Version, c.Through = CarryVersion, 0
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(d.carryFile(session), b, 0o600); err != nil {
			return fmt.Errorf("import the decision log's carry: %w", err)
		}
	}
	var buf []byte
	for _, e := range entries {
		e.Session = session
		Clamp(&e)
		line, ok := appendEntry(nil, &e)
		if !ok {
			continue // a value JSON cannot hold (NaN): as Record, the line is left out
		}
		buf = append(append(buf, line...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	if err := atomicfile.Write(d.file(session), buf, 0o600); err != nil {
		_ = os.Remove(d.carryFile(session))
		return fmt.Errorf("import the decision log: %w", err)
	}
	return nil
}
