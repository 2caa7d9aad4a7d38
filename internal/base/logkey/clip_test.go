package logkey

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefghij…"},
		{"ééééé", 5, "éé…"}, // never half a rune
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	} {
		if got := Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	long := strings.Repeat("日本", 1000)
	for n := 0; n < 40; n++ {
		got := Clip(long, n)
		if !utf8.ValidString(got) || len(got) > n+len("…") {
			t.Fatalf("Clip(…, %d) = %q", n, got)
		}
	}
}
