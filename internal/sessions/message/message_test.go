package message

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "fix the test", want: "fix the test"},
		{in: "one\r\ntwo\rthree\n\tfour", want: "one\ntwo\nthree\n\tfour"},
		{in: "ünïcode ✓", want: "ünïcode ✓"},
		{in: " \n\t\r\n", err: "empty"},
		{in: "", err: "empty"},
		{in: "\u00a0\u3000", err: "empty"},
		{in: "a\x1b[201~b", err: "U+001B at byte 1"},
		{in: "a\x00b", err: "U+0000"},
		{in: "a\x7fb", err: "U+007F"},
		{in: "a\u0085b", err: "U+0085"},
		{in: "a\xffb", err: "not UTF-8"},
		{in: strings.Repeat("x", MaxBytes+1), err: "at most 102400"},
	} {
		got, err := Parse(c.in)
		switch {
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, errdefs.ErrInvalid)):
			t.Errorf("Parse(%q): error %v, want one saying %q", c.in, err, c.err)
		}
	}
	if s := fmt.Sprintf("%s %v %q %+v", Text("secret words"), Text("secret words"), Text("secret words"), Text("secret words")); strings.Contains(s, "secret") {
		t.Fatalf("a formatted message shows its words: %s", s)
	}
}

// FuzzParse: whatever comes in, a Text that comes out is valid UTF-8 with
// no control character but tab and newline, not blank, and within
// MaxBytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"hi", "a\r\nb", "\x1b[201~", "\u0085", "\t\n", "ü\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err != nil {
			return
		}
		if !utf8.ValidString(string(got)) || len(got) > MaxBytes || strings.TrimSpace(string(got)) == "" {
			t.Fatalf("Parse(%q) = %q", s, got)
		}
		for _, r := range string(got) {
			if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
				t.Fatalf("Parse(%q) kept %U", s, r)
			}
		}
	})
}

func TestPieces(t *testing.T) {
	long := strings.Repeat("ü", PieceBytes) // two bytes each: cut at a rune
	for _, c := range []struct {
		in   Text
		want []string
	}{
		{"one line", []string{"one line"}},
		{"a\nb\n\nc\n", []string{"a\n", "b\n", "\n", "c\n"}},
		{Text(long), []string{long[:PieceBytes], long[PieceBytes:]}},
		{Text("x" + long), []string{"x" + long[:PieceBytes-2], long[PieceBytes-2 : 2*PieceBytes-2], long[2*PieceBytes-2:]}},
	} {
		got := c.in.Pieces()
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Pieces(%.30q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzPieces: the pieces of any message join to it, each is at most
// PieceBytes of whole runes with one newline at most, at its end.
func FuzzPieces(f *testing.F) {
	f.Add("a\nb")
	f.Add(strings.Repeat("ü\n", 300))
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			return
		}
		ps := m.Pieces()
		if strings.Join(ps, "") != string(m) {
			t.Fatalf("pieces of %q join to something else", s)
		}
		for _, p := range ps {
			if p == "" || len(p) > PieceBytes || !utf8.ValidString(p) || strings.Count(p, "\n") > 1 || strings.Contains(strings.TrimSuffix(p, "\n"), "\n") {
				t.Fatalf("piece %q of %q", p, s)
			}
		}
	})
}
