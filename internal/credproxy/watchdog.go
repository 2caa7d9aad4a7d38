package credproxy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog enforces coarse deadlines — a slow request body, a slow
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
type watchdog struct {
	tick time.Duration

	mu      sync.Mutex
	items   map[*watch]struct{}
	running bool
}

// watch is one armed deadline.
type watch struct {
	deadline atomic.Int64 // unix nanoseconds
	fire     func()

	mu       sync.Mutex // orders fire against disarm
	fired    bool
	disarmed bool
}

// newWatchdog returns a watchdog whose tick suits the shortest timeout it
// will enforce: an eighth of it, between 5 ms and 1 s.
func newWatchdog(shortest time.Duration) *watchdog {
	tick := min(max(shortest/8, 5*time.Millisecond), time.Second)
	return &watchdog{tick: tick, items: map[*watch]struct{}{}}
}

// arm starts watching: fire runs once if the deadline, d from now (or as
// moved by extend), passes before disarm.
func (w *watchdog) arm(d time.Duration, fire func()) *watch {
	wt := &watch{fire: fire}
	wt.deadline.Store(time.Now().Add(d).UnixNano())
	w.add(wt)
	return wt
}

// add watches wt, starting the goroutine if none runs.
func (w *watchdog) add(wt *watch) {
	w.mu.Lock()
	w.items[wt] = struct{}{}
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
}

// extend moves the deadline to d from now.
func (wt *watch) extend(d time.Duration) {
	if d == never {
		wt.deadline.Store(math.MaxInt64) // no clock read for "no deadline"
		return
	}
	wt.deadline.Store(time.Now().Add(d).UnixNano())
}

// disarm stops watching and reports whether the deadline fired. Once it
// returns, fire has either run to its end or will never run.
func (w *watchdog) disarm(wt *watch) bool {
	wt.mu.Lock()
	wt.disarmed = true
	fired := wt.fired
	wt.mu.Unlock()
	w.mu.Lock()
	delete(w.items, wt)
	w.mu.Unlock()
	return fired
}

func (w *watchdog) run() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	var due []*watch
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
