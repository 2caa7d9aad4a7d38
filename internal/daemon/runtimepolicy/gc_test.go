package runtimepolicy

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	env := map[string]string{}
	p, l := Apply(func(k string) string { return env[k] })
	if !p || !l || debug.SetGCPercent(-2) != Percent || debug.SetMemoryLimit(-1) != Limit {
		t.Fatalf("not applied: %v %v", p, l)
	}
	debug.SetGCPercent(77)
	debug.SetMemoryLimit(12345)
	env = map[string]string{"GOGC": "77", "GOMEMLIMIT": "12345"}
	p, l = Apply(func(k string) string { return env[k] })
	if p || l || debug.SetGCPercent(-2) != 77 || debug.SetMemoryLimit(-1) != 12345 {
		t.Fatal("the environment's settings were overridden")
	}
}
