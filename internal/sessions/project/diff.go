package project

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// maxDiffCells bounds the table of the longest common subsequence (4 bytes
// a cell): past it, the changed middle of the files is shown as removed
// whole and added whole, a correct diff if not the shortest. A project
// file is at most MaxSize bytes, so only a file of thousands of changed
// lines gets there.
const maxDiffCells = 1 << 22

// edit is one line of an edit script: kept (' '), removed ('-') or
// added ('+'), with its text as in the file (its "\n" included, but on a
// last line without one).
type edit struct {
	kind byte
	text string
}

// unifiedDiff returns the unified diff (diff -u, three lines of context)
// that turns a into b, with aName and bName in its header; "" if a and b
// are equal. A last line without a newline is marked as diff marks it.
func unifiedDiff(aName, bName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	ops := editScript(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	// aAt[i] and bAt[i] are the lines of a and b before ops[i].
	aAt := make([]int, len(ops)+1)
	bAt := make([]int, len(ops)+1)
	for i, op := range ops {
		aAt[i+1], bAt[i+1] = aAt[i], bAt[i]
		if op.kind != '+' {
			aAt[i+1]++
		}
		if op.kind != '-' {
			bAt[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(i-diffContext, 0)
		// Take in every later change that is at most two contexts away,
		// so that hunks never overlap or touch.
		j := i
		for {
			for j < len(ops) && ops[j].kind != ' ' {
				j++
			}
			k := j
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k < len(ops) && k-j <= 2*diffContext {
				j = k
				continue
			}
			break
		}
		end := min(j+diffContext, len(ops))
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aAt[start], aAt[end]-aAt[start]), hunkRange(bAt[start], bAt[end]-bAt[start]))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			if !strings.HasSuffix(op.text, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}

// hunkRange writes a hunk's range of one file as diff does: the first
// line and the count, the count left out when it is 1, and the line
// before the hunk when it has none of this file's lines.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}

// splitLines cuts b into lines, each with its "\n" (the last may lack it).
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, string(b))
			break
		}
		lines = append(lines, string(b[:i+1]))
		b = b[i+1:]
	}
	return lines
}

// editScript returns a shortest edit script from a to b (removals before
// additions where both are due), by the longest common subsequence of the
// lines between their common start and end. When that middle is too big
// for the table it is removed and added whole.
func editScript(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]edit, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		ops = append(ops, edit{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if (n+1)*(m+1) > maxDiffCells {
		for _, l := range ma {
			ops = append(ops, edit{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, edit{'+', l})
		}
	} else {
		// lcs[i*(m+1)+j] is the length of the longest common subsequence
		// of ma[i:] and mb[j:].
		w := m + 1
		lcs := make([]int32, (n+1)*w)
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, edit{' ', ma[i]})
				i++
				j++
			case j == m || i < n && lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
				ops = append(ops, edit{'-', ma[i]})
				i++
			default:
				ops = append(ops, edit{'+', mb[j]})
				j++
			}
		}
	}
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, edit{' ', l})
	}
	return ops
}
