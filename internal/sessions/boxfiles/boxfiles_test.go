package boxfiles

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"CLAUDE.md", true},
		{".claude/skills/x/SKILL.md", true},
		{"a b/ü.md", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../b", false},
		{"a/./b", false},
		{"a//b", false},
		{"a/", false},
		{".", false},
		{"..", false},
		{"a\nb", false},
		{"a\x00b", false},
		{`a\b`, false},
		{"\xff", false},
		{"a.paddock-tmp", false},
		{strings.Repeat("a", 1025), false},
	} {
		if err := CheckPath(tc.p); (err == nil) != tc.ok {
			t.Errorf("CheckPath(%.30q): %v, want ok %v", tc.p, err, tc.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	f := func(p string) File { return File{Path: p, Mode: 0o644, Data: []byte("x")} }
	for _, tc := range []struct {
		name  string
		files []File
		max   int64
		ok    bool
	}{
		{"fine", []File{f("a/b"), f("a/c"), f("d")}, 10, true},
		{"twice", []File{f("a"), f("a")}, 10, false},
		{"file where a dir is needed", []File{f("a"), f("a/b")}, 10, false},
		{"over the cap", []File{f("a"), f("b")}, 1, false},
		{"bad mode", []File{{Path: "a", Mode: 0o4755}}, 10, false},
		{"world-writable", []File{{Path: "a", Mode: 0o666}}, 10, false},
	} {
		if err := Check(tc.files, tc.max); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestPackUnpack: what Pack writes, Unpack puts in place with its modes,
// replacing a file and a symlink that were there (not writing through it).
func TestPackUnpack(t *testing.T) {
	files := []File{
		{Path: ".claude/CLAUDE.md", Mode: 0o644, Data: []byte("be brief\n")},
		{Path: ".claude/plugins/p/run.sh", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
		{Path: ".cache/paddock/first-prompt", Mode: 0o600, Data: []byte("task")},
		{Path: ".gitconfig", Mode: 0o644, Data: []byte("[user]\n")},
		{Path: "empty", Mode: 0o644},
		{Path: "bin", Mode: 0o644, Data: []byte{0, 1, 2, 0}},
	}
	b, err := Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].Data == nil {
			got[i].Data = nil
		}
	}
	if len(got) != len(files) {
		t.Fatalf("read %d files", len(got))
	}
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("untouched"), 0o644)
	os.Symlink(outside, filepath.Join(root, ".gitconfig"))
	os.MkdirAll(filepath.Join(root, ".claude"), 0o755)
	os.WriteFile(filepath.Join(root, ".claude/CLAUDE.md"), []byte("old"), 0o600)
	if err := Unpack(bytes.NewReader(b), root); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(root, f.Path)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != f.Mode {
			t.Fatalf("%s: %v %v", f.Path, fi.Mode(), err)
		}
		if d, _ := os.ReadFile(p); !bytes.Equal(d, f.Data) {
			t.Fatalf("%s: %q", f.Path, d)
		}
	}
	if d, _ := os.ReadFile(outside); string(d) != "untouched" {
		t.Fatal("wrote through a symlink")
	}
	if m, _ := filepath.Glob(filepath.Join(root, "*"+tmpSuffix)); len(m) != 0 {
		t.Fatal(m)
	}
}

// badTar writes one header (and its data) as a tar stream.
func badTar(t testing.TB, h *tar.Header, data string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h.Size = int64(len(data))
	if h.Typeflag != tar.TypeReg {
		h.Size = 0
		data = ""
	}
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(data))
	tw.Close()
	return buf.Bytes()
}

// badStreams are streams Read refuses; shared with the fuzz target's seeds.
func badStreams(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"symlink":  badTar(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "a", Linkname: "/etc/passwd", Mode: 0o644}, ""),
		"hardlink": badTar(t, &tar.Header{Typeflag: tar.TypeLink, Name: "a", Linkname: "/etc/passwd", Mode: 0o644}, ""),
		"dir":      badTar(t, &tar.Header{Typeflag: tar.TypeDir, Name: "a/", Mode: 0o755}, ""),
		"dotdot":   badTar(t, &tar.Header{Typeflag: tar.TypeReg, Name: "../a", Mode: 0o644}, "x"),
		"absolute": badTar(t, &tar.Header{Typeflag: tar.TypeReg, Name: "/tmp/a", Mode: 0o644}, "x"),
		"setuid":   badTar(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o4755}, "x"),
		"fifo":     badTar(t, &tar.Header{Typeflag: tar.TypeFifo, Name: "a", Mode: 0o644}, ""),
		"cut":      badTar(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644}, "xxxxxxxxxxxx")[:518], // inside the data
		"garbage":  []byte("not a tar stream at all, but long enough to be read as a header block ............" + strings.Repeat("z", 600)),
	}
}

// TestReadRefuses: a stream that breaks a rule is refused whole, and
// Unpack writes nothing of it.
func TestReadRefuses(t *testing.T) {
	for name, b := range badStreams(t) {
		root := t.TempDir()
		if err := Unpack(bytes.NewReader(b), root); err == nil {
			t.Errorf("%s: unpacked", name)
		}
		if ents, _ := os.ReadDir(root); len(ents) != 0 {
			t.Errorf("%s: wrote %v", name, ents)
		}
	}
	// A good file and then a bad one: nothing written either.
	good, _ := Pack([]File{{Path: "good", Mode: 0o644, Data: []byte("x")}})
	good = good[:len(good)-1024] // drop the end-of-archive blocks
	root := t.TempDir()
	if err := Unpack(bytes.NewReader(append(good, badStreams(t)["symlink"]...)), root); err == nil {
		t.Fatal("unpacked")
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("wrote %v", ents)
	}
}

// FuzzRead: whatever the bytes, Read does not panic, and what it accepts
// is a set Check accepts and Pack writes again to the same files.
func FuzzRead(f *testing.F) {
	for _, b := range badStreams(f) {
		f.Add(b)
	}
	good, _ := Pack([]File{{Path: "a/b", Mode: 0o755, Data: []byte("#!/bin/sh\n")}, {Path: "c", Mode: 0o600}})
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		if err := Check(files, MaxStream); err != nil {
			t.Fatalf("Read accepted what Check refuses: %v", err)
		}
		again, err := Pack(files)
		if err != nil {
			t.Fatal(err)
		}
		files2, err := Read(bytes.NewReader(again))
		if err != nil {
			t.Fatal(err)
		}
		norm := func(fs []File) []File {
			for i := range fs {
				if len(fs[i].Data) == 0 {
					fs[i].Data = nil
				}
			}
			return fs
		}
		if !reflect.DeepEqual(norm(files), norm(files2)) {
			t.Fatal("round trip changed the files")
		}
		for _, f := range files {
			if f.Mode&^fs.FileMode(0o777) != 0 {
				t.Fatalf("mode %v", f.Mode)
			}
		}
	})
}
