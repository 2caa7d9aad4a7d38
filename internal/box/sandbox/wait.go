package sandbox

import (
	"context"
	"time"
)

// Waiter is an optional Backend feature, shaped like the Wait of
// containerd's sandbox controller: the Runner learns of a box's end from
// the backend, with how it ended, instead of inferring it from a channel
// that closed.
type Waiter interface {
	// Wait blocks until the box's guest has ended, or ctx is done (then
	// it returns ctx's error). A box that is not running returns at once.
	// ErrNotFound for an unknown id.
	Wait(ctx context.Context, id string) (ExitStatus, error)
}

// ExitStatus says how a box ended.
type ExitStatus struct {
	// Code is the guest's exit code, or -1 where the backend cannot tell
	// (local: the guest is not the Runner's child).
	Code int
	// OOMKilled: the kernel killed a process of the box for want of memory.
	OOMKilled bool
	// At is when the backend saw the end.
	At time.Time
}

// MemoryWatcher is an optional Backend feature: how often the kernel
// killed a process of a running box for want of memory. The Runner
// compares two readings to tell an out-of-memory kill of claude from
// another SIGKILL.
type MemoryWatcher interface {
	// OOMKills is the number of such kills in the box since it started
	// (a backend that only knows whether one happened says 0 or 1), and
	// the box's memory limit in bytes (0: unknown).
	OOMKills(ctx context.Context, id string) (kills int64, limit int64, err error)
}
