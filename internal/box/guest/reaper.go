package guest

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// procs starts processes and collects their exit status. As PID 1 it also
// reaps every orphan that the kernel hands it (tmux's server, daemons), by
// waiting for any child and dispatching the statuses of its own.
type procs struct {
	reap bool

	mu      sync.Mutex // held across start+register, so the reaper never misses a pid
	waiting map[int]chan syscall.WaitStatus
	// orphan, if set, is called (without mu) after an orphan was reaped:
	// tmux's server is one, so its end can be noticed.
	orphan func()
}

func newProcs(reap bool) *procs {
	p := &procs{reap: reap, waiting: map[int]chan syscall.WaitStatus{}}
	if reap {
		go p.reapLoop()
	}
	return p
}

// start starts a process and returns a channel that receives its status.
func (p *procs) start(argv0 string, argv []string, attr *os.ProcAttr) (*os.Process, <-chan syscall.WaitStatus, error) {
	ch := make(chan syscall.WaitStatus, 1)
	p.mu.Lock()
	proc, err := os.StartProcess(argv0, argv, attr)
	if err != nil {
		p.mu.Unlock()
		return nil, nil, err
	}
	if p.reap {
		p.waiting[proc.Pid] = ch
		p.mu.Unlock()
		return proc, ch, nil
	}
	p.mu.Unlock()
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(proc.Pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		ch <- ws
	}()
	return proc, ch, nil
}

func (p *procs) reapLoop() {
	sigc := make(chan os.Signal, 64)
	signal.Notify(sigc, syscall.SIGCHLD)
	tick := time.NewTicker(time.Second) // a safety net for coalesced signals
	defer tick.Stop()
	for {
		select {
		case <-sigc:
		case <-tick.C:
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			p.mu.Lock()
			ch, ok := p.waiting[pid]
			if ok {
				ch <- ws
				delete(p.waiting, pid)
			}
			p.mu.Unlock()
			if !ok && p.orphan != nil {
				p.orphan()
			}
		}
	}
}

// exitCode turns a status into a shell-style code: the exit status, or
// 128+n when signal n ended the process.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
