package gitindex

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
)

// link is a split index's link extension: the shared index's checksum and
// two EWAH bitmaps over the shared index's entries.
type link struct {
	base    string // hex
	del     ewah   // entries of the shared index left out
	replace ewah   // entries of the shared index replaced, in order, by this file's first entries
}

// readLink parses a link extension (index-format.txt, "Split index"). A
// base of all zeros means no shared index: it returns nil, as git then
// ignores the extension.
func readLink(b []byte, hs int) (*link, error) {
	if len(b) < hs {
		return nil, corrupt("link extension of %d bytes, shorter than a hash", len(b))
	}
	l := &link{base: hex.EncodeToString(b[:hs])}
	none := zero(b[:hs])
	b = b[hs:]
	if len(b) > 0 {
		n, err := l.del.read(b)
		if err != nil {
			return nil, fmt.Errorf("link extension's delete bitmap: %w", err)
		}
		b = b[n:]
		if n, err = l.replace.read(b); err != nil {
			return nil, fmt.Errorf("link extension's replace bitmap: %w", err)
		}
		if n != len(b) {
			return nil, corrupt("%d bytes after the link extension's bitmaps", len(b)-n)
		}
	}
	if none {
		return nil, nil
	}
	return l, nil
}

// ewah is an EWAH-compressed bitmap as git stores it (ewah/ewah_io.c): a
// bit count, a word count, the 64-bit words, the position of the last
// run-length word.
type ewah struct {
	words []uint64
}

// read parses a bitmap at the start of b and returns its length.
func (w *ewah) read(b []byte) (int, error) {
	if len(b) < 8 {
		return 0, corrupt("an EWAH bitmap header runs past its extension")
	}
	nw := binary.BigEndian.Uint32(b[4:])
	if uint64(nw) > uint64(len(b)-8)/8 {
		return 0, corrupt("an EWAH bitmap of %d words runs past its extension", nw)
	}
	end := 8 + 8*int(nw)
	if len(b) < end+4 {
		return 0, corrupt("an EWAH bitmap's last word position runs past its extension")
	}
	if nw > 0 && binary.BigEndian.Uint32(b[end:]) >= nw {
		return 0, corrupt("an EWAH bitmap's last word position is past its %d words", nw)
	}
	w.words = make([]uint64, nw)
	for i := range w.words {
		w.words[i] = binary.BigEndian.Uint64(b[8+8*i:])
	}
	return end + 4, nil
}

// each calls f with the position of every set bit, in increasing order
// (ewah_each_bit). A set bit at n or past is an error, found before f is
// called for it, so the work is bounded by the words and n.
func (w *ewah) each(n int, f func(pos int) error) error {
	// Past n every set bit is an error, so pos stops at n: the sum of
	// runs could otherwise overflow.
	limit := uint64(n)
	pos := uint64(0)
	for i := 0; i < len(w.words); {
		rlw := w.words[i]
		i++
		run := ((rlw >> 1) & 0xffffffff) * 64 // 32 bits of run length, in words
		lits := int(rlw >> 33)                // 31 bits of literal word count
		if rlw&1 != 0 {
			if pos+run > uint64(n) {
				return corrupt("an EWAH bitmap sets bit %d, past the shared index's %d entries", pos+run-1, n)
			}
			for k := uint64(0); k < run; k++ {
				if err := f(int(pos + k)); err != nil {
					return err
				}
			}
		}
		pos = min(pos+run, limit)
		if lits > len(w.words)-i {
			return corrupt("an EWAH run-length word counts %d literal words, %d are left", lits, len(w.words)-i)
		}
		for ; lits > 0; lits-- {
			lit := w.words[i]
			i++
			for c := uint64(0); c < 64; c++ {
				if lit&(1<<c) == 0 {
					continue
				}
				if pos+c >= uint64(n) {
					return corrupt("an EWAH bitmap sets bit %d, past the shared index's %d entries", pos+c, n)
				}
				if err := f(int(pos + c)); err != nil {
					return err
				}
			}
			pos = min(pos+64, limit)
		}
	}
	return nil
}

// Merge returns the index git works with for a split index ix (ix.Shared
// set): shared is the parsed $GIT_DIR/sharedindex.<ix.Shared>. As git's
// merge_base_index does, the shared entries the replace bitmap marks take
// the flags, stat data and object id of ix's first entries (which carry
// no path) in order, those the delete bitmap marks are left out, and ix's
// other entries are added, each replacing a shared entry of the same path
// and stage (and, at stage 0, the path's conflict stages). The result is
// sorted by path and stage and is not split; ix and shared are not
// changed. It is an error wrapping ErrCorrupt where shared is not the
// index ix names, is itself split, or the bitmaps do not fit the entries.
func (ix *Index) Merge(shared *Index) (*Index, error) {
	if ix.link == nil {
		return nil, corrupt("Merge of an index that is not split")
	}
	if shared.HashSize != ix.HashSize {
		return nil, corrupt("the shared index uses %s, the split index %s", hashName(shared.HashSize), hashName(ix.HashSize))
	}
	if shared.Checksum != ix.Shared {
		return nil, corrupt("the shared index's checksum is %s, the split index names %s", shared.Checksum, ix.Shared)
	}
	if shared.Shared != "" {
		return nil, corrupt("the shared index is itself split")
	}
	base := append([]Entry(nil), shared.Entries...)
	mine := ix.Entries
	replaced := 0
	err := ix.link.replace.each(len(base), func(pos int) error {
		if replaced >= len(mine) {
			return corrupt("the replace bitmap marks more entries than the split index's %d", len(mine))
		}
		e := mine[replaced]
		if e.Path != "" {
			return corrupt("split index entry %d replaces shared entry %d but has a path", replaced, pos)
		}
		e.Path = base[pos].Path
		base[pos] = e
		replaced++
		return nil
	})
	if err != nil {
		return nil, err
	}
	gone := make([]bool, len(base))
	if err := ix.link.del.each(len(base), func(pos int) error { gone[pos] = true; return nil }); err != nil {
		return nil, err
	}
	type item struct {
		Entry
		added bool
	}
	all := make([]item, 0, len(base)+len(mine)-replaced)
	for i, e := range base {
		if !gone[i] {
			all = append(all, item{e, false})
		}
	}
	for i, e := range mine[replaced:] {
		if e.Path == "" {
			return nil, corrupt("split index entry %d is added but has no path", replaced+i)
		}
		all = append(all, item{e, true})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Path != all[j].Path {
			return all[i].Path < all[j].Path
		}
		return all[i].Stage < all[j].Stage
	})
	out := &Index{
		Version: ix.Version, HashSize: ix.HashSize, Checksum: ix.Checksum,
		Extensions: ix.Extensions, Entries: make([]Entry, 0, len(all)),
	}
	for i := 0; i < len(all); {
		j := i // all[i:j] is one path
		merged := false
		for j < len(all) && all[j].Path == all[i].Path {
			merged = merged || (all[j].added && all[j].Stage == 0)
			j++
		}
		for k := i; k < j; k++ {
			it := all[k]
			if !it.added && merged {
				continue // a merged entry added replaces every stage
			}
			if !it.added && k+1 < j && all[k+1].added && all[k+1].Stage == it.Stage {
				continue // replaced by an added entry of the same stage
			}
			if it.added && k+1 < j && all[k+1].added && all[k+1].Stage == it.Stage {
				continue // the later of two added entries wins
			}
			out.Entries = append(out.Entries, it.Entry)
		}
		i = j
	}
	return out, nil
}
