package gitindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// handEntry encodes one on-disk entry: zero stat data, the object id
// filled with b, the flags word (the name length added) and, where ext
// is not 0, the extended flags word. For version 4 the path is written
// as what it does not share with prev, the previous entry's.
func handEntry(version, hs int, path, prev string, flags, ext uint16, b byte) []byte {
	out := make([]byte, 40, 40+hs+4+len(path)+8)
	binary.BigEndian.PutUint32(out[24:], 0o100644)
	out = append(out, bytes.Repeat([]byte{b}, hs)...)
	flags |= uint16(min(len(path), 0xfff))
	if ext != 0 {
		flags |= 0x4000
	}
	out = binary.BigEndian.AppendUint16(out, flags)
	if ext != 0 {
		out = binary.BigEndian.AppendUint16(out, ext)
	}
	if version == 4 {
		common := 0
		for common < len(path) && common < len(prev) && path[common] == prev[common] {
			common++
		}
		out = append(out, byte(len(prev)-common)) // a varint, below 128 here
		return append(append(out, path[common:]...), 0)
	}
	out = append(out, path...)
	return append(out, make([]byte, 8-len(out)%8)...)
}

// handIndex is the header, the entries and the extensions, and the
// checksum (all zeros with zeroSum, as index.skipHash writes).
func handIndex(version, hs, count int, zeroSum bool, parts ...[]byte) []byte {
	body := []byte("DIRC")
	body = binary.BigEndian.AppendUint32(body, uint32(version))
	body = binary.BigEndian.AppendUint32(body, uint32(count))
	body = append(body, bytes.Join(parts, nil)...)
	if zeroSum {
		return append(body, make([]byte, hs)...)
	}
	return sum(body, hs)
}

// ewahBytes serializes an EWAH bitmap as git's ewah_io.c does.
func ewahBytes(words ...uint64) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(64*len(words)))
	out = binary.BigEndian.AppendUint32(out, uint32(len(words)))
	for _, w := range words {
		out = binary.BigEndian.AppendUint64(out, w)
	}
	return binary.BigEndian.AppendUint32(out, 0)
}

// extension is an extension's header and data.
func extension(sig string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32([]byte(sig), uint32(len(data)))
	return append(out, data...)
}

// handSplit is a split index, made by hand, and its shared index: the
// shared one holds a and b, the split one replaces b (skip-worktree) and
// adds c.
func handSplit() (split, shared []byte) {
	shared = handIndex(2, SHA1Size, 2, false,
		handEntry(2, SHA1Size, "a", "", 0, 0, 1), handEntry(2, SHA1Size, "b", "", 0, 0, 2))
	base := shared[len(shared)-SHA1Size:]
	link := append(bytes.Clone(base), ewahBytes(1<<33, 0)...)
	link = append(link, ewahBytes(1<<33, 1<<1)...)
	split = handIndex(3, SHA1Size, 2, false,
		handEntry(3, SHA1Size, "", "", 0, 0x4000, 3), handEntry(3, SHA1Size, "c", "", 0, 0, 4),
		extension("link", link))
	return split, shared
}

// handSeeds are indexes made by hand, for when git is missing and for
// the corners git rarely writes.
func handSeeds() [][]byte {
	split, shared := handSplit()
	return [][]byte{
		handIndex(2, SHA1Size, 0, false),
		handIndex(4, SHA256Size, 0, false),
		handIndex(2, SHA1Size, 0, true),
		handIndex(2, SHA1Size, 1, false, handEntry(2, SHA1Size, "a", "", 0x8000, 0, 0xab)),
		handIndex(3, SHA1Size, 2, true, handEntry(3, SHA1Size, "a", "", 0, 0x4000, 1), handEntry(3, SHA1Size, "b", "", 0x1000, 0x2000, 2)),
		handIndex(4, SHA256Size, 2, false, handEntry(4, SHA256Size, "dir/a", "", 0, 0x4000, 1), handEntry(4, SHA256Size, "dir/b", "dir/a", 0x8000, 0, 2)),
		handIndex(2, SHA1Size, 0, false, extension("TREE", []byte("\x00-1 0\n")), extension("sdir", nil)),
		split,
		shared,
		[]byte("DIRC"),
	}
}

// gitSeeds are indexes the real git writes: versions 2 to 4, SHA-1 and
// SHA-256, the offset table, a conflict, a sparse index, and split
// indexes as (split, shared) pairs. Without git there are none.
func gitSeeds(tb testing.TB) (files [][]byte, pairs [][2][]byte) {
	if _, err := exec.LookPath("git"); err != nil {
		tb.Log("git is not installed: hand-made seeds only")
		return nil, nil
	}
	for _, format := range []string{"sha1", "sha256"} {
		r := newRepo(tb, "--object-format="+format)
		for _, f := range []string{"a", "b", "dir/c", "dir/d"} {
			r.write(f, f+"\n", 0o644)
		}
		r.git("add", ".")
		r.git("commit", "-q", "-m", "x")
		r.git("update-index", "--assume-unchanged", "a")
		files = append(files, r.index())
		r.git("update-index", "--skip-worktree", "dir/c")
		r.write("e", "e\n", 0o644)
		r.git("add", "-N", "e")
		files = append(files, r.index())
		r.git("-c", "index.recordOffsetTable=true", "-c", "index.recordEndOfIndexEntries=true", "-c", "index.threads=2",
			"update-index", "--index-version", "4")
		files = append(files, r.index())
	}
	// No seed with a path longer than 0xfff: the fuzzer's minimizing of
	// what it finds is quadratic in the input's size, and 4 KiB seeds
	// would spend the fuzzing time there. TestRealIndexes covers them.
	r := newRepo(tb)
	r.write("f", "base\n", 0o644)
	r.git("add", "f")
	r.git("commit", "-q", "-m", "base")
	r.git("checkout", "-q", "-b", "other")
	r.write("f", "other\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "other")
	r.git("checkout", "-q", "main")
	r.write("f", "main\n", 0o644)
	r.git("commit", "-q", "-a", "-m", "main")
	if _, err := r.run(nil, "", "merge", "-q", "other"); err == nil {
		tb.Fatal("the merge did not conflict")
	}
	files = append(files, r.index())

	r = newRepo(tb)
	for _, f := range []string{"in/a", "out/b", "top"} {
		r.write(f, f+"\n", 0o644)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "x")
	if _, err := r.run(nil, "", "sparse-checkout", "set", "--cone", "--sparse-index", "in"); err == nil {
		files = append(files, r.index())
	}

	for _, version := range []int{3, 4} {
		r := splitRepo(tb, version, 6)
		split := r.index()
		ix, err := Parse(split)
		if err != nil {
			tb.Fatal(err)
		}
		shared := r.read("sharedindex." + ix.Shared)
		files = append(files, split, shared)
		pairs = append(pairs, [2][]byte{split, shared})
	}
	return files, pairs
}

// TestHandSeeds proves the hand-made seeds are the indexes they are
// meant to be (each but the last parses), and the hand-made split index,
// with its EWAH bitmaps serialized as git does, merges to a, b
// (replaced: skip-worktree) and c.
func TestHandSeeds(t *testing.T) {
	seeds := handSeeds()
	for i, s := range seeds[:len(seeds)-1] {
		if _, err := Parse(s); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
	if _, err := Parse(seeds[len(seeds)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("the last seed: %v, want ErrCorrupt", err)
	}
	split, shared := handSplit()
	s, sh := mustParse(t, split), mustParse(t, shared)
	m, err := s.Merge(sh)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paths(m.Entries), []string{"a", "b", "c"}) || !slices.Equal(paths(m.Hidden()), []string{"b"}) ||
		m.Entries[1].OID != strings.Repeat("03", SHA1Size) {
		t.Errorf("merged %+v", m.Entries)
	}
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkIndex checks what must hold of any index Parse returns.
func checkIndex(t *testing.T, ix *Index) {
	t.Helper()
	hs := ix.HashSize
	if ix.Version < 2 || ix.Version > 4 || hs != SHA1Size && hs != SHA256Size || !isHex(ix.Checksum, 2*hs) {
		t.Fatalf("version %d, hash size %d, checksum %q", ix.Version, hs, ix.Checksum)
	}
	if (ix.Shared != "") != (ix.link != nil) || ix.Shared != "" && !isHex(ix.Shared, 2*hs) {
		t.Fatalf("shared %q, link %v", ix.Shared, ix.link)
	}
	hidden := 0
	for i, e := range ix.Entries {
		if !isHex(e.OID, 2*hs) || e.Stage < 0 || e.Stage > 3 {
			t.Fatalf("entry %d: object id %q, stage %d", i, e.OID, e.Stage)
		}
		if e.Path == "" && ix.Shared == "" {
			t.Fatalf("entry %d has no path in an index that is not split", i)
		}
		if e.Hidden() {
			hidden++
		}
	}
	if ix.Shared == "" {
		if err := checkOrder(ix.Entries); err != nil {
			t.Fatalf("Parse returned entries out of order: %v", err)
		}
	}
	if len(ix.Hidden()) != hidden {
		t.Fatalf("Hidden returns %d entries of %d hidden", len(ix.Hidden()), hidden)
	}
	for _, x := range ix.Extensions {
		if len(x) != 4 {
			t.Fatalf("extension %q", x)
		}
	}
}

// checkParse parses data with the hash told from the file and with each
// hash named: no panic; an error wraps ErrCorrupt (so ErrInvalid) and
// comes with no index; an index passes checkIndex, parses again to the
// same, and parses to the same with its hash named. data is not changed.
func checkParse(t *testing.T, data []byte) {
	t.Helper()
	orig := bytes.Clone(data)
	for _, o := range []Options{{}, {HashSize: SHA1Size}, {HashSize: SHA256Size}} {
		ix, err := o.Parse(data)
		if err != nil {
			if ix != nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%+v: %v (index %v), want ErrCorrupt and no index", o, err, ix)
			}
			continue
		}
		checkIndex(t, ix)
		if o.HashSize != 0 && ix.HashSize != o.HashSize {
			t.Fatalf("%+v: hash size %d", o, ix.HashSize)
		}
		again, err := o.Parse(data)
		if err != nil || !reflect.DeepEqual(again, ix) {
			t.Fatalf("%+v: parsing again gives %v", o, err)
		}
		if o.HashSize == 0 {
			named, err := Options{HashSize: ix.HashSize}.Parse(data)
			if err != nil || !reflect.DeepEqual(named, ix) {
				t.Fatalf("naming the hash found (%d) gives %v", ix.HashSize, err)
			}
		}
	}
	if !bytes.Equal(data, orig) {
		t.Fatal("Parse changed its input")
	}
}

// FuzzParse proves Parse total and deterministic on any bytes (see
// checkParse), on the bytes as given (almost always a checksum error)
// and with the checksum made right for them, SHA-1 and SHA-256, so that
// the fuzzer reaches the entries and extensions. The seeds are indexes
// real git writes, and some made by hand.
func FuzzParse(f *testing.F) {
	for _, s := range handSeeds() {
		f.Add(s)
	}
	files, _ := gitSeeds(f)
	for _, s := range files {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
		for _, hs := range []int{SHA1Size, SHA256Size} {
			if len(data) >= hs {
				checkParse(t, resum(data, hs))
			}
		}
	})
}

// FuzzMerge proves Merge total on any pair of split and shared index
// (each given its right SHA-1 checksum, and the shared one taken as the
// one the split one names): no panic; an error wraps ErrCorrupt; on
// success the result is not split, sorted by path and stage, has no
// entry without a path nor more entries than its inputs, every entry is
// one of theirs (its path aside), a second Merge gives the same, and the
// inputs are not changed.
func FuzzMerge(f *testing.F) {
	split, shared := handSplit()
	f.Add(split, shared)
	_, pairs := gitSeeds(f)
	for _, p := range pairs {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, splitData, sharedData []byte) {
		if len(splitData) < SHA1Size || len(sharedData) < SHA1Size {
			return
		}
		o := Options{HashSize: SHA1Size}
		split, err := o.Parse(resum(splitData, SHA1Size))
		if err != nil || split.Shared == "" {
			return
		}
		shared, err := o.Parse(resum(sharedData, SHA1Size))
		if err != nil {
			return
		}
		// The fuzzer cannot forge the hash that names the shared index;
		// TestSplitIndex proves Merge requires it.
		shared.Checksum = split.Shared
		splitEntries, sharedEntries := slices.Clone(split.Entries), slices.Clone(shared.Entries)
		merged, err := split.Merge(shared)
		if err != nil {
			if merged != nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v (index %v), want ErrCorrupt and no index", err, merged)
			}
			return
		}
		if merged.Shared != "" || merged.link != nil || merged.HashSize != split.HashSize || merged.Version != split.Version {
			t.Fatalf("merged: %+v", merged)
		}
		if len(merged.Entries) > len(split.Entries)+len(shared.Entries) {
			t.Fatalf("%d entries from %d and %d", len(merged.Entries), len(split.Entries), len(shared.Entries))
		}
		from := map[Entry]bool{}
		for _, e := range slices.Concat(split.Entries, shared.Entries) {
			e.Path = ""
			from[e] = true
		}
		for i, e := range merged.Entries {
			if e.Path == "" {
				t.Fatalf("merged entry %d has no path", i)
			}
			if i > 0 {
				p := merged.Entries[i-1]
				if p.Path > e.Path || p.Path == e.Path && p.Stage > e.Stage {
					t.Fatalf("merged entries %d and %d out of order", i-1, i)
				}
			}
			e.Path = ""
			if !from[e] {
				t.Fatalf("merged entry %d is none of the inputs'", i)
			}
		}
		again, err := split.Merge(shared)
		if err != nil || !reflect.DeepEqual(again, merged) {
			t.Fatalf("a second Merge gives %v", err)
		}
		if !reflect.DeepEqual(split.Entries, splitEntries) || !reflect.DeepEqual(shared.Entries, sharedEntries) {
			t.Fatal("Merge changed its inputs")
		}
	})
}
