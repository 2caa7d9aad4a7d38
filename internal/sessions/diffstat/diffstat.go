// Package diffstat reads `git diff --numstat -z` and prints it as `git diff
// --stat` does, so that one pass of git over a clone (its costly part: a
// stat of every file of the tree) gives both the list of changed files and
// the diffstat (paddock diff --stat).
//
// The numstat comes from the box: Parse bounds and checks every byte of
// it, and Format quotes a name as git does (core.quotePath), so nothing of
// a name reaches a terminal as a control.
package diffstat

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// File is one changed file: its lines added and deleted (Binary: git
// counts none), its path, and for a rename or copy the path it had.
type File struct {
	Added, Deleted int
	Binary         bool
	Path, From     string
}

// MaxFiles bounds the files one numstat may name.
const MaxFiles = 1 << 20

// ErrBadNumstat wraps every refusal of Parse.
var ErrBadNumstat = errors.New("diffstat: not git diff --numstat -z output")

// Parse reads git diff --numstat -z: for each file "ADDED\tDELETED\tPATH\0",
// or for a rename "ADDED\tDELETED\t\0FROM\0PATH\0"; a binary file's counts
// are "-".
func Parse(b []byte) ([]File, error) {
	var out []File
	for len(b) > 0 {
		if len(out) == MaxFiles {
			return nil, fmt.Errorf("%w: more than %d files", ErrBadNumstat, MaxFiles)
		}
		var f File
		var err error
		var field []byte
		for i, n := range []*int{&f.Added, &f.Deleted} {
			var ok bool
			if field, b, ok = bytes.Cut(b, []byte{'\t'}); !ok {
				return nil, fmt.Errorf("%w: a line without its counts", ErrBadNumstat)
			}
			switch {
			case string(field) == "-":
				f.Binary = true
			case len(field) > 0 && len(field) <= 10 && field[0] != '+':
				if *n, err = strconv.Atoi(string(field)); err != nil || *n < 0 {
					return nil, fmt.Errorf("%w: count %q", ErrBadNumstat, field)
				}
			default:
				return nil, fmt.Errorf("%w: count %d %q", ErrBadNumstat, i, field)
			}
		}
		if f.Binary && (f.Added != 0 || f.Deleted != 0) {
			return nil, fmt.Errorf("%w: a binary file with counts", ErrBadNumstat)
		}
		if len(b) > 0 && b[0] == 0 { // a rename: FROM\0PATH\0
			var from, to []byte
			var ok1, ok2 bool
			from, b, ok1 = bytes.Cut(b[1:], []byte{0})
			to, b, ok2 = bytes.Cut(b, []byte{0})
			if !ok1 || !ok2 || len(from) == 0 || len(to) == 0 {
				return nil, fmt.Errorf("%w: a rename without both its paths", ErrBadNumstat)
			}
			f.From, f.Path = string(from), string(to)
		} else {
			p, rest, ok := bytes.Cut(b, []byte{0})
			if !ok || len(p) == 0 {
				return nil, fmt.Errorf("%w: a line without its path", ErrBadNumstat)
			}
			f.Path, b = string(p), rest
		}
		out = append(out, f)
	}
	return out, nil
}

// Names are the files' paths (and a rename's old path), for the host-run
// check (hostrun.Classify).
func Names(fs []File) []string {
	var out []string
	for _, f := range fs {
		if f.From != "" {
			out = append(out, f.From)
		}
		out = append(out, f.Path)
	}
	return out
}

// Width is the line width git uses for --stat when its output is not a
// terminal.
const Width = 80

// Format prints fs as git diff --stat does at Width columns: a line a
// file (its name, quoted as core.quotePath does and cut from the left to
// fit, its count, a graph of + and - scaled to fit), then the summary. A
// binary file shows "Bin" (git adds its sizes, which numstat does not
// give). With color the graph is green and red, as git's.
func Format(fs []File, color bool) string {
	if len(fs) == 0 {
		return ""
	}
	names := make([]string, len(fs))
	maxLen, maxChange, hasBin := 0, 0, false
	for i, f := range fs {
		names[i] = displayName(f)
		maxLen = max(maxLen, len(names[i]))
		if f.Binary {
			hasBin = true
			continue
		}
		maxChange = max(maxChange, f.Added+f.Deleted)
	}
	numberWidth := len(strconv.Itoa(maxChange))
	if hasBin {
		numberWidth = max(numberWidth, 3)
	}
	// git's show_stats, with stat_width 80 and no name or graph width
	// set; a binary file's "Bin XXX -> YYY bytes" is not printed, so it
	// asks for no room.
	width := max(Width, 16+6+numberWidth)
	graphWidth, nameWidth := maxChange, maxLen
	if nameWidth+numberWidth+6+graphWidth > width {
		if graphWidth > width*3/8-numberWidth-6 {
			graphWidth = max(width*3/8-numberWidth-6, 6)
		}
		if nameWidth > width-numberWidth-6-graphWidth {
			nameWidth = width - numberWidth - 6 - graphWidth
		} else {
			graphWidth = width - numberWidth - 6 - nameWidth
		}
	}
	var b strings.Builder
	adds, dels := 0, 0
	for i, f := range fs {
		name, prefix := names[i], ""
		if len(name) > nameWidth {
			prefix = "..."
			keep := max(nameWidth-3, 0)
			name = name[len(name)-keep:]
			if j := strings.IndexByte(name, '/'); j >= 0 {
				name = name[j:]
			}
		}
		fmt.Fprintf(&b, " %s%-*s |", prefix, nameWidth-len(prefix), name)
		if f.Binary {
			fmt.Fprintf(&b, " %*s\n", numberWidth, "Bin")
			continue
		}
		adds += f.Added
		dels += f.Deleted
		add, del := f.Added, f.Deleted
		if graphWidth <= maxChange {
			total := scale(add+del, graphWidth, maxChange)
			if total < 2 && add > 0 && del > 0 {
				total = 2
			}
			if add < del {
				add = scale(add, graphWidth, maxChange)
				del = total - add
			} else {
				del = scale(del, graphWidth, maxChange)
				add = total - del
			}
		}
		fmt.Fprintf(&b, " %*d", numberWidth, f.Added+f.Deleted)
		if add+del > 0 {
			b.WriteByte(' ')
		}
		graph(&b, '+', add, color, "\x1b[32m")
		graph(&b, '-', del, color, "\x1b[31m")
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, " %d file%s changed", len(fs), plural(len(fs)))
	if adds > 0 || dels == 0 {
		fmt.Fprintf(&b, ", %d insertion%s(+)", adds, plural(adds))
	}
	if dels > 0 || adds == 0 {
		fmt.Fprintf(&b, ", %d deletion%s(-)", dels, plural(dels))
	}
	b.WriteByte('\n')
	return b.String()
}

func graph(b *strings.Builder, c byte, n int, color bool, sgr string) {
	if n == 0 {
		return
	}
	if color {
		b.WriteString(sgr)
	}
	b.WriteString(strings.Repeat(string(c), n))
	if color {
		b.WriteString("\x1b[m")
	}
}

// scale is git's scale_linear: it of max over width columns, at least one
// column for a change at all.
func scale(it, width, max int) int {
	if it == 0 {
		return 0
	}
	return 1 + it*(width-1)/max
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// displayName is a file's name as git's stat shows it: quoted, and a
// rename as "a => b", its common leading directories and trailing path
// outside braces (git's pprint_rename).
func displayName(f File) string {
	if f.From == "" {
		return Quote(f.Path)
	}
	a, b := Quote(f.From), Quote(f.Path)
	if a != f.From || b != f.Path { // quoted: git prints the two whole
		return a + " => " + b
	}
	pfx := 0
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '/' {
			pfx = i + 1
		}
	}
	sfx := 0
	for i, j := len(a)-1, len(b)-1; i >= pfx && j >= pfx && a[i] == b[j]; i, j = i-1, j-1 {
		if a[i] == '/' {
			sfx = len(a) - i
		}
	}
	if pfx+sfx == 0 {
		return a + " => " + b
	}
	return a[:pfx] + "{" + a[pfx:len(a)-sfx] + " => " + b[pfx:len(b)-sfx] + "}" + a[len(a)-sfx:]
}

// Quote is a path as git prints it with core.quotePath: as it is unless it
// holds a control byte, a '"', a '\' or a byte of 0x80 and up; then in
// double quotes with C escapes (octal for the rest).
func Quote(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
