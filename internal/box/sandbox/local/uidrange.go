package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"golang.org/x/sys/unix"
)

// RangeSize is how many host uids one local backend (one state
// directory) gives its boxes: uid base+1 … base+RangeSize-1.
const RangeSize = 10000

// maxUID bounds the ranges: ids above 2^31 trip up too many tools.
const maxUID = 1<<31 - 1<<20

// rangesDir holds the host-wide claims of uid ranges: one file per range,
// named by its base and holding the claiming backend's Root. It persists,
// as the boxes' records (and their uids) do across reboots.
const rangesDir = "/var/lib/paddock-uid-ranges"

// claimRange returns the base of the uid range this backend (root) owns,
// claiming one if it has none: the first range at or above start, in
// steps of RangeSize, that no other state directory holds. Several
// Runners on one host (several state directories) so never give two
// boxes the same host uid, which would let one box signal or trace the
// other's processes. A claim whose state directory is gone is free again.
// A backend that has boxes from before claims existed takes back the
// range they are in, if it is free.
func claimRange(start int, root string, recs []*record) (int, error) {
	if err := os.MkdirAll(rangesDir, 0o700); err != nil {
		return 0, fmt.Errorf("local backend: uid ranges: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(rangesDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("local backend: uid ranges: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return 0, fmt.Errorf("local backend: uid ranges: %w", err)
	}
	claims := map[int]string{} // base -> root, live claims of others
	ents, err := os.ReadDir(rangesDir)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		base, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(rangesDir, e.Name()))
		if err != nil {
			continue
		}
		owner := strings.TrimSpace(string(b))
		if owner == root {
			return base, nil // ours
		}
		if _, err := os.Stat(owner); errors.Is(err, fs.ErrNotExist) {
			_ = os.Remove(filepath.Join(rangesDir, e.Name())) // its state directory is gone
			continue
		}
		claims[base] = owner
	}
	free := func(base int) bool {
		for b := range claims { // ranges of other sizes or starts must not overlap either
			if base < b+RangeSize && b < base+RangeSize {
				return false
			}
		}
		return true
	}
	claim := func(base int) (int, error) {
		p := filepath.Join(rangesDir, strconv.Itoa(base))
		if err := atomicfile.Write(p, []byte(root+"\n"), 0o600); err != nil {
			return 0, fmt.Errorf("local backend: claim uid range %d: %w", base, err)
		}
		return base, nil
	}
	if len(recs) > 0 { // boxes from before ranges were claimed
		low := recs[0].UID
		for _, r := range recs {
			low = min(low, r.UID)
		}
		if base := low - 1; base >= 1000 && free(base) {
			return claim(base)
		}
	}
	for base := start; base+RangeSize <= maxUID; base += RangeSize {
		if free(base) {
			return claim(base)
		}
	}
	return 0, fmt.Errorf("local backend: no free range of %d host uids at or above %d (see %s): %w", RangeSize, start, rangesDir, errdefs.ErrUnavailable)
}
