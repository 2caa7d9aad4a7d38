// Package hostrun picks out, from the paths a change touches, the files
// that the owner's machine may run or be steered by once the change is
// merged: git hooks and the files git reads from the work tree, build and
// package-manager files, editor and IDE project config, CI pipelines, the
// config of AI coding agents, and scripts. paddock prints them above a diff
// (Banner) so the owner reads those files first.
//
// It is pure: it looks only at names, never at file contents or the disk.
// A change from an untrusted agent chooses those names, so matching leans
// towards warning (see key): a false warning costs a glance, a missed one
// may cost the machine.
//
// The rules are data, in rules.go; each says what runs or reads the file.
package hostrun

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Finding is one changed path the host may run, and why.
type Finding struct {
	Path string // as given
	Why  string // short, lowercase, e.g. "a git hook run by husky (core.hooksPath)"
}

// Classify returns, in the order given, a Finding for each path the host
// may run or be configured by. Paths not of that kind are left out. It
// never fails; a path with odd bytes (control characters, non-UTF-8, very
// long) is classified by its name all the same, and Finding.Path holds it
// as given.
//
// Paths are slash-separated and relative to the repository root, as
// `git diff --name-only` prints them; '\' also separates (a Windows host
// reads it so), and empty, "." and ".." components are skipped. Each path
// gets the Why of the first rule in the table that matches it. The result
// is nil when nothing matches.
func Classify(paths []string) []Finding {
	var out []Finding
	for _, p := range paths {
		if i := classify(p); i >= 0 {
			out = append(out, Finding{Path: p, Why: rules[i].why})
		}
	}
	return out
}

// classify is the index in rules of the first rule matching p, or -1.
func classify(p string) int {
	comps := split(p)
	if len(comps) == 0 {
		return -1
	}
	return compiled.first(comps)
}

// split is the keys (see key) of p's components, leaving out those whose
// key is empty ("", ".", "..", and names only of dots and spaces).
func split(p string) []string {
	// Sized once: a hostile path may have millions of components.
	comps := make([]string, 0, strings.Count(p, "/")+strings.Count(p, `\`)+1)
	for c := range strings.FieldsFuncSeq(p, isSep) {
		if k := key(c); k != "" {
			comps = append(comps, k)
		}
	}
	return comps
}

func isSep(r rune) bool { return r == '/' || r == '\\' }

// key is the form in which a path component is compared with the rules,
// which are written in that form. It folds the name as the most lenient
// host file system would, because the owner may be on macOS (APFS and HFS+
// are case-insensitive by default) or Windows (NTFS through Win32), where
// make opening "Makefile" gets "MAKEFILE", VS Code finds ".VSCode", and git
// checks out whatever spelling the change chose. So, on every host:
//
//   - case is folded (each rune to lower(upper(r)), so 'K' (Kelvin) and
//     'ſ' (long s) fold to 'k' and 's', as Unicode case folding does);
//   - the code points HFS+ ignores in names are dropped (".g\u200cit" is
//     ".git" there; the list is git's, from its is_hfs_dotgit check);
//   - from a ':' on is cut (on NTFS, "Makefile::$DATA" is Makefile's data);
//   - trailing dots and spaces are trimmed (Win32 drops them: "Makefile. "
//     opens "Makefile").
//
// Tools that are themselves case-sensitive on Linux (make, git, npm) are
// folded too: on Linux that only adds a warning for names like "MAKEFILE"
// that no honest repository uses, and a warning costs little.
func key(c string) string {
	if plain(c) {
		return c // the common case: nothing to fold, no allocation
	}
	var b strings.Builder
	b.Grow(len(c))
	for _, r := range c {
		// Invalid UTF-8 decodes as utf8.RuneError, which is in no rule.
		if hfsIgnorable(r) {
			continue
		}
		b.WriteRune(unicode.ToLower(unicode.ToUpper(r)))
	}
	s := b.String()
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". ")
}

// plain reports whether key(c) == c: c is ASCII without upper case or ':',
// and does not end in '.' or ' '.
func plain(c string) bool {
	if c == "" || c[len(c)-1] == '.' || c[len(c)-1] == ' ' {
		return false
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; b >= utf8.RuneSelf || b == ':' || 'A' <= b && b <= 'Z' {
			return false
		}
	}
	return true
}

// hfsIgnorable reports whether HFS+ leaves r out when it compares names
// (git's next_hfs_char in utf8.c lists the same).
func hfsIgnorable(r rune) bool {
	switch {
	case r == 0x200c, r == 0x200d, r == 0x200e, r == 0x200f: // zero-width (non-)joiner, LRM, RLM
		return true
	case 0x202a <= r && r <= 0x202e: // bidi embeddings and overrides
		return true
	case 0x206a <= r && r <= 0x206f: // deprecated format characters
		return true
	case r == 0xfeff: // zero-width no-break space (BOM)
		return true
	}
	return false
}

// ParseNameOnlyZ splits `git diff --name-only -z` output (NUL-terminated
// paths) into paths; an empty trailing element is dropped. It is given
// untrusted bytes from a sandbox, at most a few MB; it must not panic.
//
// Output without a final NUL keeps its last path. Empty elements inside
// (git never writes them) are kept, as "". The paths are copies: b may be
// reused. It is nil when b is empty.
func ParseNameOnlyZ(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	n := bytes.Count(b, []byte{0})
	if b[len(b)-1] != 0 {
		n++ // the last path has no terminator
	}
	out := make([]string, 0, n)
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out
}
