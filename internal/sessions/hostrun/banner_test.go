package hostrun

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestBannerGolden renders hostile and ordinary paths; testdata/banner.golden
// is what the owner sees.
func TestBannerGolden(t *testing.T) {
	paths := []string{
		"README.md",
		"Makefile",
		".vscode/tasks.json",
		"evil\x1b[2J\x1b]0;title\x07/.husky/pre-commit", // ESC and BEL
		"tab\there/.envrc",
		"new\nline/.npmrc",
		"del\x7f/package.json",
		"c1\u009b31m/.gitattributes",           // CSI as a C1 control
		"bidi\u202egnp.exe\u202c/.mcp.json",    // right-to-left override
		"zw\u200bsp/CLAUDE.md",                 // zero-width space
		"bad\xff\xfeutf8/go.mod",               // not UTF-8
		"ünïcödé/日本/Cargo.toml",                // kept as is
		strings.Repeat("d/", 150) + "Makefile", // cut at 200 bytes
		strings.Repeat("é", 120) + "/.envrc",   // cut between runes, not inside one
		"src/main.go",
	}
	got := Banner(Classify(paths))
	golden := filepath.Join("testdata", "banner.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("Banner differs from %s (run with -update after checking):\ngot:\n%s", golden, got)
	}
	checkBanner(t, got)
}

// checkBanner checks what every banner must be: valid UTF-8, no control
// byte but '\n', every line ending in '\n', each line at most a header's
// or an entry's length.
func checkBanner(t *testing.T, b string) {
	t.Helper()
	if !utf8.ValidString(b) {
		t.Errorf("banner is not valid UTF-8: %q", b)
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			t.Errorf("banner has control byte %#x at %d: %q", c, i, b)
			break
		}
	}
	for _, r := range b {
		if r >= 0x80 && r <= 0x9f || r == '\u202e' || r == '\u200b' {
			t.Errorf("banner has %U: %q", r, b)
			break
		}
	}
	if b != "" && !strings.HasSuffix(b, "\n") {
		t.Errorf("banner does not end in a newline: %q", b)
	}
	for _, l := range strings.Split(strings.TrimSuffix(b, "\n"), "\n") {
		// Two fields of at most MaxBannerField bytes plus '…' each.
		if max := len("  ") + 2*(MaxBannerField+len("…")) + len(": "); len(l) > max && l != bannerHeader {
			t.Errorf("line of %d bytes (max %d): %q", len(l), max, l)
		}
	}
}

func TestBannerEmpty(t *testing.T) {
	if got := Banner(nil); got != "" {
		t.Errorf("Banner(nil) = %q", got)
	}
	if got := Banner([]Finding{}); got != "" {
		t.Errorf("Banner(empty) = %q", got)
	}
}

func TestBannerCap(t *testing.T) {
	for _, tc := range []struct {
		n        int
		lines    int // including the header
		lastLine string
	}{
		{1, 2, "  f0/Makefile: run by make"},
		{MaxBannerFindings, 1 + MaxBannerFindings, "  f49/Makefile: run by make"},
		{MaxBannerFindings + 1, 2 + MaxBannerFindings, "  … and 1 more"},
		{1000, 2 + MaxBannerFindings, "  … and 950 more"},
	} {
		var fs []Finding
		for i := range tc.n {
			fs = append(fs, Finding{Path: fmt.Sprintf("f%d/Makefile", i), Why: "run by make"})
		}
		b := Banner(fs)
		checkBanner(t, b)
		lines := strings.Split(strings.TrimSuffix(b, "\n"), "\n")
		if len(lines) != tc.lines || lines[0] != bannerHeader || lines[len(lines)-1] != tc.lastLine {
			t.Errorf("%d findings: %d lines, first %q, last %q; want %d, header, %q",
				tc.n, len(lines), lines[0], lines[len(lines)-1], tc.lines, tc.lastLine)
		}
	}
}

func TestWriteSafe(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven1234!", 10, "eleven1234…"},
		{"a\x00b\x1fc\x7fd", 10, "a?b?c?d"},
		{"\xff\xfe", 10, "??"},
		{"\u0085\u009b\u2028\u2066", 20, "????"},
		{"ééé", 5, "éé…"}, // é is 2 bytes: a third would make 6
		{"日本語", 8, "日本…"},
		{"sp ace\u00a0nbsp", 20, "sp ace\u00a0nbsp"},
		{"", 10, ""},
	} {
		var b strings.Builder
		writeSafe(&b, tc.in, tc.max)
		if got := b.String(); got != tc.want {
			t.Errorf("writeSafe(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
