package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Connect implements sandbox.Backend. Where the daemon runs on this host
// and the Runner is root, the channel goes straight to the guest's socket
// inside the container's root (sandbox.DialInRoot, as for local boxes):
// no `docker exec`, which costs 60–90 ms a channel on Debian 12's daemon
// and a process in the box for the channel's life. Elsewhere (a remote
// daemon, a Runner that is in the docker group but not root, a daemon
// whose containers' pids this Runner cannot see) it goes through
// `paddock guest bridge` under `docker exec -i`.
func (b *Backend) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	if b.direct {
		c, err := b.connectDirect(ctx, id)
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, sandbox.ErrNotSocket), errors.Is(err, pdkerr.ErrConflict), errors.Is(err, pdkerr.ErrNotFound), ctx.Err() != nil:
			return nil, err
		case errors.Is(err, errNotDirect):
			// The pid is not this container's here: the exec path.
		default:
			return nil, err
		}
	}
	return b.connectExec(ctx, id)
}

// errNotDirect: the container's process cannot be reached through /proc
// here; Connect falls back to docker exec.
var errNotDirect = errors.New("the box's guest cannot be reached through /proc here")

// directWait bounds how long connectDirect waits for a guest that runs
// but has no socket yet (it listens within milliseconds of its start).
const directWait = 5 * time.Second

// guestProc is a running box's guest (PID 1 in the container) as this
// host sees it: pid and start time name one process, never a later one
// with the pid reused.
type guestProc struct {
	pid   int
	start uint64
}

// isLocalDaemon: the daemon's address is a unix socket, so it runs on
// this host (or in a namespace that shares its /proc; connectDirect checks
// each container's process).
func isLocalDaemon(cli *client.Client) bool {
	return strings.HasPrefix(cli.DaemonHost(), "unix://")
}

// guestOf finds the pid of box id's guest, from the cache while that
// process lives, else from the daemon; it checks that the process is the
// container's own (its cgroup names the container's id).
func (b *Backend) guestOf(ctx context.Context, id string) (guestProc, error) {
	b.pmu.Lock()
	g, ok := b.procs[id]
	b.pmu.Unlock()
	if ok {
		if st, alive := sandbox.ProcStartTime(g.pid); alive && st == g.start {
			return g, nil
		}
	}
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return guestProc{}, mapErr("inspect box", err)
	}
	ins := res.Container
	if ins.State == nil || !ins.State.Running || ins.State.Pid <= 0 {
		return guestProc{}, fmt.Errorf("box %s is not running: %w", id, pdkerr.ErrConflict)
	}
	if ins.State.Paused {
		return guestProc{}, fmt.Errorf("box %s is frozen (paused): %w", id, pdkerr.ErrConflict)
	}
	if ins.HostConfig != nil && !sharesKernel(ins.HostConfig.Runtime) {
		// gVisor's sandbox process or a VM: the box's files are not under
		// /proc/PID/root here (runsc's is an empty chroot).
		return guestProc{}, fmt.Errorf("%w: box %s runs on %s", errNotDirect, id, ins.HostConfig.Runtime)
	}
	g = guestProc{pid: ins.State.Pid}
	var alive bool
	if g.start, alive = sandbox.ProcStartTime(g.pid); !alive {
		return guestProc{}, fmt.Errorf("%w: pid %d of box %s is not a process here", errNotDirect, g.pid, id)
	}
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(g.pid) + "/cgroup")
	if err != nil || !strings.Contains(string(cg), ins.ID) {
		return guestProc{}, fmt.Errorf("%w: pid %d is not in box %s's cgroup", errNotDirect, g.pid, id)
	}
	b.pmu.Lock()
	b.procs[id] = g
	b.pmu.Unlock()
	return g, nil
}

// sharesKernel: a container of runtime rt (its HostConfig.Runtime, ""
// for the daemon's default, which Capabilities reports) runs its processes
// on this host's kernel, where /proc/PID/root is the box's root.
func sharesKernel(rt string) bool {
	return rt == "" || runtimes.KindOf(rt, "") == runtimes.Shared
}

// forget drops what guestOf cached for a box that stops or goes.
func (b *Backend) forget(id string) {
	b.pmu.Lock()
	delete(b.procs, id)
	b.pmu.Unlock()
}

func (b *Backend) connectDirect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	g, err := b.guestOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return sandbox.DialGuest(ctx, id, g.pid, g.start, directWait, nil)
}

// connectExec is the channel through `paddock guest bridge` under
// `docker exec -i`.
func (b *Backend) connectExec(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	// No inspect first: exec create itself refuses a box that does not run.
	ex, err := b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", sandbox.BoxUID, sandbox.BoxUID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{GuestPath, "guest", "bridge", "--socket", sandbox.GuestSocket},
		Env:          []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("box %s is not running: %v: %w", id, err, pdkerr.ErrConflict)
		}
		return nil, mapErr("exec bridge", err)
	}
	hj, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, mapErr("attach bridge", err)
	}
	pr, pw := io.Pipe()
	go func() {
		// Without a tty, Docker multiplexes stdout and stderr in frames.
		_, err := stdcopy.StdCopy(pw, io.Discard, hj.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return &execConn{hj: hj.Conn, closeWrite: hj.CloseWrite, r: pr, close: hj.Close}, nil
}

type execConn struct {
	hj         io.Writer
	closeWrite func() error
	r          *io.PipeReader
	close      func()
	once       sync.Once
}

func (c *execConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.hj.Write(p) }
func (c *execConn) Close() error {
	c.once.Do(func() {
		_ = c.closeWrite()
		c.close()
		c.r.Close()
	})
	return nil
}
