package hostrun

import (
	"slices"
	"strings"
	"testing"
)

// BenchmarkClassifyHostile is the worst a few MB from a box can do: 4 MB of
// one-letter components.
func BenchmarkClassifyHostile(b *testing.B) {
	paths := []string{strings.Repeat("a/", 2<<20)}
	for b.Loop() {
		Classify(paths)
	}
}

// BenchmarkClassifyTypical is a diff of a few hundred ordinary paths.
func BenchmarkClassifyTypical(b *testing.B) {
	var paths []string
	for i := 0; i < 300; i++ {
		paths = append(paths, "internal/pkg/sub/file_test.go", "web/src/components/Button.tsx", "docs/guide.md")
	}
	for b.Loop() {
		Classify(paths)
	}
}

// classifyLinear is classify done the plain way, trying each rule in
// order: the reference the index must agree with.
func classifyLinear(p string) int {
	comps := split(p)
	if len(comps) == 0 {
		return -1
	}
	for i, r := range rules {
		hit := slices.Contains(r.names, comps[len(comps)-1]) ||
			slices.Contains(r.rootDirs, comps[0]) ||
			slices.ContainsFunc(comps, func(c string) bool { return slices.Contains(r.dirs, c) }) ||
			slices.ContainsFunc(r.seqs, func(s []string) bool {
				for j := range comps {
					if j+len(s) <= len(comps) && slices.Equal(comps[j:j+len(s)], s) {
						return true
					}
				}
				return false
			}) ||
			r.scanned(comps)
		if hit {
			return i
		}
	}
	return -1
}

func TestIndexMatchesLinear(t *testing.T) {
	var all []string
	for _, tc := range positives {
		all = append(all, tc.path, "x/"+tc.path, tc.path+"/x", strings.ToUpper(tc.path))
	}
	all = append(all, negatives...)
	all = append(all, ".github/workflows", "a/.github/x/workflows", "gradle/x/wrapper", ".config/mise")
	for _, p := range all {
		if got, want := classify(p), classifyLinear(p); got != want {
			t.Errorf("%q: index gives rule %d, linear %d", p, got, want)
		}
	}
}
