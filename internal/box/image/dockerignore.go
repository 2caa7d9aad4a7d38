// A .dockerignore, read as the Docker CLI reads it: pure, no I/O.

package image

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// ignorePattern is one line of a .dockerignore.
type ignorePattern struct {
	re        *regexp.Regexp
	exception bool // the line began with "!": it brings matches back
}

// ignorer decides which paths of a build context are left out.
type ignorer struct {
	pats       []ignorePattern
	exceptions bool // some pattern is an exception
}

// parseDockerignore reads a .dockerignore as the Docker CLI does: one
// pattern a line, blank lines and lines starting with # skipped, a
// leading ! making an exception, each pattern cleaned (path.Clean) and
// relative to the context's root (a leading / is dropped). Patterns are
// path.Match's, with ** matching any number of directories; a pattern
// that matches a directory matches everything in it; the last pattern
// that matches a path decides.
func parseDockerignore(r io.Reader) (*ignorer, error) {
	ig := &ignorer{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		exc := false
		if l[0] == '!' {
			exc, l = true, strings.TrimSpace(l[1:])
		}
		l = strings.TrimPrefix(path.Clean(l), "/")
		if l == "" || l == "." {
			continue // the whole context: Docker never leaves it all out
		}
		re, err := ignoreRegexp(l)
		if err != nil {
			return nil, fmt.Errorf(".dockerignore line %d: %q: %v; fix the pattern: %w", n, l, err, errdefs.ErrInvalid)
		}
		ig.pats = append(ig.pats, ignorePattern{re: re, exception: exc})
		ig.exceptions = ig.exceptions || exc
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	return ig, nil
}

// ignoreRegexp turns a pattern into an anchored regular expression, as
// Docker's patternmatcher does: * is any run of non-slashes, ? one
// non-slash, ** (with the slash after it) any run of directories, a
// backslash quotes the next character, [ ] a class ([! negates).
func ignoreRegexp(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case inClass:
			if c == ']' {
				inClass = false
			}
			if c == '\\' && i+1 < len(p) {
				i++
				b.WriteString(regexp.QuoteMeta(string(p[i])))
				continue
			}
			b.WriteByte(c)
		case c == '*' && i+1 < len(p) && p[i+1] == '*':
			i++
			if i+1 < len(p) && p[i+1] == '/' {
				i++
			}
			if i+1 == len(p) {
				b.WriteString(".*")
			} else {
				b.WriteString("(.*/)?")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\':
			if i+1 == len(p) {
				return nil, fmt.Errorf("a pattern may not end in a backslash")
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(p[i])))
		case c == '[':
			inClass = true
			b.WriteByte('[')
			if i+1 < len(p) && (p[i+1] == '!' || p[i+1] == '^') {
				i++
				b.WriteByte('^')
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if inClass {
		return nil, fmt.Errorf("a [ without its ]")
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// excluded reports whether rel (slash-separated, relative to the
// context's root) is left out: a pattern matches a path when it matches
// the path or a directory above it; the last one that matches decides.
func (ig *ignorer) excluded(rel string) bool {
	if ig == nil {
		return false
	}
	out := false
	for _, p := range ig.pats {
		if p.matches(rel) {
			out = !p.exception
		}
	}
	return out
}

func (p ignorePattern) matches(rel string) bool {
	for q := rel; ; {
		if p.re.MatchString(q) {
			return true
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return false
		}
		q = q[:i]
	}
}
