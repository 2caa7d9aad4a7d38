package h1

import (
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangupReg is one socket's registration with the hang-up watcher.
type hangupReg interface {
	// Stop ends the registration. A report already taken may still run
	// its callback once, which must then do no harm.
	Stop()
}

// hangups reports client sockets that the peer closed or reset, from one
// epoll set of its own (the runtime's network poller keeps its own set;
// one socket may sit in both). A socket is registered once per connection
// for EPOLLRDHUP, edge-triggered: one report when the peer shuts its side
// or the connection breaks, none for data. No goroutine, timer or syscall
// runs per request; one thread waits in epoll_wait for the process's life.
type hangups struct {
	epfd int
	mu   sync.Mutex
	next uint32
	regs map[uint32]*hangupEntry
}

type hangupEntry struct {
	h    *hangups
	id   uint32
	raw  syscall.RawConn
	gone func()
}

var (
	hangupOnce sync.Once
	hangupW    *hangups // nil if epoll is unavailable
)

// watchHangup registers c's socket; gone runs (on the watcher's goroutine,
// at most once) when the peer hangs up. It returns nil for a connection
// without a socket, or when epoll is unavailable: the caller then watches
// with background reads.
func watchHangup(c net.Conn, gone func()) hangupReg {
	hangupOnce.Do(startHangups)
	if hangupW == nil {
		return nil
	}
	var sc syscall.Conn
	switch t := c.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc = t
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	h := hangupW
	e := &hangupEntry{h: h, raw: raw, gone: gone}
	h.mu.Lock()
	for {
		h.next++
		if _, used := h.regs[h.next]; !used {
			break
		}
	}
	e.id = h.next
	h.regs[e.id] = e
	h.mu.Unlock()
	var cerr error
	err = raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(e.id)}
		cerr = unix.EpollCtl(h.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		h.mu.Lock()
		delete(h.regs, e.id)
		h.mu.Unlock()
		return nil
	}
	return e
}

// Stop removes the registration. It goes through the socket's RawConn,
// which holds the descriptor while it runs: a socket already closed (by a
// timeout, by Shutdown) has left the set by itself, and its number, which
// may already belong to another connection, is not touched.
func (e *hangupEntry) Stop() {
	h := e.h
	h.mu.Lock()
	delete(h.regs, e.id)
	h.mu.Unlock()
	_ = e.raw.Control(func(fd uintptr) {
		_ = unix.EpollCtl(h.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

func startHangups() {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	h := &hangups{epfd: fd, regs: map[uint32]*hangupEntry{}}
	hangupW = h
	go h.run()
}

func (h *hangups) run() {
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(h.epfd, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
				continue
			}
			h.mu.Lock()
			e := h.regs[uint32(ev.Fd)]
			delete(h.regs, uint32(ev.Fd))
			h.mu.Unlock()
			if e != nil {
				e.gone()
			}
		}
	}
}
