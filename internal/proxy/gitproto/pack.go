package gitproto

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// Limits of ReadCommits, against a pack made to exhaust the reader.
const (
	MaxPackObjects = 10_000_000
	MaxCommitBytes = 4 << 20   // one commit's text
	MaxAllCommits  = 256 << 20 // the text of every commit kept, together
)

// Object types in a pack.
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

var typeNames = map[int]string{objCommit: "commit", objTree: "tree", objBlob: "blob", objTag: "tag"}

// Graph is the commits a pack carries: each one's id (computed here from
// its bytes, so it is the id the server will give it) and its parents.
type Graph map[string][]string

// countingReader counts the bytes taken from r, hashes them, and is a
// flate.Reader (a ByteReader), so zlib reads exactly its stream from it
// and nothing past.
type countingReader struct {
	r *bufio.Reader
	n int64
	h hash.Hash
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
		c.h.Write([]byte{b})
	}
	return b, err
}

// object is what ReadCommits keeps of an object, by its offset.
type object struct {
	typ  int    // resolved type; 0 when a delta's base is not in the pack
	text []byte // commits only
}

// ReadCommits reads a pack (version 2 or 3) to its end and returns the
// commits in it. Deltas between commits in the pack are resolved; a delta
// on an object the pack does not carry (a thin pack's base on the server)
// is taken to be no commit: pack-objects bases thin deltas on the trees
// and blobs of the edge commits only, and a commit missed this way can
// only make a push look like less of a fast-forward than it is, never
// more. The pack's trailing checksum is checked.
func ReadCommits(r io.Reader) (Graph, error) {
	cr := &countingReader{r: bufio.NewReaderSize(r, 64<<10), h: sha1.New()}
	var hdr [12]byte
	if _, err := io.ReadFull(cr, hdr[:]); err != nil {
		return nil, fmt.Errorf("the pack ends in its header: %w", ErrMalformed)
	}
	if string(hdr[:4]) != "PACK" {
		return nil, fmt.Errorf("the data after the commands is not a pack: %w", ErrMalformed)
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return nil, fmt.Errorf("pack version %d: %w", v, ErrMalformed)
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	if count > MaxPackObjects {
		return nil, fmt.Errorf("a pack of %d objects is over the %d this proxy reads: %w", count, MaxPackObjects, ErrMalformed)
	}
	g := Graph{}
	byOffset := map[int64]*object{}
	byID := map[string]*object{}
	kept := 0
	for i := uint32(0); i < count; i++ {
		off := cr.n
		typ, size, err := readObjectHeader(cr)
		if err != nil {
			return nil, err
		}
		var base *object
		switch typ {
		case objCommit, objTree, objBlob, objTag:
		case objOfsDelta:
			d, err := readOfs(cr)
			if err != nil {
				return nil, err
			}
			if d <= 0 || d > off {
				return nil, fmt.Errorf("a delta's base offset is outside the pack: %w", ErrMalformed)
			}
			if base = byOffset[off-d]; base == nil {
				return nil, fmt.Errorf("a delta's base offset is not an object's: %w", ErrMalformed)
			}
		case objRefDelta:
			var id [20]byte
			if _, err := io.ReadFull(cr, id[:]); err != nil {
				return nil, fmt.Errorf("the pack ends in a delta's base id: %w", ErrMalformed)
			}
			base = byID[hex.EncodeToString(id[:])]
			if base == nil {
				base = &object{} // a thin pack's base: not in the pack
			}
		default:
			return nil, fmt.Errorf("object type %d: %w", typ, ErrMalformed)
		}
		obj := &object{typ: typ}
		if base != nil {
			obj.typ = base.typ
		}
		wantText := obj.typ == objCommit
		limit := int64(-1)
		if wantText || base != nil && base.typ == objCommit {
			limit = MaxCommitBytes
		}
		if size > MaxCommitBytes && limit >= 0 {
			return nil, fmt.Errorf("a commit of %d bytes is over %d: %w", size, MaxCommitBytes, ErrMalformed)
		}
		var content []byte
		var sum []byte
		if base == nil {
			content, sum, err = inflate(cr, size, typeNames[typ], wantText)
		} else {
			content, _, err = inflate(cr, size, "", base.typ == objCommit)
		}
		if err != nil {
			return nil, err
		}
		if base != nil && base.typ == objCommit {
			if content, err = applyDelta(base.text, content); err != nil {
				return nil, err
			}
			h := sha1.New()
			h.Write([]byte("commit " + strconv.Itoa(len(content)) + "\x00"))
			h.Write(content)
			sum = h.Sum(nil)
		}
		if obj.typ == objCommit {
			if kept += len(content); kept > MaxAllCommits {
				return nil, fmt.Errorf("the commits of this pack are over %d bytes: %w", MaxAllCommits, ErrMalformed)
			}
			obj.text = content
			id := hex.EncodeToString(sum)
			parents, err := commitParents(content)
			if err != nil {
				return nil, err
			}
			g[id] = parents
		}
		byOffset[off] = obj
		if sum != nil {
			byID[hex.EncodeToString(sum)] = obj
		}
	}
	want := cr.h.Sum(nil)
	var trailer [20]byte
	if _, err := io.ReadFull(cr.r, trailer[:]); err != nil {
		return nil, fmt.Errorf("the pack ends before its checksum: %w", ErrMalformed)
	}
	if !bytes.Equal(trailer[:], want) {
		return nil, fmt.Errorf("the pack's checksum does not match its bytes: %w", ErrMalformed)
	}
	if _, err := cr.r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("bytes after the pack's checksum: %w", ErrMalformed)
	}
	return g, nil
}

func readObjectHeader(r io.ByteReader) (typ int, size int64, err error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, 0, fmt.Errorf("the pack ends before its last object: %w", ErrMalformed)
	}
	typ = int(c>>4) & 7
	size = int64(c & 15)
	shift := 4
	for c&0x80 != 0 {
		if c, err = r.ReadByte(); err != nil {
			return 0, 0, fmt.Errorf("the pack ends in an object's header: %w", ErrMalformed)
		}
		if shift > 56 {
			return 0, 0, fmt.Errorf("an object's size overflows: %w", ErrMalformed)
		}
		size |= int64(c&0x7f) << shift
		shift += 7
	}
	return typ, size, nil
}

func readOfs(r io.ByteReader) (int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("the pack ends in a delta's offset: %w", ErrMalformed)
	}
	ofs := int64(c & 0x7f)
	for c&0x80 != 0 {
		if c, err = r.ReadByte(); err != nil {
			return 0, fmt.Errorf("the pack ends in a delta's offset: %w", ErrMalformed)
		}
		if ofs > 1<<55 {
			return 0, fmt.Errorf("a delta's offset overflows: %w", ErrMalformed)
		}
		ofs = (ofs+1)<<7 | int64(c&0x7f)
	}
	return ofs, nil
}

// inflate reads one zlib stream of size bytes, keeping them if keep, and
// with a type name hashing them as a git object.
func inflate(r *countingReader, size int64, typeName string, keep bool) (content, sum []byte, err error) {
	z, err := zlib.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("an object's data is not zlib: %w", ErrMalformed)
	}
	var h hash.Hash
	var w []io.Writer
	if typeName != "" {
		h = sha1.New()
		h.Write([]byte(typeName + " " + strconv.FormatInt(size, 10) + "\x00"))
		w = append(w, h)
	}
	var buf bytes.Buffer
	if keep {
		w = append(w, &buf)
	}
	n, err := io.Copy(io.MultiWriter(append(w, io.Discard)...), io.LimitReader(z, size+1))
	if err != nil {
		return nil, nil, fmt.Errorf("an object's data: %v: %w", err, ErrMalformed)
	}
	if n != size {
		return nil, nil, fmt.Errorf("an object's data is %d bytes, its header says %d: %w", n, size, ErrMalformed)
	}
	// The stream's end (and its checksum) must come now.
	if k, err := z.Read(make([]byte, 1)); k != 0 || !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("an object's zlib stream does not end with its data: %w", ErrMalformed)
	}
	if h != nil {
		sum = h.Sum(nil)
	}
	return buf.Bytes(), sum, nil
}

func readVarint(b []byte) (uint64, []byte, error) {
	var v uint64
	for shift := 0; ; shift += 7 {
		if len(b) == 0 || shift > 63 {
			return 0, nil, fmt.Errorf("a delta's size is cut short: %w", ErrMalformed)
		}
		c := b[0]
		b = b[1:]
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, b, nil
		}
	}
}

// applyDelta applies a git delta to base.
func applyDelta(base, delta []byte) ([]byte, error) {
	bsize, d, err := readVarint(delta)
	if err != nil {
		return nil, err
	}
	rsize, d, err := readVarint(d)
	if err != nil {
		return nil, err
	}
	if bsize != uint64(len(base)) {
		return nil, fmt.Errorf("a delta for a base of %d bytes applied to one of %d: %w", bsize, len(base), ErrMalformed)
	}
	if rsize > MaxCommitBytes {
		return nil, fmt.Errorf("a delta makes a commit of %d bytes, over %d: %w", rsize, MaxCommitBytes, ErrMalformed)
	}
	out := make([]byte, 0, rsize)
	for len(d) > 0 {
		cmd := d[0]
		d = d[1:]
		switch {
		case cmd&0x80 != 0:
			var off, n uint64
			for i := 0; i < 4; i++ {
				if cmd&(1<<i) != 0 {
					if len(d) == 0 {
						return nil, fmt.Errorf("a delta's copy is cut short: %w", ErrMalformed)
					}
					off |= uint64(d[0]) << (8 * i)
					d = d[1:]
				}
			}
			for i := 0; i < 3; i++ {
				if cmd&(0x10<<i) != 0 {
					if len(d) == 0 {
						return nil, fmt.Errorf("a delta's copy is cut short: %w", ErrMalformed)
					}
					n |= uint64(d[0]) << (8 * i)
					d = d[1:]
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || uint64(len(out))+n > rsize {
				return nil, fmt.Errorf("a delta copies outside its base: %w", ErrMalformed)
			}
			out = append(out, base[off:off+n]...)
		case cmd != 0:
			if int(cmd) > len(d) || uint64(len(out))+uint64(cmd) > rsize {
				return nil, fmt.Errorf("a delta's insert is cut short: %w", ErrMalformed)
			}
			out = append(out, d[:cmd]...)
			d = d[cmd:]
		default:
			return nil, fmt.Errorf("a delta's reserved opcode 0: %w", ErrMalformed)
		}
	}
	if uint64(len(out)) != rsize {
		return nil, fmt.Errorf("a delta made %d bytes, it says %d: %w", len(out), rsize, ErrMalformed)
	}
	return out, nil
}

// commitParents reads the parent lines of a commit's header.
func commitParents(text []byte) ([]string, error) {
	var parents []string
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			i = len(text)
		}
		line := text[:i]
		if len(line) == 0 {
			break // the end of the header
		}
		if p, ok := bytes.CutPrefix(line, []byte("parent ")); ok {
			if !isOID(string(p)) {
				return nil, fmt.Errorf("a commit's parent is not an object id: %w", ErrMalformed)
			}
			parents = append(parents, string(p))
		}
		if i == len(text) {
			break
		}
		text = text[i+1:]
	}
	return parents, nil
}

// FastForward reports whether new descends from old through the commits
// of g: a walk back from new that reaches old. A commit not in g (one the
// server already has) ends its path: a fast-forward that this pack alone
// cannot show is reported as none.
func (g Graph) FastForward(old, new string) bool {
	if old == new {
		return true
	}
	seen := map[string]bool{new: true}
	queue := []string{new}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, p := range g[c] {
			if p == old {
				return true
			}
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return false
}
