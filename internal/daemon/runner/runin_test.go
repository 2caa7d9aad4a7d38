package runner

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
)

// fakeGuest is a guest that answers every exec with OK and then runs body
// on the stream: what a box that replaced its guest can send.
func fakeGuest(t *testing.T, body func(st net.Conn)) *channel.Client {
	t.Helper()
	a, b := net.Pipe()
	srv, err := channel.NewServer(b)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			st, _, _, err := srv.AcceptHeader()
			if err != nil {
				return
			}
			channel.WriteJSONLine(st, channel.Reply{OK: true})
			go body(st)
		}
	}()
	cl, err := channel.NewClient(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); srv.Close() })
	return cl
}

// TestRunInBounded: a command the Runner runs in a box ends within its
// time and keeps at most its output limit, whatever the box does; an
// ordinary one returns its output and exit code.
func TestRunInBounded(t *testing.T) {
	t.Run("no exit code", func(t *testing.T) {
		cl := fakeGuest(t, func(st net.Conn) { select {} })
		done := make(chan error, 1)
		go func() {
			_, _, err := runInLimits(cl, 200*time.Millisecond, 1<<20, nil, nil, "tmux", "show-environment")
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "no end after") {
				t.Fatalf("err %v, want a timeout", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("runIn waited past its timeout")
		}
	})
	t.Run("endless output", func(t *testing.T) {
		var sent atomic.Int64
		cl := fakeGuest(t, func(st net.Conn) {
			chunk := make([]byte, 64<<10)
			for channel.WriteFrame(st, channel.FrameStdout, chunk) == nil {
				sent.Add(int64(len(chunk)))
			}
		})
		out, _, err := runInLimits(cl, time.Minute, 1<<20, nil, nil, "cat", "settings.json")
		if err == nil || !strings.Contains(err.Error(), "more than") || out != "" {
			t.Fatalf("err %v, %d bytes kept; want the limit's error", err, len(out))
		}
		// The stream was closed: the box's writes stop soon after the
		// limit (within a window's worth, however loaded the machine).
		for deadline := time.Now().Add(10 * time.Second); ; {
			n := sent.Load()
			time.Sleep(200 * time.Millisecond)
			if m := sent.Load(); m == n && m <= 64<<20 {
				break
			}
			if time.Now().After(deadline) || sent.Load() > 64<<20 {
				t.Fatalf("the box still sends (%d bytes) after the limit", sent.Load())
			}
		}
	})
	t.Run("ordinary", func(t *testing.T) {
		cl := fakeGuest(t, func(st net.Conn) {
			channel.WriteFrame(st, channel.FrameStdout, []byte("hello"))
			channel.WriteFrame(st, channel.FrameExit, channel.ExitPayload(3))
		})
		out, code, err := runIn(cl, nil, nil, "echo", "hello")
		if err != nil || code != 3 || out != "hello" {
			t.Fatalf("%q %d %v", out, code, err)
		}
	})
}
