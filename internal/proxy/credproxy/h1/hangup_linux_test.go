package h1

import (
	"net"
	"syscall"
	"testing"
	"time"
)

func fdOf(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	raw.Control(func(u uintptr) { fd = int(u) })
	return fd
}

// TestHangupReported: a peer's close is reported once, for its socket.
func TestHangupReported(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cl, _ := net.Dial("tcp", l.Addr().String())
	sv, _ := l.Accept()
	defer sv.Close()
	gone := make(chan struct{}, 2)
	reg := watchHangup(sv, func() { gone <- struct{}{} })
	if reg == nil {
		t.Fatal("a TCP socket was not registered")
	}
	defer reg.Stop()
	cl.Write([]byte("data is not a hang-up"))
	select {
	case <-gone:
		t.Fatal("data reported as a hang-up")
	case <-time.After(100 * time.Millisecond):
	}
	cl.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the hang-up was not reported")
	}
	if watchHangup(hiddenConn{sv}, func() {}) != nil {
		t.Fatal("a connection without a socket was registered")
	}
}

// TestHangupStopAfterClose: stopping the registration of a socket that was
// closed behind its back (a timeout, Shutdown) must not touch the socket
// that has since taken its descriptor number.
func TestHangupStopAfterClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	clA, _ := net.Dial("tcp", l.Addr().String())
	defer clA.Close()
	svA, _ := l.Accept()
	regA := watchHangup(svA, func() {})
	fdA := fdOf(t, svA)
	clB, _ := net.Dial("tcp", l.Addr().String()) // queued before A's number frees
	defer clB.Close()
	svA.Close()
	svB, _ := l.Accept()
	defer svB.Close()
	if fdOf(t, svB) != fdA {
		t.Skip("the descriptor number was not reused; nothing to check")
	}
	gone := make(chan struct{})
	regB := watchHangup(svB, func() { close(gone) })
	defer regB.Stop()
	regA.Stop()
	clB.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("stopping a closed socket's registration removed another socket's")
	}
}
