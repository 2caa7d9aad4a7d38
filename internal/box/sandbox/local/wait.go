package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

var (
	_ sandbox.Waiter        = (*Backend)(nil)
	_ sandbox.MemoryWatcher = (*Backend)(nil)
)

// Wait implements sandbox.Waiter. The guest is bwrap's child, not the
// Runner's, so it is watched through a pidfd (checked against the start
// time recorded with its pid, so a recycled pid is never waited for);
// its exit code is not known here (Code -1).
func (b *Backend) Wait(ctx context.Context, id string) (sandbox.ExitStatus, error) {
	b.mu.Lock()
	r, err := b.load(id)
	b.mu.Unlock()
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	ended := func() sandbox.ExitStatus {
		kills, _ := oomKills(r)
		return sandbox.ExitStatus{Code: -1, OOMKilled: kills > 0, At: time.Now().UTC()}
	}
	if r.PID == 0 {
		return ended(), nil
	}
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil || !alive(r.PID, r.PIDStart) {
		if fd >= 0 && err == nil {
			unix.Close(fd)
		}
		return ended(), nil
	}
	defer unix.Close(fd)
	for {
		// A pidfd polls readable once its process has exited; wake up
		// now and then to notice ctx.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 500)
		if n > 0 || err != nil && err != unix.EINTR {
			return ended(), nil
		}
		if ctx.Err() != nil {
			return sandbox.ExitStatus{}, ctx.Err()
		}
	}
}

// OOMKills implements sandbox.MemoryWatcher from the box's memory cgroup:
// memory.events (v2) or memory.oom_control (v1), whose oom_kill counts
// the processes the kernel killed there.
func (b *Backend) OOMKills(_ context.Context, id string) (int64, int64, error) {
	b.mu.Lock()
	r, err := b.load(id)
	b.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	kills, err := oomKills(r)
	return kills, r.Limits.MemoryBytes, err
}

func oomKills(r *record) (int64, error) {
	if r.Cgroup == nil {
		return 0, nil
	}
	var last error
	for _, d := range r.Cgroup.Dirs {
		for _, f := range []string{"memory.events", "memory.oom_control"} {
			bs, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				last = err
				continue
			}
			for _, l := range strings.Split(string(bs), "\n") {
				if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
					return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
		}
	}
	if last != nil && !os.IsNotExist(last) {
		return 0, last
	}
	return 0, nil
}
