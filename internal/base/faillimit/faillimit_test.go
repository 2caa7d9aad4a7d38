package faillimit

import (
	"fmt"
	"testing"
	"time"
)

func TestBlockedAfterMaxWithinWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	l := New(3, time.Minute, 100)
	for i := 0; i < 2; i++ {
		l.Fail("a", t0.Add(time.Duration(i)*time.Second))
	}
	if l.Blocked("a", t0.Add(5*time.Second)) {
		t.Fatal("blocked after 2 of 3")
	}
	l.Fail("a", t0.Add(10*time.Second))
	if !l.Blocked("a", t0.Add(11*time.Second)) || l.Blocked("b", t0.Add(11*time.Second)) {
		t.Fatal("3 failures: a blocked, b not")
	}
	// The window counts from the first failure.
	if l.Blocked("a", t0.Add(61*time.Second)) {
		t.Fatal("still blocked after the window")
	}
	l.Fail("a", t0.Add(62*time.Second))
	if l.Blocked("a", t0.Add(63*time.Second)) {
		t.Fatal("a new window starts from one failure")
	}
}

// TestBounded: a flood of keys keeps at most track counted, forgetting
// the oldest first, and the newest are still limited.
func TestBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	l := New(2, time.Minute, 10)
	for i := 0; i < 1000; i++ {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		l.Fail(fmt.Sprint(i), now)
		l.Fail(fmt.Sprint(i), now)
	}
	if len(l.m) > 10 {
		t.Fatalf("%d keys counted", len(l.m))
	}
	if !l.Blocked("999", t0.Add(time.Second)) || l.Blocked("0", t0.Add(time.Second)) {
		t.Fatal("the newest key is not limited, or the oldest still is")
	}
}
