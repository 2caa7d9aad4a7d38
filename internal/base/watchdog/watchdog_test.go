package watchdog

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchdog: a deadline that passes fires once; one disarmed, or
// extended to Never, does not; Disarm says whether it fired; nothing stays
// armed after Disarm.
func TestWatchdog(t *testing.T) {
	w := New(10 * time.Millisecond)
	var fired, disarmed, never atomic.Int32
	wf := w.Arm(20*time.Millisecond, func() { fired.Add(1) })
	wd := w.Arm(20*time.Millisecond, func() { disarmed.Add(1) })
	wn := w.Arm(20*time.Millisecond, func() { never.Add(1) })
	wn.Extend(Never)
	if w.Disarm(wd) {
		t.Fatal("a watch disarmed at once says it fired")
	}
	deadline := time.Now().Add(5 * time.Second)
	for fired.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // several ticks more: nothing fires twice
	if !w.Disarm(wf) || fired.Load() != 1 {
		t.Fatalf("the passed deadline fired %d times", fired.Load())
	}
	if w.Disarm(wn) || never.Load() != 0 || disarmed.Load() != 0 {
		t.Fatalf("fired: extended to Never %d, disarmed %d", never.Load(), disarmed.Load())
	}
	if n := w.Armed(); n != 0 {
		t.Fatalf("%d watches armed after all were disarmed", n)
	}
	if d := time.Until(wn.Deadline()); d < time.Hour {
		t.Fatalf("Never's deadline is %v away", d)
	}
}
