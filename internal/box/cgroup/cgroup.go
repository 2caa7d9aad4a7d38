// Package cgroup puts a box's processes under memory, pids and CPU limits,
// with cgroup v1 (one hierarchy per controller, as on this project's test
// machines) or v2 (the unified hierarchy), whichever the host offers for
// each controller. What cannot be applied is reported in words, never
// silently skipped: a box without its limits is still a box, but the owner
// must know.
//
// Groups are made under the Runner's own cgroup (so the Runner's limits
// still bound every box), in a "paddock/<name>" subtree; where cgroup v2
// forbids enabling controllers there (the Runner's cgroup holds the Runner,
// as under a systemd unit), at the hierarchy's root. Every box has a group
// of its own in the unified hierarchy, limits or not, so no box is ever in
// the Runner's own cgroup (see docs/SERVICE.md).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits to apply; zero leaves a limit unset.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
}

// Group is one box's cgroup: a directory per v1 controller, or one v2 directory.
type Group struct {
	// Dirs are the cgroup directories; persisted to find the group again.
	Dirs []string `json:"dirs"`
}

// Applied says which limits took effect.
type Applied struct {
	Memory, Pids, CPU bool
	Notes             []string
}

type mount struct {
	point, root string
	v2          bool
	controllers map[string]bool
}

func mounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		switch b[0] {
		case "cgroup":
			m := mount{point: a[4], root: a[3], controllers: map[string]bool{}}
			for _, o := range strings.Split(b[2], ",") {
				m.controllers[o] = true
			}
			out = append(out, m)
		case "cgroup2":
			m := mount{point: a[4], root: a[3], v2: true, controllers: map[string]bool{}}
			if b, err := os.ReadFile(filepath.Join(a[4], "cgroup.controllers")); err == nil {
				for _, c := range strings.Fields(string(b)) {
					m.controllers[c] = true
				}
			}
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// selfPaths maps a v1 controller (or "" for v2) to this process's cgroup path.
func selfPaths() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

func dirFor(m mount, self string) string {
	rel := self
	if m.root != "/" {
		rel = strings.TrimPrefix(self, m.root)
	}
	return filepath.Join(m.point, rel)
}

// Create makes the group "paddock/<name>" under the Runner's cgroup and
// applies the limits it can. The Group is never nil; Applied.Notes says
// what was not applied and why.
func Create(name string, l Limits) (*Group, Applied) {
	g := &Group{}
	var ap Applied
	ms, err := mounts()
	if err != nil {
		ap.Notes = append(ap.Notes, "no limits applied: cannot read the cgroup mounts: "+err.Error())
		return g, ap
	}
	self, err := selfPaths()
	if err != nil {
		ap.Notes = append(ap.Notes, "no limits applied: cannot read /proc/self/cgroup: "+err.Error())
		return g, ap
	}
	want := []struct {
		ctrl  string
		on    bool
		apply func(dir string, v2 bool) error
		ok    *bool
	}{
		{"memory", l.MemoryBytes > 0, func(d string, v2 bool) error { return setMemory(d, v2, l.MemoryBytes) }, &ap.Memory},
		{"pids", l.Pids > 0, func(d string, v2 bool) error { return write(d, "pids.max", strconv.FormatInt(l.Pids, 10)) }, &ap.Pids},
		{"cpu", l.CPUs > 0, func(d string, v2 bool) error { return setCPU(d, v2, l.CPUs) }, &ap.CPU},
	}
	v2dir := ""
	for _, w := range want {
		if !w.on {
			continue
		}
		var err error
		done := false
		// A v1 hierarchy for this controller first (hybrid hosts), else v2.
		for _, m := range ms {
			if m.v2 || !m.controllers[w.ctrl] {
				continue
			}
			dir := filepath.Join(dirFor(m, self[w.ctrl]), "paddock", name)
			if err = os.MkdirAll(dir, 0o755); err == nil {
				if err = w.apply(dir, false); err == nil {
					g.Dirs = appendOnce(g.Dirs, dir)
					done = true
				}
			}
			break
		}
		if !done {
			for _, m := range ms {
				if !m.v2 || !m.controllers[w.ctrl] {
					continue
				}
				if v2dir == "" {
					v2dir, err = makeV2(m, self[""], name)
				}
				if v2dir != "" {
					if err = w.apply(v2dir, true); err == nil {
						g.Dirs = appendOnce(g.Dirs, v2dir)
						done = true
					}
				}
				break
			}
		}
		*w.ok = done
		if !done {
			why := "no cgroup hierarchy offers the " + w.ctrl + " controller"
			if err != nil {
				why = err.Error()
			}
			ap.Notes = append(ap.Notes, fmt.Sprintf("%s limit not applied: %s", w.ctrl, why))
		}
	}
	// A group of its own in the unified hierarchy too, limits or not: that
	// is where a service manager (systemd) tracks the Runner's unit, and
	// a box must never share the Runner's own cgroup there.
	if v2dir == "" {
		for _, m := range ms {
			if !m.v2 {
				continue
			}
			if d, err := makeV2(m, self[""], name); err == nil {
				g.Dirs = appendOnce(g.Dirs, d)
			} else {
				ap.Notes = append(ap.Notes, "the box shares the Runner's cgroup: "+err.Error())
			}
			break
		}
	}
	return g, ap
}

// makeV2 creates the group in the unified hierarchy, enabling the
// controllers on the way down. Under a cgroup that holds processes (the
// Runner's own) v2 forbids that, so it falls back to the hierarchy's root.
func makeV2(m mount, self, name string) (string, error) {
	var lastErr error
	for _, base := range []string{dirFor(m, self), m.point} {
		parent := filepath.Join(base, "paddock")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			lastErr = err
			continue
		}
		ok := true
		for _, d := range []string{base, parent} {
			for c := range m.controllers {
				if c != "memory" && c != "pids" && c != "cpu" {
					continue
				}
				if err := write(d, "cgroup.subtree_control", "+"+c); err != nil {
					lastErr, ok = fmt.Errorf("enable %s in %s: %w", c, d, err), false
				}
			}
		}
		if !ok {
			continue
		}
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			lastErr = err
			continue
		}
		return dir, nil
	}
	return "", lastErr
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func write(dir, file, val string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644)
}

func setMemory(dir string, v2 bool, b int64) error {
	v := strconv.FormatInt(b, 10)
	if v2 {
		if err := write(dir, "memory.max", v); err != nil {
			return err
		}
		_ = write(dir, "memory.swap.max", "0")
		return nil
	}
	if err := write(dir, "memory.limit_in_bytes", v); err != nil {
		return err
	}
	// With swap accounting, cap memory+swap at the same value.
	_ = write(dir, "memory.memsw.limit_in_bytes", v)
	return nil
}

func setCPU(dir string, v2 bool, cpus float64) error {
	const period = 100000
	quota := int64(cpus * period)
	if v2 {
		return write(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period))
	}
	if err := write(dir, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
		return err
	}
	return write(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
}

// Add moves pid into every directory of the group.
func (g *Group) Add(pid int) error {
	var errs []error
	for _, d := range g.Dirs {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Procs lists the pids in the group.
func (g *Group) Procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range g.Dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// Remove kills what is left in the group and deletes its directories.
func (g *Group) Remove() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps := g.Procs()
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: processes %v survive SIGKILL", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var errs []error
	for _, d := range g.Dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Available reports, for doctor-style messages, which controllers this
// host offers in any hierarchy.
func Available() map[string]bool {
	out := map[string]bool{}
	ms, _ := mounts()
	for _, m := range ms {
		for c := range m.controllers {
			if c == "memory" || c == "pids" || c == "cpu" {
				out[c] = true
			}
		}
	}
	return out
}

// ErrNoFreezer: the group has no cgroup v2 directory with cgroup.freeze
// (a host without the unified hierarchy, or a kernel before 5.2).
var ErrNoFreezer = errors.New("cgroup: no cgroup v2 freezer for this group (needs the unified hierarchy and Linux 5.2 or later)")

// Freeze stops (on) or resumes (off) every process of the group at once,
// through cgroup v2's cgroup.freeze, and returns when the kernel reports
// it done (cgroup.events), within 5 seconds. Frozen processes keep their
// memory; a fatal signal still ends them (Remove works on a frozen group).
func (g *Group) Freeze(on bool) error {
	dir := ""
	for _, d := range g.Dirs {
		if _, err := os.Stat(filepath.Join(d, "cgroup.freeze")); err == nil {
			dir = d
			break
		}
	}
	if dir == "" {
		return ErrNoFreezer
	}
	val, want := "0", "frozen 0"
	if on {
		val, want = "1", "frozen 1"
	}
	if err := write(dir, "cgroup.freeze", val); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for delay := 50 * time.Microsecond; ; delay = min(delay*2, 10*time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %s did not report %q within 5s", dir, want)
		}
		time.Sleep(delay)
	}
}

// Frozen reports whether the group is frozen now.
func (g *Group) Frozen() bool {
	for _, d := range g.Dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.events")); err == nil {
			return strings.Contains(string(b), "\nfrozen 1") || strings.HasPrefix(string(b), "frozen 1")
		}
	}
	return false
}
