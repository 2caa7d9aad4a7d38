package portable

import (
	"bytes"
	"errors"
	"io"
	"sort"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// FuzzRead feeds any bytes to the importer's parser, seeded with a good
// file and every hostile one of TestHostileFilesRefused. Read must never
// panic; it refuses with ErrInvalid; and what it accepts keeps every
// rule: paths that travel, within the limits, no credential-shaped
// string, and it writes again into a file Read accepts with the same
// files.
func FuzzRead(f *testing.F) {
	f.Add(write(f, sample()))
	f.Add(craft(f, good(), nil))
	for _, tc := range hostile(f) {
		f.Add(tc.file)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, notes, err := Read(bytes.NewReader(data), small)
		if err != nil {
			if a != nil || notes != nil {
				t.Fatal("an archive came back with the error")
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("not ErrInvalid: %v", err)
			}
			return
		}
		var total int64
		for _, fl := range a.Files {
			if err := CheckClaudePath(fl.Path); err != nil {
				t.Fatalf("accepted path: %v", err)
			}
			if _, n := Redact(fl.Data); n > 0 {
				t.Fatalf("%s keeps a credential-shaped string", fl.Path)
			}
			total += int64(len(fl.Data))
		}
		if total > small.MaxTotal || len(a.Files) > small.MaxEntries {
			t.Fatalf("over the limits: %d bytes, %d files", total, len(a.Files))
		}
		var buf bytes.Buffer
		if err := Write(&buf, a); err != nil {
			t.Fatalf("what Read accepted does not write: %v", err)
		}
		b, _, err := Read(&buf, Limits{})
		if err != nil {
			t.Fatalf("what Read accepted, written, is refused: %v", err)
		}
		if len(b.Files) != len(a.Files) {
			t.Fatalf("round trip: %d files, then %d", len(a.Files), len(b.Files))
		}
		byPath := func(fs []File) { sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path }) }
		byPath(a.Files)
		byPath(b.Files)
		for i := range a.Files {
			if a.Files[i].Path != b.Files[i].Path || !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
				t.Fatalf("round trip changed %s", a.Files[i].Path)
			}
		}
	})
}

// FuzzConversationCheck: a conversation from a create request is checked
// without panicking, and one that passes lands under projects/ only.
func FuzzConversationCheck(f *testing.F) {
	f.Add(conv, conv+".jsonl", []byte(`{"type":"user"}`+"\n"))
	f.Add(conv, conv+"/../x", []byte(`{"type":"user"}`))
	f.Add("x", "x.jsonl", []byte("nope"))
	f.Fuzz(func(t *testing.T, id, p string, data []byte) {
		c := Conversation{ID: id, Files: []File{{Path: p, Data: data}}}
		if c.Check() != nil {
			return
		}
		files, _ := c.ClaudeFiles("/workspace")
		for _, fl := range files {
			if err := CheckClaudePath(fl.Path); err != nil {
				t.Fatalf("a checked conversation lands at %q: %v", fl.Path, err)
			}
		}
	})
}

// FuzzReadBoxTar: what a box sends of its ~/.claude for an export is
// parsed without panicking, within the limits, and what it keeps travels
// (paths, content, no credential-shaped string) and writes into a file.
func FuzzReadBoxTar(f *testing.F) {
	a := sample()
	tarOf := func(files []File) []byte {
		b, err := BoxTar(files)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(tarOf(a.Files))
	f.Add(tarOf(nil))
	dup := tarOf([]File{{Path: "CLAUDE.md", Data: []byte("a")}})
	f.Add(append(dup[:len(dup)-1024:len(dup)-1024], dup...)) // the same file twice
	f.Add(append(tarOf([]File{{Path: "plans/x", Data: []byte("a")}})[:512+512], tarOf([]File{{Path: "plans/x/y", Data: []byte("b")}})...))
	f.Add(gunzip(f, write(f, a)))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, _, err := ReadBoxTar(bytes.NewReader(data), small)
		if err != nil {
			return
		}
		var total int64
		for _, fl := range files {
			if err := CheckClaudePath(fl.Path); err != nil {
				t.Fatalf("kept %q: %v", fl.Path, err)
			}
			if err := checkContent(fl.Path, fl.Data); err != nil {
				t.Fatalf("kept %q: %v", fl.Path, err)
			}
			if _, n := Redact(fl.Data); n > 0 {
				t.Fatalf("%s keeps a credential-shaped string", fl.Path)
			}
			total += int64(len(fl.Data))
		}
		if total > small.MaxTotal {
			t.Fatalf("%d bytes kept", total)
		}
		if err := Write(io.Discard, &Archive{Settings: Settings{Name: "x"}, Files: files}); err != nil {
			t.Fatalf("what an export read does not write: %v", err)
		}
	})
}
