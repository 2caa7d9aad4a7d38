// Package runtimepolicy sets the Go runtime of the Runner's process: its
// garbage collector (Apply) and its monitor thread (Reexec).
//
// The Runner is a long-lived daemon whose live heap is small (a few MiB,
// plus about 45 KB per open stream) while the credential proxy allocates
// a few KiB per request. With Go's default GOGC=100 it would collect every
// few MiB allocated: dozens of cycles per second under load, measured at
// 8% of the proxy's throughput (docs/PERFORMANCE.md). paddock runs with
// GOGC=400 and a soft memory limit of 1 GiB instead, so the heap may grow
// to five times what is live, never past the limit while what is live
// fits under it.
package runtimepolicy

import (
	"runtime/debug"
)

const (
	// Percent is the GOGC the Runner runs with.
	Percent = 400
	// Limit is the Runner's soft memory limit, in bytes.
	Limit = 1 << 30
)

// Apply sets Percent and Limit, each unless the environment (getenv)
// already sets it through GOGC or GOMEMLIMIT, which the runtime has
// applied; it reports what it set.
func Apply(getenv func(string) string) (setPercent, setLimit bool) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
		setPercent = true
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(Limit)
		setLimit = true
	}
	return setPercent, setLimit
}
