package channel

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestKeepAlivePauses: with a peer that answers nothing (a frozen guest:
// its end of the socket is open and never read), the client's keepalive
// ends the channel; paused, it does not, for many intervals; resumed, it
// does again.
func TestKeepAlivePauses(t *testing.T) {
	keepAliveInterval, writeTimeout = 20*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { keepAliveInterval, writeTimeout = 15*time.Second, 30*time.Second })
	frozenPeer := func(t *testing.T) *Client {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := net.FileConn(os.NewFile(uintptr(fds[0]), "client"))
		if err != nil {
			t.Fatal(err)
		}
		peer := os.NewFile(uintptr(fds[1]), "frozen guest")
		t.Cleanup(func() { ours.Close(); peer.Close() })
		c, err := NewClient(ours)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ended := func(c *Client, within time.Duration) bool {
		select {
		case <-c.Done():
			return true
		case <-time.After(within):
			return false
		}
	}
	if !ended(frozenPeer(t), 2*time.Second) {
		t.Fatal("a peer that answers nothing kept the channel open")
	}
	c := frozenPeer(t)
	c.PauseKeepAlive()
	if ended(c, 20*keepAliveInterval+2*writeTimeout) {
		t.Fatal("the channel ended while its keepalive was paused")
	}
	c.ResumeKeepAlive()
	if !ended(c, 2*time.Second) {
		t.Fatal("resumed, the keepalive did not end the channel to a peer that answers nothing")
	}
}
