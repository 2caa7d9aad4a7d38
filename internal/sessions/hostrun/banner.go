package hostrun

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what Banner prints.
const (
	// MaxBannerFindings is how many findings Banner lists; the rest are
	// counted in a last line.
	MaxBannerFindings = 50
	// MaxBannerField is the most bytes of a path (or a reason) Banner
	// prints before cutting it with '…'.
	MaxBannerField = 200
)

// bannerHeader is Banner's first line.
const bannerHeader = "This change touches files that tools on your machine run or read " +
	"(git hooks, build tools, editors, CI, AI agents). Read them before merging:"

// Banner is the lines a person reads above a diff: "" when findings is
// empty; otherwise a header line saying these files are run or read by
// tools on the owner's machine (git hooks, build tools, editors, CI) and to
// read them before merging, then one line per finding "  <path>: <why>"
// (the path made safe for a terminal: control bytes and DEL shown as '?',
// at most 200 bytes then '…'), at most 50 findings, then "  … and N more".
//
// Every line ends in '\n'. Paths come from an untrusted change, so besides
// C0 controls and DEL, every byte that is not valid UTF-8 and every rune
// that is not graphic (C1 controls such as CSI, bidi overrides and other
// format characters that could make one path look like another, line
// separators) is shown as '?'. The reason is made safe the same way, since
// the caller may have built the Finding. The result is valid UTF-8 and its
// only control byte is '\n'.
func Banner(findings []Finding) string {
	if len(findings) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(bannerHeader)
	b.WriteByte('\n')
	for i, f := range findings {
		if i == MaxBannerFindings {
			fmt.Fprintf(&b, "  … and %d more\n", len(findings)-MaxBannerFindings)
			break
		}
		b.WriteString("  ")
		writeSafe(&b, f.Path, MaxBannerField)
		b.WriteString(": ")
		writeSafe(&b, f.Why, MaxBannerField)
		b.WriteByte('\n')
	}
	return b.String()
}

// writeSafe writes s to b with each invalid byte and each non-graphic rune
// but ' ' replaced by '?', stopping with '…' once more than max bytes
// would be written. It never cuts a rune in two, and reads no further than
// it writes, so a 10 MB path costs no more than a short one.
func writeSafe(b *strings.Builder, s string, max int) {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 || r != ' ' && !unicode.IsGraphic(r) {
			r = '?'
		}
		w := utf8.RuneLen(r)
		if n+w > max {
			b.WriteString("…")
			return
		}
		b.WriteRune(r)
		n += w
	}
}
