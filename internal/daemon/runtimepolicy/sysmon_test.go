package runtimepolicy

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, c := range []struct {
		in      []string
		want    []string
		changed bool
	}{
		{[]string{"A=1"}, []string{"A=1", "GODEBUG=" + SysmonSetting}, true},
		{[]string{"GODEBUG="}, []string{"GODEBUG=" + SysmonSetting}, true},
		{[]string{"GODEBUG=madvdontneed=1", "B=2"}, []string{"GODEBUG=madvdontneed=1," + SysmonSetting, "B=2"}, true},
		{[]string{"GODEBUG=schedtrace=1000"}, []string{"GODEBUG=schedtrace=1000"}, false},
		{[]string{"GODEBUG=x=1, schedtrace=0"}, []string{"GODEBUG=x=1, schedtrace=0"}, false},
		// The first GODEBUG is the one a Go process reads.
		{[]string{"GODEBUG=schedtrace=5", "GODEBUG=x=1"}, []string{"GODEBUG=schedtrace=5", "GODEBUG=x=1"}, false},
		{[]string{"GODEBUG=x=1", "GODEBUG=schedtrace=5"}, []string{"GODEBUG=x=1," + SysmonSetting, "GODEBUG=schedtrace=5"}, true},
	} {
		in := slices.Clone(c.in)
		got, changed := Env(in)
		if !slices.Equal(got, c.want) || changed != c.changed {
			t.Errorf("Env(%q) = %q, %v; want %q, %v", c.in, got, changed, c.want, c.changed)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("Env changed its argument: %q", in)
		}
	}
}

const reexecChildEnv = "PADDOCK_TEST_REEXEC_CHILD"

// TestMain makes the test binary, with reexecChildEnv set, a process that
// prints its pid and GODEBUG, calls Reexec, and prints them again.
func TestMain(m *testing.M) {
	if os.Getenv(reexecChildEnv) != "" {
		fmt.Printf("%d %s\n", os.Getpid(), os.Getenv("GODEBUG"))
		if err := Reexec(); err != nil {
			fmt.Println("error:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReexec: a process without the setting replaces itself, keeping its
// pid, and comes back with it; then it does not exec again.
func TestReexec(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), reexecChildEnv+"=1", "GODEBUG=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("want two lines (before and after the exec), got %q", out)
	}
	pid0, env0, _ := strings.Cut(lines[0], " ")
	pid1, env1, _ := strings.Cut(lines[1], " ")
	if pid0 != pid1 || env0 != "" || env1 != SysmonSetting {
		t.Fatalf("before %q, after %q", lines[0], lines[1])
	}
}
