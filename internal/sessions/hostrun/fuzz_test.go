package hostrun

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzClassify feeds arbitrary bytes, as a box could write them, through
// ParseNameOnlyZ, Classify and Banner, and checks that nothing panics,
// the parse loses nothing, each Finding is an input path in order, the
// index agrees with the plain pass over the rules, and the banner is safe
// for a terminal.
func FuzzClassify(f *testing.F) {
	for _, tc := range positives {
		f.Add([]byte(tc.path + "\x00"))
	}
	for _, p := range negatives {
		f.Add([]byte(p + "\x00"))
	}
	f.Add([]byte("a\x00\x00b"))
	f.Add([]byte("Makefile\x00.vscode/tasks.json\x00src/main.go\x00\x1b[2J/.envrc\x00"))
	f.Add([]byte(strings.Repeat("a/", 3000) + "package.json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		paths := ParseNameOnlyZ(b)

		// The paths joined back are the input, less one final NUL.
		joined := []byte(strings.Join(paths, "\x00"))
		if len(b) > 0 && b[len(b)-1] == 0 {
			joined = append(joined, 0)
		}
		if !bytes.Equal(joined, b) {
			t.Fatalf("ParseNameOnlyZ(%q) = %q: does not join back", b, paths)
		}

		findings := Classify(paths)
		j := 0 // findings are a subsequence of paths
		for _, f := range findings {
			for j < len(paths) && paths[j] != f.Path {
				j++
			}
			if j == len(paths) {
				t.Fatalf("finding %q is not an input path, in order", f.Path)
			}
			j++
			if f.Why == "" {
				t.Fatalf("finding %q has no reason", f.Path)
			}
		}
		for _, p := range paths {
			if got, want := classify(p), classifyLinear(p); got != want {
				t.Fatalf("%q: index gives rule %d, linear %d", p, got, want)
			}
		}
		banner := Banner(findings)
		if (banner == "") != (len(findings) == 0) {
			t.Fatalf("%d findings but banner %q", len(findings), banner)
		}
		checkBanner(t, banner)

		// Also each element as a whole, reasons included, since callers
		// may build Findings themselves.
		checkBanner(t, Banner([]Finding{{Path: string(b), Why: string(b)}}))
	})
}
