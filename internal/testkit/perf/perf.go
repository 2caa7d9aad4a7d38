// Package perf holds the few helpers paddock's side-by-side benchmarks
// share: percentiles over samples and a Markdown table, so every
// benchmark prints rows that go straight into docs/PERFORMANCE.md.
package perf

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rounds is a benchmark's number of rounds: PADDOCK_BENCH_ROUNDS when set
// to a positive number, else def.
func Rounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("PADDOCK_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// Pct returns the p-quantile (0..1) of samples; 0 for none.
func Pct(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// MS formats a duration in milliseconds with three decimals.
func MS(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6) }

// Table is a Markdown table.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Write prints the table with a line naming the machine and the date.
func (t *Table) Write(w io.Writer) {
	fmt.Fprintf(w, "\n%s — %s/%s, %d CPUs, %s, %s\n\n", t.Title, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = len(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(width) && len(c) > width[i] {
				width[i] = len(c)
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %-*s |", width[i], c)
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.Header)
	sep := make([]string, len(width))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
}
