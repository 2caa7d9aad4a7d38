package logkey

import "unicode/utf8"

// Clip cuts s to at most n bytes, at a rune boundary, and marks the cut
// with "…"; a shorter s comes back as it is. For values a box or a client
// chose that go into a log line, an error message or a decision record,
// where an unbounded one would fill the line.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
