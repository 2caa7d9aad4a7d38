// Package watchdog enforces coarse deadlines from one goroutine per
// Watchdog, instead of a runtime timer or socket deadline each.
package watchdog

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Watchdog enforces coarse deadlines — a slow request body, a slow
// upstream head, a silent stream — from one goroutine that wakes every
// tick while something is armed, instead of a runtime timer or socket
// deadline per request. Arming a socket deadline or timer earlier than the
// network poller's next wake makes the runtime wake a thread to re-arm it:
// syscalls and a context switch per request on the proxy's hot path, which
// the profile showed.
//
// A deadline fires between its time and one tick later. fire runs on the
// watchdog's goroutine and must not block. With nothing armed, no
// goroutine runs.
type Watchdog struct {
	tick time.Duration

	mu      sync.Mutex
	items   map[*Watch]struct{}
	running bool
}

// Watch is one armed deadline.
type Watch struct {
	deadline atomic.Int64 // unix nanoseconds
	fire     func()

	mu       sync.Mutex // orders fire against disarm
	fired    bool
	disarmed bool
}

// New returns a Watchdog whose tick suits the shortest timeout it
// will enforce: an eighth of it, between 5 ms and 1 s.
func New(shortest time.Duration) *Watchdog {
	tick := min(max(shortest/8, 5*time.Millisecond), time.Second)
	return &Watchdog{tick: tick, items: map[*Watch]struct{}{}}
}

// Arm starts watching: fire runs once if the deadline, d from now (or as
// moved by Extend), passes before Disarm.
func (w *Watchdog) Arm(d time.Duration, fire func()) *Watch {
	wt := &Watch{fire: fire}
	wt.deadline.Store(time.Now().Add(d).UnixNano())
	w.add(wt)
	return wt
}

// add watches wt, starting the goroutine if none runs.
func (w *Watchdog) add(wt *Watch) {
	w.mu.Lock()
	w.items[wt] = struct{}{}
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
}

// Extend moves the deadline to d from now; Never is no deadline.
func (wt *Watch) Extend(d time.Duration) {
	if d == Never {
		wt.deadline.Store(math.MaxInt64) // no clock read for "no deadline"
		return
	}
	wt.deadline.Store(time.Now().Add(d).UnixNano())
}

// Disarm stops watching and reports whether the deadline fired. Once it
// returns, fire has either run to its end or will never run.
func (w *Watchdog) Disarm(wt *Watch) bool {
	wt.mu.Lock()
	wt.disarmed = true
	fired := wt.fired
	wt.mu.Unlock()
	w.mu.Lock()
	delete(w.items, wt)
	w.mu.Unlock()
	return fired
}

func (w *Watchdog) run() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	var due []*Watch
	for now := range t.C {
		n := now.UnixNano()
		due = due[:0]
		w.mu.Lock()
		for wt := range w.items {
			if wt.deadline.Load() <= n {
				delete(w.items, wt)
				due = append(due, wt)
			}
		}
		idle := len(w.items) == 0
		if idle {
			w.running = false
		}
		w.mu.Unlock()
		for _, wt := range due {
			wt.mu.Lock()
			switch {
			case wt.disarmed:
			case wt.deadline.Load() > time.Now().UnixNano():
				w.add(wt) // extended since it was found due: watch on
			default:
				wt.fired = true
				wt.fire()
			}
			wt.mu.Unlock()
		}
		if idle {
			return
		}
	}
}

// Never is a deadline that does not come: Extend(Never) leaves a watch
// armed without one.
const Never = time.Duration(math.MaxInt64 / 4)

// Deadline is when the watch fires, as last armed or extended.
func (wt *Watch) Deadline() time.Time { return time.Unix(0, wt.deadline.Load()) }

// Armed is how many watches are armed: for tests, that none is left over.
func (w *Watchdog) Armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.items)
}
