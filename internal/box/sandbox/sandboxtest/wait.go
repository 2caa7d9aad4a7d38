package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// waitForTheEnd is run for a backend that is a sandbox.Waiter: Wait blocks
// while the box runs, returns ctx's own error as soon as ctx is done,
// returns when the box is stopped, and at once for a box that is not
// running; the id of a removed box is not found.
func waitForTheEnd(t *testing.T, s Setup) {
	ctx := context.Background()
	w := s.Backend.(sandbox.Waiter)
	b := StartBox(t, s, uniqueSession("wait"), sandbox.Limits{}, "")
	b.Client.Close()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cancelled, stopped := WaitAsync(cctx, w, b.ID), WaitAsync(ctx, w, b.ID)
	time.Sleep(time.Second)
	StillWaiting(t, cancelled, "the box runs")
	StillWaiting(t, stopped, "the box runs")
	cancel()
	if r := Within(t, cancelled, 5*time.Second, "ctx cancelled"); r.Err != context.Canceled {
		t.Fatalf("Wait after its ctx was cancelled: %+v %v, want ctx's error", r.Status, r.Err)
	}
	StillWaiting(t, stopped, "the box runs")

	if err := s.Backend.Stop(ctx, b.ID, sandbox.StopOptions{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if r := Within(t, stopped, 30*time.Second, "the box stopped"); r.Err != nil || r.Status.At.IsZero() {
		t.Fatalf("Wait for a box stopped: %+v %v", r.Status, r.Err)
	}
	t0 := time.Now()
	if r := Within(t, WaitAsync(ctx, w, b.ID), 10*time.Second, "a stopped box"); r.Err != nil || r.Status.At.IsZero() {
		t.Fatalf("Wait for a stopped box: %+v %v", r.Status, r.Err)
	}
	t.Logf("Wait for a stopped box returned in %v", time.Since(t0))

	if err := s.Backend.Remove(ctx, b.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := Within(t, WaitAsync(ctx, w, b.ID), 10*time.Second, "a removed box"); !errdefs.Is(r.Err, errdefs.ErrNotFound) {
		t.Fatalf("Wait for a removed box: %+v %v, want not found", r.Status, r.Err)
	}
}

// Waited is what a Wait run by WaitAsync returned.
type Waited struct {
	Status sandbox.ExitStatus
	Err    error
}

// WaitAsync runs w.Wait(ctx, id) in a goroutine of its own, which ends when
// Wait returns; the result comes on the channel (buffered: nobody need
// read it).
func WaitAsync(ctx context.Context, w sandbox.Waiter, id string) <-chan Waited {
	res := make(chan Waited, 1)
	go func() {
		st, err := w.Wait(ctx, id)
		res <- Waited{st, err}
	}()
	return res
}

// Within returns the result of a WaitAsync, failing t if none comes within d.
func Within(t testing.TB, res <-chan Waited, d time.Duration, what string) Waited {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(d):
		t.Fatalf("%s: Wait has not returned after %v", what, d)
		return Waited{}
	}
}

// StillWaiting fails t if a WaitAsync has returned already.
func StillWaiting(t testing.TB, res <-chan Waited, what string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("%s: Wait returned %+v %v", what, r.Status, r.Err)
	default:
	}
}
