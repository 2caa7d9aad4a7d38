package guest

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/activity"
)

// drain takes what a subscriber has queued.
func drain(s *subscriber) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// TestHookFloodIsCapped: a box that floods the hook socket gets at most
// the burst of reports through at once, each subscriber's queue stays
// bounded, and a hook that connects and sends nothing holds nothing up.
func TestHookFloodIsCapped(t *testing.T) {
	g := &Guest{reports: newReportHub()}
	sock := filepath.Join(t.TempDir(), HookSocketName)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.listenHooks(ctx, sock); err != nil {
		t.Fatal(err)
	}
	sub := g.reports.subscribe()
	// Connections that never send: each times out on its own.
	for i := 0; i < 4; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	start := time.Now()
	for i := 0; i < 500; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer c.Close()
			if _, err := c.Write([]byte(`{"event":"Stop","session_id":"abc"}` + "\n")); err == nil {
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}()
	}
	// One over the size bound: refused.
	if c, err := net.Dial("unix", sock); err == nil {
		c.Write([]byte(`{"event":"Stop","session_id":"` + strings.Repeat("a", 2000) + "\"}\n"))
		c.Close()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond)
	got := drain(sub)
	if len(got) > subscriberQueue {
		t.Fatalf("%d reports queued, the queue holds %d", len(got), subscriberQueue)
	}
	g.reports.mu.Lock()
	passed := g.reports.passed
	g.reports.mu.Unlock()
	// However many the connection cap refused first (many, on a loaded
	// machine), what passed is the burst and the rate, never more.
	if most := reportBurst + int(reportRate*time.Since(start).Seconds()) + 1; passed > most {
		t.Fatalf("%d of %d reports passed within %v; the rate allows %d", passed, sent, time.Since(start), most)
	}
	for _, l := range got {
		if _, err := activity.ParseReport(l); err != nil {
			t.Fatalf("queued a bad report %q: %v", l, err)
		}
	}
	// After the flood, within a second, a report gets through again.
	time.Sleep(200 * time.Millisecond)
	Hook(filepath.Join(filepath.Dir(sock), "guest.sock"), activity.EventPaneDied, nil)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range drain(sub) {
			if strings.Contains(string(l), "pane-died") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("a report after the flood never arrived")
}

// TestHookNeverBlocks: with no guest listening, the hook command returns
// at once and quietly.
func TestHookNeverBlocks(t *testing.T) {
	t0 := time.Now()
	Hook(filepath.Join(t.TempDir(), "guest.sock"), activity.EventStop, strings.NewReader(`{"session_id":"x"}`))
	if d := time.Since(t0); d > 1500*time.Millisecond {
		t.Fatalf("the hook took %v without a guest", d)
	}
}
