package h1

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type countCloser struct{ n atomic.Int32 }

func (c *countCloser) Close() error { c.n.Add(1); return nil }

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestRequestContextIsACancel: the server's request context behaves as
// context.WithCancel of its parent, for everything the standard library
// and paddock do with one.
func TestRequestContextIsACancel(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx, cancel := newRequestContext(parent)
	if _, ok := ctx.(*requestContext); !ok {
		t.Fatalf("an uncancellable parent got %T", ctx)
	}
	if ctx.Value(key{}) != "v" || ctx.Err() != nil {
		t.Fatal("values or Err before cancel")
	}
	early := ctx.Done()
	child, childCancel := context.WithCancel(ctx)
	defer childCancel()
	var ran atomic.Int32
	context.AfterFunc(ctx, func() { ran.Add(1) })
	stopped := context.AfterFunc(ctx, func() { ran.Add(100) })
	if !stopped() {
		t.Fatal("stop before cancel reported false")
	}
	cancel()
	cancel() // idempotent
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err %v", ctx.Err())
	}
	if !closedWithin(early, 0) || !closedWithin(ctx.Done(), 0) {
		t.Fatal("Done not closed after cancel")
	}
	if !closedWithin(child.Done(), 5*time.Second) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatal("a derived context was not cancelled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for ran.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if n := ran.Load(); n != 1 {
		t.Fatalf("after-functions ran %d (want the live one once, the stopped one never)", n)
	}
	// Registered after the cancel: runs at once.
	late := make(chan struct{})
	if context.AfterFunc(ctx, func() { close(late) })() {
		t.Fatal("stop after cancel reported true")
	}
	if !closedWithin(late, 5*time.Second) {
		t.Fatal("an after-function registered after cancel never ran")
	}

	// A parent that can be cancelled gets the standard context.
	p2, cancel2 := context.WithCancel(context.Background())
	ctx2, c2 := newRequestContext(p2)
	defer c2()
	cancel2()
	if !closedWithin(ctx2.Done(), 5*time.Second) {
		t.Fatal("a cancellable parent's cancel did not reach the request")
	}
}

// TestRequestContextWatchClose: a cancel closes the watched connection
// once; UnwatchClose before it keeps the connection; after it, it says so.
func TestRequestContextWatchClose(t *testing.T) {
	ctx, cancel := newRequestContext(context.Background())
	rc := ctx.(*requestContext)
	var kept countCloser
	rc.WatchClose(&kept)
	if !rc.UnwatchClose() {
		t.Fatal("unwatch before cancel reported false")
	}
	var cut countCloser
	rc.WatchClose(&cut)
	cancel()
	if kept.n.Load() != 0 || cut.n.Load() != 1 {
		t.Fatalf("closes: unwatched %d, watched %d", kept.n.Load(), cut.n.Load())
	}
	if rc.UnwatchClose() {
		t.Fatal("unwatch after cancel reported true")
	}
	var late countCloser
	rc.WatchClose(&late)
	if late.n.Load() != 1 {
		t.Fatal("a connection watched after cancel was not closed at once")
	}
	// Through watchCancel, as Transport uses it, on both kinds of context.
	for _, mk := range []func() (context.Context, context.CancelFunc){
		func() (context.Context, context.CancelFunc) { return newRequestContext(context.Background()) },
		func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
	} {
		ctx, cancel := mk()
		var c countCloser
		w := watchCancel(ctx, &c)
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for c.n.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if c.n.Load() != 1 || w.stop() {
			t.Fatalf("%T: closes %d after cancel", ctx, c.n.Load())
		}
	}
}

// TestRequestContextRace: cancel races watch, unwatch, Done and
// AfterFunc (run with -race); every watched connection still watched at
// the cancel is closed exactly once.
func TestRequestContextRace(t *testing.T) {
	for i := 0; i < 200; i++ {
		ctx, cancel := newRequestContext(context.Background())
		rc := ctx.(*requestContext)
		var c countCloser
		var wg sync.WaitGroup
		var stoppedInTime atomic.Bool
		wg.Add(3)
		go func() { defer wg.Done(); rc.WatchClose(&c); stoppedInTime.Store(rc.UnwatchClose()) }()
		go func() { defer wg.Done(); <-ctx.Done() }()
		go func() { defer wg.Done(); context.AfterFunc(ctx, func() {}) }()
		cancel()
		wg.Wait()
		if n := c.n.Load(); n > 1 || (n == 0) != stoppedInTime.Load() {
			t.Fatalf("closes %d, unwatch in time %v", n, stoppedInTime.Load())
		}
	}
}
