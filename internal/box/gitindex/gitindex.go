// Package gitindex reads git's index file ($GIT_DIR/index) to find the
// entries that make git look away from the working tree: an entry flagged
// skip-worktree (`git update-index --skip-worktree`, sparse checkout) or
// assume-valid (`git update-index --assume-unchanged`) is never compared
// with the file it names, so `git status` and `git diff` stay silent
// however that file changes. A box with the workspace mounted writable can
// set those flags; the Runner reports them to the owner (issue 31 item 12).
//
// The parser is pure Go and strict: index versions 2, 3 and 4 (with
// version 4's path prefix compression), SHA-1 and SHA-256 repositories,
// the trailing checksum verified, every length and count checked against
// the bytes that are there before it is used. It never panics on any
// input, its work is linear in the input, and what it allocates is bounded
// by a small multiple of the input's size (see Parse). Anything git itself
// would not write (a bad checksum, an unknown flag bit, non-NUL padding,
// an unsorted index, bytes left over) is an error wrapping ErrCorrupt: an
// index that cannot be vouched for is reported as such, never read half.
//
// A split index (`git update-index --split-index`, core.splitIndex) keeps
// most entries in $GIT_DIR/sharedindex.<hash>; Index.Merge and HiddenIn
// apply the link extension as git does, so flags kept in either file are
// seen.
package gitindex

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Hash sizes: the length in bytes of an object id, and of the index's
// trailing checksum, in a SHA-1 and in a SHA-256 repository.
const (
	SHA1Size   = sha1.Size   // 20
	SHA256Size = sha256.Size // 32
)

// ErrCorrupt is wrapped by every error that says the bytes are not an
// index git would have written. It wraps errdefs.ErrInvalid.
var ErrCorrupt = fmt.Errorf("corrupt git index: %w", errdefs.ErrInvalid)

// Stat is the file metadata git caches per entry to tell, without reading
// the file, that it has not changed. Each field is the low 32 bits git
// stores.
type Stat struct {
	CTimeSec, CTimeNsec uint32
	MTimeSec, MTimeNsec uint32
	Dev, Ino            uint32
	UID, GID            uint32
	Size                uint32
}

// Entry is one index entry.
type Entry struct {
	// Path is the entry's path relative to the top of the working tree,
	// as stored: any bytes but NUL, not cleaned, not checked for "..",
	// and possibly holding control characters: quote it before showing
	// it. A sparse directory entry (sparse index) ends in "/".
	Path string
	// Mode is the git mode: 0100644, 0100755, 0120000 (symlink),
	// 0160000 (gitlink) or 040000 (sparse directory).
	Mode uint32
	// OID is the object id in lowercase hex (40 or 64 digits).
	OID string
	// Stage is 0 for a merged entry, 1 to 3 for the sides of a conflict.
	Stage int
	// AssumeValid is the assume-valid ("assume unchanged") bit: git does
	// not look at the working tree file.
	AssumeValid bool
	// SkipWorktree is the skip-worktree bit: git does not look at, nor
	// write, the working tree file.
	SkipWorktree bool
	// IntentToAdd marks an entry from `git add -N`: the path is known,
	// its content not yet staged. It hides nothing (git status shows it).
	IntentToAdd bool
	Stat        Stat
}

// Hidden reports whether git ignores the working tree file of e: e is
// flagged skip-worktree or assume-valid.
func (e Entry) Hidden() bool { return e.SkipWorktree || e.AssumeValid }

// Index is a parsed index file.
type Index struct {
	// Version is the file format version: 2, 3 or 4.
	Version int
	// HashSize is SHA1Size or SHA256Size.
	HashSize int
	// Checksum is the file's trailing hash in hex; all zeros when git
	// wrote the file with index.skipHash, which leaves it unverified.
	Checksum string
	// Entries are the entries in file order. For an index that is not
	// split that is sorted by path, then stage.
	Entries []Entry
	// Extensions are the four-byte signatures of the extensions in file
	// order ("TREE", "REUC", "UNTR", "FSMN", "EOIE", "IEOT", "link",
	// "sdir", or any optional one git does not know).
	Extensions []string
	// Shared is set for a split index: the hex checksum of the shared
	// index ($GIT_DIR/sharedindex.<Shared>) that holds the entries this
	// file changes. Entries are then only this file's part; see Merge.
	Shared string

	link *link // the split index's bitmaps, when Shared != ""
}

// Hidden returns, in index order, the entries git does not compare with
// the working tree (Entry.Hidden). For a split index call it on the
// result of Merge: alone it sees only the entries this file holds.
func (ix *Index) Hidden() []Entry {
	var out []Entry
	for _, e := range ix.Entries {
		if e.Hidden() {
			out = append(out, e)
		}
	}
	return out
}

// Options tunes Parse and HiddenIn. The zero value is the default.
type Options struct {
	// HashSize is SHA1Size or SHA256Size, the repository's object format;
	// 0 tells it from the file: the trailing checksum matches one hash
	// and not the other (an unverified, all-zero checksum is read as
	// SHA-1, or as SHA-256 where only that reads; where both read it is
	// an error: name the hash).
	HashSize int
	// MaxSize caps the size of each file HiddenIn reads; 0 is
	// DefaultMaxSize.
	MaxSize int64
}

// DefaultMaxSize is Options.MaxSize's default: 512 MiB.
const DefaultMaxSize = 512 << 20

// Parse parses a whole index file with the default Options.
func Parse(data []byte) (*Index, error) { return Options{}.Parse(data) }

// Parse parses a whole index file: data is the file's every byte. It
// returns an error wrapping ErrCorrupt for anything git would not have
// written (see the package doc), and wrapping errdefs.ErrInvalid for a
// bad Options.HashSize. It does not keep data. What it allocates is
// bounded by about 12 times len(data): version 4 compresses paths, and
// paths that expand to more than PathExpansion times len(data) are an
// error.
func (o Options) Parse(data []byte) (*Index, error) {
	switch o.HashSize {
	case SHA1Size, SHA256Size:
		if err := checkHeader(data, o.HashSize); err != nil {
			return nil, err
		}
		if !zero(trailer(data, o.HashSize)) && !checksumOK(data, o.HashSize) {
			return nil, corrupt("the trailing %s checksum does not match the content", hashName(o.HashSize))
		}
		return parse(data, o.HashSize)
	case 0:
		return detect(data)
	default:
		return nil, fmt.Errorf("git index: hash size %d is neither %d (SHA-1) nor %d (SHA-256): %w", o.HashSize, SHA1Size, SHA256Size, errdefs.ErrInvalid)
	}
}

// PathExpansion bounds how far version 4's prefix compression may
// expand: the paths of all entries together may hold at most
// PathExpansion times the file's size in bytes. Real indexes stay far
// below (it would take paths averaging over 500 bytes); without a bound a
// small file could expand quadratically.
const PathExpansion = 8

// detect tells the hash from the checksum, then parses.
func detect(data []byte) (*Index, error) {
	if err := checkHeader(data, SHA1Size); err != nil {
		return nil, err
	}
	switch {
	case checksumOK(data, SHA1Size):
		return parse(data, SHA1Size)
	case len(data) >= headerSize+SHA256Size && checksumOK(data, SHA256Size):
		return parse(data, SHA256Size)
	case !zero(trailer(data, SHA1Size)):
		return nil, corrupt("the trailing checksum matches neither SHA-1 nor SHA-256")
	}
	// index.skipHash: nothing to tell the hash by but which layout reads.
	ix1, err1 := parse(data, SHA1Size)
	if len(data) < headerSize+SHA256Size || !zero(trailer(data, SHA256Size)) {
		return ix1, err1
	}
	ix2, err2 := parse(data, SHA256Size)
	switch {
	case err1 == nil && err2 == nil:
		return nil, corrupt("an unverified (all-zero) checksum, and the file reads both as SHA-1 and as SHA-256; name the hash")
	case err1 == nil:
		return ix1, nil
	case err2 == nil:
		return ix2, nil
	}
	return nil, err1
}

const headerSize = 12

// maxFile: the IEOT extension's offsets are 32 bits wide.
const maxFile = 1<<32 - 1

// Flag bits of an on-disk entry.
const (
	flagAssumeValid = 0x8000
	flagExtended    = 0x4000
	flagStageMask   = 0x3000
	flagStageShift  = 12
	flagNameMask    = 0x0fff

	extSkipWorktree = 0x4000
	extIntentToAdd  = 0x2000
	extKnown        = extSkipWorktree | extIntentToAdd
)

// statSize is the ten 32-bit fields before the object id (ctime and mtime
// are two each).
const statSize = 40

func hashName(size int) string {
	if size == SHA256Size {
		return "SHA-256"
	}
	return "SHA-1"
}

func newHash(size int) hash.Hash {
	if size == SHA256Size {
		return sha256.New()
	}
	return sha1.New()
}

func trailer(data []byte, hs int) []byte { return data[len(data)-hs:] }

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checksumOK: the last hs bytes are the hash of all before them. The
// caller has checked len(data) >= headerSize+hs.
func checksumOK(data []byte, hs int) bool {
	h := newHash(hs)
	h.Write(data[:len(data)-hs])
	return bytes.Equal(h.Sum(nil), trailer(data, hs))
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("git index: "+format+": %w", append(args, ErrCorrupt)...)
}

func checkHeader(data []byte, hs int) error {
	if len(data) < headerSize+hs {
		return corrupt("%d bytes, too short for the header and checksum (%d)", len(data), headerSize+hs)
	}
	if string(data[:4]) != "DIRC" {
		return corrupt("signature %q, not \"DIRC\"", data[:4])
	}
	if v := binary.BigEndian.Uint32(data[4:]); v < 2 || v > 4 {
		return corrupt("version %d; only 2, 3 and 4 exist", v)
	}
	return nil
}

// minEntrySize is the smallest on-disk entry: an empty name (only a split
// index's replacements have one), no extended flags.
func minEntrySize(version, hs int) int {
	if version == 4 {
		return statSize + hs + 2 + 1 + 1 // strip-length varint, NUL
	}
	return (statSize + hs + 2 + 8) &^ 7 // at least one NUL, 8-byte aligned
}

// parser holds the state of one parse.
type parser struct {
	data    []byte // header and entries and extensions; not the checksum
	version int
	hs      int
	off     int
	budget  int64 // path bytes that may still be allocated

	// For the IEOT check: each entry's offset and, for version 4, the
	// length of the previous path it kept.
	offsets []uint32
	kept    []uint32
}

func parse(data []byte, hs int) (*Index, error) {
	if err := checkHeader(data, hs); err != nil {
		return nil, err
	}
	if uint64(len(data)) > maxFile {
		return nil, corrupt("%d bytes; an index's offsets are 32 bits", len(data))
	}
	version := int(binary.BigEndian.Uint32(data[4:]))
	count := binary.BigEndian.Uint32(data[8:])
	body := data[:len(data)-hs]
	if most := (len(body) - headerSize) / minEntrySize(version, hs); uint64(count) > uint64(most) {
		return nil, corrupt("the header says %d entries; %d bytes hold at most %d", count, len(body)-headerSize, most)
	}
	p := &parser{data: body, version: version, hs: hs, off: headerSize, budget: PathExpansion * int64(len(data))}
	ix := &Index{
		Version:  version,
		HashSize: hs,
		Checksum: hex.EncodeToString(trailer(data, hs)),
		Entries:  make([]Entry, 0, count),
	}
	p.offsets = make([]uint32, 0, count)
	if version == 4 {
		p.kept = make([]uint32, 0, count)
	}
	prev := ""
	empty := 0
	for i := 0; i < int(count); i++ {
		e, err := p.entry(prev)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if e.Path == "" {
			empty++
		}
		ix.Entries = append(ix.Entries, e)
		prev = e.Path
	}
	if err := p.extensions(ix); err != nil {
		return nil, err
	}
	if ix.Shared == "" {
		if empty > 0 {
			return nil, corrupt("%d entries with an empty path in an index that is not split", empty)
		}
		if err := checkOrder(ix.Entries); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// entry parses the entry at p.off and moves past it. prev is the path of
// the entry before (version 4 compresses against it).
func (p *parser) entry(prev string) (Entry, error) {
	start := p.off
	d := p.data[start:]
	fixed := statSize + p.hs + 2
	if len(d) < fixed {
		return Entry{}, corrupt("at offset %d: %d bytes left, an entry needs at least %d", start, len(d), fixed)
	}
	be := binary.BigEndian
	e := Entry{
		Stat: Stat{
			CTimeSec: be.Uint32(d[0:]), CTimeNsec: be.Uint32(d[4:]),
			MTimeSec: be.Uint32(d[8:]), MTimeNsec: be.Uint32(d[12:]),
			Dev: be.Uint32(d[16:]), Ino: be.Uint32(d[20:]),
			UID: be.Uint32(d[28:]), GID: be.Uint32(d[32:]),
			Size: be.Uint32(d[36:]),
		},
		Mode: be.Uint32(d[24:]),
		OID:  hex.EncodeToString(d[statSize : statSize+p.hs]),
	}
	flags := be.Uint16(d[statSize+p.hs:])
	e.AssumeValid = flags&flagAssumeValid != 0
	e.Stage = int(flags&flagStageMask) >> flagStageShift
	nameLen := int(flags & flagNameMask)
	n := fixed
	if flags&flagExtended != 0 {
		// git reads the second flags word whatever the version (it only
		// writes one from version 3 on); so does this.
		if len(d) < n+2 {
			return Entry{}, corrupt("at offset %d: the extended flags run past the entries", start)
		}
		ext := be.Uint16(d[n:])
		if ext&^extKnown != 0 {
			return Entry{}, corrupt("at offset %d: extended flags 0x%04x hold bits git does not define", start, ext)
		}
		e.SkipWorktree = ext&extSkipWorktree != 0
		e.IntentToAdd = ext&extIntentToAdd != 0
		n += 2
	}
	p.offsets = append(p.offsets, uint32(start))
	var err error
	if p.version == 4 {
		e.Path, n, err = p.name4(d, n, nameLen, prev)
	} else {
		e.Path, n, err = p.name(d, n, nameLen)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("at offset %d: %w", start, err)
	}
	p.off += n
	return e, nil
}

// name reads a version 2 or 3 name at d[n:]: nameLen bytes (or, when
// nameLen is the 0xfff that stands for "as long or longer", up to the
// NUL), then 1 to 8 NULs to the next multiple of 8. It returns the path
// and the entry's whole size.
func (p *parser) name(d []byte, n, nameLen int) (string, int, error) {
	rest := d[n:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return "", 0, corrupt("the path has no NUL before the end of the entries")
	}
	if nameLen < flagNameMask && nul != nameLen {
		return "", 0, corrupt("the flags give the path %d bytes, it has %d before its NUL", nameLen, nul)
	}
	if nameLen == flagNameMask && nul < flagNameMask {
		return "", 0, corrupt("the flags say the path has at least %d bytes, it has %d", flagNameMask, nul)
	}
	size := (n + nul + 8) &^ 7
	if size > len(d) {
		return "", 0, corrupt("the padding after the path runs past the end of the entries")
	}
	if !zero(d[n+nul : size]) {
		return "", 0, corrupt("the padding after the path is not all NUL")
	}
	path, err := p.take(rest[:nul])
	return path, size, err
}

// name4 reads a version 4 name at d[n:]: a varint, how many bytes to
// drop from the end of prev, then the NUL-terminated rest of the path.
func (p *parser) name4(d []byte, n, nameLen int, prev string) (string, int, error) {
	strip, vn, err := varint(d[n:])
	if err != nil {
		return "", 0, err
	}
	if strip > uint64(len(prev)) {
		return "", 0, corrupt("the path drops %d bytes of the previous one, which has %d", strip, len(prev))
	}
	keep := len(prev) - int(strip)
	n += vn
	rest := d[n:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return "", 0, corrupt("the path has no NUL before the end of the entries")
	}
	total := keep + nul
	if nameLen < flagNameMask && total != nameLen {
		return "", 0, corrupt("the flags give the path %d bytes, it has %d", nameLen, total)
	}
	if nameLen == flagNameMask && total < flagNameMask {
		return "", 0, corrupt("the flags say the path has at least %d bytes, it has %d", flagNameMask, total)
	}
	if int64(total) > p.budget {
		return "", 0, corrupt("version 4 paths expand to more than %d times the file's size", PathExpansion)
	}
	p.budget -= int64(total)
	p.kept = append(p.kept, uint32(keep))
	return prev[:keep] + string(rest[:nul]), n + nul + 1, nil
}

// take copies a path, counting it against the budget.
func (p *parser) take(b []byte) (string, error) {
	if int64(len(b)) > p.budget {
		return "", corrupt("paths hold more than %d times the file's size", PathExpansion)
	}
	p.budget -= int64(len(b))
	return string(b), nil
}

// varint decodes git's offset varint (varint.c): big-endian groups of 7
// bits, each continuation adding one. It is an error past 64 bits or the
// end of b.
func varint(b []byte) (uint64, int, error) {
	var v uint64
	for i, c := range b {
		if i == 10 {
			break
		}
		if i > 0 {
			v++
			if v == 0 || v>>57 != 0 {
				return 0, 0, corrupt("a path length varint overflows")
			}
			v <<= 7
		}
		v |= uint64(c & 0x7f)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, corrupt("a path length varint runs past the end of the entries or overflows")
}

// checkOrder: the order git writes, sorted by path then stage; a path at
// stage 0 is there once, a conflicted path only at stages 1 to 3.
func checkOrder(es []Entry) error {
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		switch {
		case a.Path > b.Path:
			return corrupt("entries %d and %d are not sorted by path", i-1, i)
		case a.Path < b.Path:
		case a.Stage == 0 || b.Stage == 0:
			return corrupt("entries %d and %d: path %q at stage %d and %d", i-1, i, a.Path, a.Stage, b.Stage)
		case a.Stage >= b.Stage:
			return corrupt("entries %d and %d: path %q at stage %d, then %d", i-1, i, a.Path, a.Stage, b.Stage)
		}
	}
	return nil
}

// extensions reads what follows the entries up to the checksum: each an
// eight-byte header (signature, size) and its data. An optional extension
// (signature starting 'A' to 'Z') is skipped; of the required ones (any
// other) only "link" and "sdir" exist, and any other is an error, as it
// is for git.
func (p *parser) extensions(ix *Index) error {
	for p.off < len(p.data) {
		d := p.data[p.off:]
		if len(d) < 8 {
			return corrupt("%d bytes after the last extension, too few for an extension header", len(d))
		}
		sig := string(d[:4])
		size := binary.BigEndian.Uint32(d[4:])
		if uint64(size) > uint64(len(d)-8) {
			return corrupt("extension %q at offset %d has %d bytes, only %d are left", sig, p.off, size, len(d)-8)
		}
		body := d[8 : 8+int(size)]
		switch {
		case sig == "link":
			if ix.Shared != "" {
				return corrupt("two link extensions")
			}
			l, err := readLink(body, p.hs)
			if err != nil {
				return err
			}
			if l != nil {
				ix.Shared, ix.link = l.base, l
			}
		case sig == "sdir":
		case sig == "IEOT":
			if err := p.checkIEOT(body); err != nil {
				return err
			}
		case sig[0] < 'A' || sig[0] > 'Z':
			return corrupt("required extension %q, which git does not define", sig)
		}
		ix.Extensions = append(ix.Extensions, sig)
		p.off += 8 + int(size)
	}
	return nil
}

// checkIEOT checks the index entry offset table, which lets git load the
// entries in blocks on several threads: each block must start at an
// entry, the blocks must cover the entries in order, and (version 4) an
// entry that starts a block must not use the one before it, which a
// block's loader does not have. Otherwise git would read other paths
// depending on how many threads it uses.
func (p *parser) checkIEOT(b []byte) error {
	if len(b) < 4 || (len(b)-4)%8 != 0 {
		return corrupt("IEOT extension of %d bytes", len(b))
	}
	if v := binary.BigEndian.Uint32(b); v != 1 {
		return corrupt("IEOT extension version %d", v)
	}
	next := 0 // index of the entry the next block must start at
	for b = b[4:]; len(b) > 0; b = b[8:] {
		off := binary.BigEndian.Uint32(b)
		nr := binary.BigEndian.Uint32(b[4:])
		if next >= len(p.offsets) || p.offsets[next] != off {
			return corrupt("IEOT block at offset %d does not start at entry %d", off, next)
		}
		if p.version == 4 && next > 0 && p.kept[next] != 0 {
			return corrupt("IEOT block at entry %d starts with a path that keeps part of the one before", next)
		}
		if uint64(nr) > uint64(len(p.offsets)-next) {
			return corrupt("IEOT block at entry %d has %d entries, %d are left", next, nr, len(p.offsets)-next)
		}
		next += int(nr)
	}
	if next != len(p.offsets) {
		return corrupt("IEOT blocks cover %d of %d entries", next, len(p.offsets))
	}
	return nil
}
