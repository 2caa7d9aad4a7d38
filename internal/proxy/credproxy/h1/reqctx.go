package h1

import (
	"context"
	"io"
	"sync"
)

// requestContext is the context of one request on Server when
// the connection's context is never cancelled (the usual case): its cancel
// and the upstream connection to close on cancel live in one allocation.
// context.WithCancel and a context.AfterFunc on it cost about ten — a
// cancelCtx, its Done channel, a children map, closures — on every request
// (docs/PERFORMANCE.md).
//
// Contracts: it behaves as a context.WithCancel of its parent. After
// cancel, Err is context.Canceled and Done (made on first use) is closed;
// functions registered with AfterFunc run once, each on its own goroutine,
// as context.AfterFunc runs them — so a context derived from this one is
// cancelled on such a goroutine, just after cancel returns. The closer
// given to WatchClose (CloseWatcher) is closed at once, on the cancelling
// goroutine, unless UnwatchClose came first. There is one such slot: one
// upstream exchange per request at a time, which is all a proxy needs.
type requestContext struct {
	context.Context // the parent: values; never done

	mu     sync.Mutex
	err    error
	done   chan struct{}
	closer io.Closer
	funcs  map[*afterFunc]struct{}
}

type afterFunc struct{ f func() }

// newRequestContext returns the request context under parent and its
// cancel; a parent that can be cancelled gets context.WithCancel instead.
func newRequestContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent.Done() != nil {
		return context.WithCancel(parent)
	}
	c := &requestContext{Context: parent}
	return c, c.cancel
}

func (c *requestContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *requestContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *requestContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	closer, funcs := c.closer, c.funcs
	c.closer, c.funcs = nil, nil
	c.mu.Unlock()
	if closer != nil {
		closer.Close()
	}
	for a := range funcs {
		go a.f()
	}
}

// WatchClose implements CloseWatcher.
func (c *requestContext) WatchClose(cl io.Closer) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		cl.Close()
		return
	}
	c.closer = cl
	c.mu.Unlock()
}

// UnwatchClose implements CloseWatcher.
func (c *requestContext) UnwatchClose() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closer = nil
	return c.err == nil
}

// AfterFunc lets context.AfterFunc, and contexts derived from this one,
// register without a goroutine each.
func (c *requestContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.funcs == nil {
		c.funcs = map[*afterFunc]struct{}{}
	}
	c.funcs[a] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.funcs[a]; !ok {
			return false
		}
		delete(c.funcs, a)
		return true
	}
}

// String names the context, as the standard ones do.
func (c *requestContext) String() string { return "h1.requestContext" }
