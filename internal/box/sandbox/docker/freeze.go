// The freeze tier on docker: a box paused and unpaused.

package docker

import (
	"context"
	"fmt"

	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"

	"github.com/moby/moby/client"
)

// Freeze implements sandbox.Freezer: docker pause (the cgroup freezer,
// through the daemon). A box someone paused already is frozen: no error.
func (b *Backend) Freeze(ctx context.Context, id string) error {
	_, err := b.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	if err == nil {
		return nil
	}
	switch b.pauseState(ctx, id) {
	case boxPaused:
		return nil
	case boxNotRunning:
		return fmt.Errorf("pause box %s: it is not running: %w", id, pdkerr.ErrConflict)
	}
	return mapErr("pause box "+id, err)
}

// Thaw implements sandbox.Freezer: docker unpause. A running box that is
// not paused (someone ran docker unpause) is thawed already: no error.
// (Docker 20.10 refuses that unpause with a 500, later versions a 409.)
func (b *Backend) Thaw(ctx context.Context, id string) error {
	_, err := b.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	if err == nil {
		return nil
	}
	switch b.pauseState(ctx, id) {
	case boxRunning:
		return nil
	case boxNotRunning:
		// Stopped meanwhile (docker stop, a daemon restart): nothing to
		// thaw, as for a local box.
		return fmt.Errorf("unpause box %s: it is not running: %w", id, pdkerr.ErrConflict)
	}
	return mapErr("unpause box "+id, err)
}

// A box's state, as pauseState finds it.
const (
	boxUnknown    = iota // not found, or the inspect failed
	boxNotRunning        // created, stopped or dead
	boxRunning           // running, not paused
	boxPaused            // running and paused
)

// pauseState inspects box id, after a pause or unpause the daemon refused.
func (b *Backend) pauseState(ctx context.Context, id string) int {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case err != nil || res.Container.State == nil:
		return boxUnknown
	case !res.Container.State.Running:
		return boxNotRunning
	case res.Container.State.Paused:
		return boxPaused
	}
	return boxRunning
}
