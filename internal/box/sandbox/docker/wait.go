package docker

import (
	"context"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

var (
	_ sandbox.Waiter        = (*Backend)(nil)
	_ sandbox.MemoryWatcher = (*Backend)(nil)
)

// Wait implements sandbox.Waiter with Docker's own container wait, and
// State.OOMKilled from an inspect after it.
func (b *Backend) Wait(ctx context.Context, id string) (sandbox.ExitStatus, error) {
	if _, err := b.Inspect(ctx, id); err != nil { // a box of this paddock only
		return sandbox.ExitStatus{}, err
	}
	w := b.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	st := sandbox.ExitStatus{Code: -1}
	select {
	case res := <-w.Result:
		st.Code = int(res.StatusCode)
	case err := <-w.Error:
		if ctx.Err() != nil {
			return sandbox.ExitStatus{}, ctx.Err()
		}
		return sandbox.ExitStatus{}, mapErr("wait for box", err)
	}
	st.At = time.Now().UTC()
	if res, err := b.cli.ContainerInspect(context.WithoutCancel(ctx), id, client.ContainerInspectOptions{}); err == nil && res.Container.State != nil {
		st.OOMKilled = res.Container.State.OOMKilled
	}
	return st, nil
}

// OOMKills implements sandbox.MemoryWatcher. Docker keeps no count, only
// State.OOMKilled, which it sets on the first out-of-memory kill in the
// container and keeps until the container starts again: 0 or 1.
func (b *Backend) OOMKills(ctx context.Context, id string) (int64, int64, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, 0, mapErr("inspect box", err)
	}
	ins := res.Container
	var kills, limit int64
	if ins.State != nil && ins.State.OOMKilled {
		kills = 1
	}
	if ins.HostConfig != nil {
		limit = ins.HostConfig.Memory
	}
	return kills, limit, nil
}
