package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// unifiedOf returns pid's cgroup in the unified hierarchy ("0::" line).
func unifiedOf(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestBoxLeavesTheRunnersCgroup: a box without any limit still gets a
// group of its own in the unified hierarchy, where systemd tracks the
// Runner's unit, so no box ever sits in the Runner's own cgroup.
func TestBoxLeavesTheRunnersCgroup(t *testing.T) {
	testenv.Root(t)
	ms, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	hasV2 := false
	for _, m := range ms {
		hasV2 = hasV2 || m.v2
	}
	if !hasV2 {
		testenv.Missing(t, "no unified (v2) cgroup hierarchy is mounted")
	}
	name := fmt.Sprintf("cgtest-%d", os.Getpid())
	g, ap := Create(name, Limits{})
	t.Cleanup(func() { _ = g.Remove() })
	for _, n := range ap.Notes {
		t.Errorf("note: %s", n)
	}
	if len(g.Dirs) != 1 || !strings.HasSuffix(g.Dirs[0], "/paddock/"+name) {
		t.Fatalf("dirs %v, want one unified group paddock/%s", g.Dirs, name)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	self, box := unifiedOf(t, "self"), unifiedOf(t, fmt.Sprint(cmd.Process.Pid))
	if box == self || !strings.HasSuffix(box, "/paddock/"+name) {
		t.Fatalf("the box is in %q, the Runner in %q", box, self)
	}
	if ps := g.Procs(); len(ps) != 1 || ps[0] != cmd.Process.Pid {
		t.Fatalf("procs %v", ps)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, d := range g.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left: %v", d, err)
		}
	}
}
