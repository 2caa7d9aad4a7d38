package project

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestUnifiedDiff: hunks, context, merged and split hunks, and the marks
// diff -u writes.
func TestUnifiedDiff(t *testing.T) {
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	plain := lines(20, func(i int) string { return strconv.Itoa(i) })
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "a\n", "a\n", ""},
		{"both empty", "", "", ""},
		{"new file", "", "a\nb\n", "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"removed file", "a\n", "", "--- A\n+++ B\n@@ -1 +0,0 @@\n-a\n"},
		{"one line changed", "a\n", "b\n", "--- A\n+++ B\n@@ -1 +1 @@\n-a\n+b\n"},
		{"no newline at the end, added", "a", "a\n", "--- A\n+++ B\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n"},
		{"no newline at the end, both", "a\nb", "a\nc", "--- A\n+++ B\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"context of three", plain, strings.Replace(plain, "10\n", "ten\n", 1),
			"--- A\n+++ B\n@@ -7,7 +7,7 @@\n 7\n 8\n 9\n-10\n+ten\n 11\n 12\n 13\n"},
		{"insert at the start", plain, "0\n" + plain, "--- A\n+++ B\n@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n"},
		{"append at the end", plain, plain + "21\n", "--- A\n+++ B\n@@ -18,3 +18,4 @@\n 18\n 19\n 20\n+21\n"},
		{"two changes six apart merge", plain, strings.Replace(strings.Replace(plain, "5\n", "five\n", 1), "12\n", "twelve\n", 1),
			"--- A\n+++ B\n@@ -2,14 +2,14 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n 11\n-12\n+twelve\n 13\n 14\n 15\n"},
		{"two changes seven apart split", plain, strings.Replace(strings.Replace(plain, "5\n", "five\n", 1), "13\n", "thirteen\n", 1),
			"--- A\n+++ B\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n@@ -10,7 +10,7 @@\n 10\n 11\n 12\n-13\n+thirteen\n 14\n 15\n 16\n"},
		{"a removed line", "a\nb\nc\n", "a\nc\n", "--- A\n+++ B\n@@ -1,3 +1,2 @@\n a\n-b\n c\n"},
	} {
		if got := unifiedDiff("A", "B", []byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("%s:\n got:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// hunkHeader reads "@@ -a[,n] +b[,m] @@".
var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// apply applies a unified diff to a, as patch does, strictly: every
// context and removed line must be there, and the counts must agree.
func apply(a, diff string) (string, error) {
	if diff == "" {
		return a, nil
	}
	old := splitLines([]byte(a))
	dl := splitLines([]byte(diff))
	if len(dl) < 2 || !strings.HasPrefix(dl[0], "--- ") || !strings.HasPrefix(dl[1], "+++ ") {
		return "", fmt.Errorf("no header")
	}
	dl = dl[2:]
	var out []string
	at := 0 // lines of old used
	for len(dl) > 0 {
		m := hunkHeader.FindStringSubmatch(strings.TrimSuffix(dl[0], "\n"))
		if m == nil {
			return "", fmt.Errorf("bad hunk header %q", dl[0])
		}
		dl = dl[1:]
		num := func(s string, def int) int {
			if s == "" {
				return def
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		aStart, aN := num(m[1], 0), num(m[2], 1)
		bN := num(m[4], 1)
		first := aStart - 1
		if aN == 0 {
			first = aStart
		}
		if first < at {
			return "", fmt.Errorf("hunks overlap or go back")
		}
		out = append(out, old[at:first]...)
		at = first
		gotA, gotB := 0, 0
		for len(dl) > 0 && !strings.HasPrefix(dl[0], "@@") {
			l := dl[0]
			dl = dl[1:]
			text := l[1:]
			if len(dl) > 0 && dl[0] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				dl = dl[1:]
			}
			switch l[0] {
			case ' ', '-':
				if at >= len(old) || old[at] != text {
					return "", fmt.Errorf("line %d is not %q", at+1, text)
				}
				at++
				gotA++
				if l[0] == ' ' {
					out = append(out, text)
					gotB++
				}
			case '+':
				out = append(out, text)
				gotB++
			default:
				return "", fmt.Errorf("bad line %q", l)
			}
		}
		if gotA != aN || gotB != bN {
			return "", fmt.Errorf("hunk counts %d,%d, header says %d,%d", gotA, gotB, aN, bN)
		}
	}
	out = append(out, old[at:]...)
	return strings.Join(out, ""), nil
}

// lcsLen is the length of the longest common subsequence, by recursion
// with a memo: the reference for small inputs.
func lcsLen(a, b []string) int {
	memo := map[[2]int]int{}
	var f func(i, j int) int
	f = func(i, j int) int {
		if i == len(a) || j == len(b) {
			return 0
		}
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		v := max(f(i+1, j), f(i, j+1))
		if a[i] == b[j] {
			v = max(v, f(i+1, j+1)+1)
		}
		memo[[2]int{i, j}] = v
		return v
	}
	return f(0, 0)
}

// TestDiffRoundTrip: on random files of a few distinct lines, the diff
// turns a into b (patch would apply it), and it is a shortest one.
func TestDiffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		for range r.IntN(25) {
			b.WriteString([]string{"a", "b", "c", "d", "e"}[r.IntN(5)] + "\n")
		}
		if r.IntN(4) == 0 {
			b.WriteString("z")
		}
		return b.String()
	}
	for i := range 3000 {
		a, b := gen(), gen()
		if i%3 == 0 {
			// near-equal files: a few lines changed in a longer one.
			b = a
			for range r.IntN(3) + 1 {
				ls := splitLines([]byte(b))
				if len(ls) == 0 {
					break
				}
				k := r.IntN(len(ls))
				ls[k] = "x" + ls[k]
				b = strings.Join(ls, "")
			}
		}
		d := unifiedDiff("A", "B", []byte(a), []byte(b))
		got, err := apply(a, d)
		if err != nil || got != b {
			t.Fatalf("a=%q b=%q:\n%s\napplied: %q, %v", a, b, d, got, err)
		}
		ops := editScript(splitLines([]byte(a)), splitLines([]byte(b)))
		changed := 0
		for _, op := range ops {
			if op.kind != ' ' {
				changed++
			}
		}
		la, lb := splitLines([]byte(a)), splitLines([]byte(b))
		if want := len(la) + len(lb) - 2*lcsLen(la, lb); changed != want {
			t.Fatalf("a=%q b=%q: %d lines changed, the shortest has %d", a, b, changed, want)
		}
	}
}

// TestDiffTooBig: past the table's bound the middle is removed and added
// whole, still a diff that applies.
func TestDiffTooBig(t *testing.T) {
	var a, b strings.Builder
	for i := range 2100 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := unifiedDiff("A", "B", []byte("same\n"+a.String()+"end\n"), []byte("same\n"+b.String()+"end\n"))
	if got, err := apply("same\n"+a.String()+"end\n", d); err != nil || got != "same\n"+b.String()+"end\n" {
		t.Fatalf("does not apply: %v", err)
	}
	if !strings.Contains(d, "@@ -1,2102 +1,2102 @@\n same\n-a0\n") {
		t.Errorf("unexpected diff start:\n%.200s", d)
	}
}

// TestDiffAgainstGNU: where GNU diff is installed, patch applies our diff
// as diff -u's own would be.
func TestDiffAgainstGNU(t *testing.T) {
	patch, err := exec.LookPath("patch")
	if err != nil {
		t.Skip("no patch(1) here")
	}
	dir := t.TempDir()
	a := "version = 1\nmodel = \"opus\"\n\n[env]\nA = \"1\"\nB = \"2\"\nC = \"3\"\nD = \"4\"\nE = \"5\"\nF = \"6\"\nG = \"7\"\nH = \"8\"\n[setup]\ncommand = \"x\""
	b := "model = \"sonnet\"\n\n[env]\nA = \"1\"\nB = \"2\"\nC = \"three\"\nD = \"4\"\nE = \"5\"\nF = \"6\"\nG = \"7\"\nH = \"8\"\nI = \"9\"\n[setup]\ncommand = \"y\"\n"
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	d := unifiedDiff("f", "f", []byte(a), []byte(b))
	cmd := exec.Command(patch, "--posix", "-s", p)
	cmd.Stdin = strings.NewReader(d)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s\n%s", err, out, d)
	}
	got, _ := os.ReadFile(p)
	if string(got) != b {
		t.Fatalf("patched:\n%q\nwant\n%q", got, b)
	}
}
