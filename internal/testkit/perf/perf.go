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

// CgroupPSS is the proportional set size, in bytes, of the processes of
// the cgroup whose cgroup.procs file is procs (every process a box has
// on the host: a shared-kernel box's own, or a gVisor box's sentry, gofer
// and stubs), summed from each one's smaps_rollup.
func CgroupPSS(procs string) (int64, error) {
	b, err := os.ReadFile(procs)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, pid := range strings.Fields(string(b)) {
		r, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
		if err != nil {
			continue // gone meanwhile
		}
		for _, l := range strings.Split(string(r), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "Pss:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				total += kb << 10
			}
		}
	}
	return total, nil
}

// PidsCgroupProcs is the cgroup.procs file of pid's cgroup in the pids
// hierarchy (cgroup v1) or the unified one (v2).
func PidsCgroupProcs(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	unified := ""
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "pids" {
			return "/sys/fs/cgroup/pids" + f[2] + "/cgroup.procs", nil
		}
		if f[0] == "0" && f[1] == "" {
			unified = "/sys/fs/cgroup" + f[2] + "/cgroup.procs"
		}
	}
	if _, err := os.Stat(unified); unified == "" || err != nil {
		return "", fmt.Errorf("no pids cgroup for pid %d", pid)
	}
	return unified, nil
}
