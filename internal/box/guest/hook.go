package guest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/sessions/activity"
)

// HookSocketName is the socket, beside the guest's own, where hook
// commands (`paddock guest hook EVENT`) report to the guest.
const HookSocketName = "hook.sock"

// Bounds on reports. Everything in the box may connect to the hook
// socket, so all of it is box input: each connection gets hookReadTimeout
// to send one line of at most activity.MaxReport bytes, at most
// maxHookConns are served at once, and reports pass a token bucket of
// reportRate a second (burst reportBurst) before they are queued. Claude
// Code fires a few hooks per turn and one per tool call.
const (
	hookReadTimeout = time.Second
	maxHookConns    = 16
	reportRate      = 20
	reportBurst     = 40
	// subscriberQueue is how many reports wait for one slow events
	// stream; past it the oldest is dropped (the newest says most).
	subscriberQueue = 32
)

// reportHub fans reports out to every events stream open on the guest.
type reportHub struct {
	mu      sync.Mutex
	limit   activity.Limiter
	reaped  activity.Limiter // orphans may be reaped in bursts: one report a second is enough
	subs    map[*subscriber]struct{}
	dropped int // over the rate, since the guest started
	passed  int // through the rate, since the guest started
}

type subscriber struct {
	mu    sync.Mutex
	queue [][]byte
	ready chan struct{} // one token: the queue has something
}

func newReportHub() *reportHub {
	return &reportHub{limit: activity.Limiter{Rate: reportRate, Burst: reportBurst},
		reaped: activity.Limiter{Rate: 1, Burst: 1}, subs: map[*subscriber]struct{}{}}
}

// publish queues a valid report for every stream; it never blocks.
func (h *reportHub) publish(r activity.Report) {
	line, err := r.Marshal()
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lim := &h.limit
	if r.Event == activity.EventReaped {
		lim = &h.reaped
	}
	if !lim.Allow(time.Now()) {
		h.dropped++
		return
	}
	h.passed++
	for s := range h.subs {
		s.mu.Lock()
		if len(s.queue) >= subscriberQueue {
			s.queue = s.queue[1:]
		}
		s.queue = append(s.queue, line)
		s.mu.Unlock()
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

func (h *reportHub) subscribe() *subscriber {
	s := &subscriber{ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *reportHub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// events serves one events stream until the Runner closes it or the
// channel ends.
func (g *Guest) events(srv *channel.Server, st net.Conn) {
	defer st.Close()
	if err := channel.WriteJSONLine(st, channel.Reply{OK: true}); err != nil {
		return
	}
	sub := g.reports.subscribe()
	defer g.reports.unsubscribe(sub)
	closed := make(chan struct{})
	go func() { // the Runner sends nothing: a read ends when it closes
		_, _ = io.Copy(io.Discard, st)
		close(closed)
	}()
	for {
		select {
		case <-sub.ready:
		case <-closed:
			return
		case <-srv.Done():
			return
		}
		sub.mu.Lock()
		q := sub.queue
		sub.queue = nil
		sub.mu.Unlock()
		for _, line := range q {
			_ = st.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := st.Write(append(line, '\n')); err != nil {
				return
			}
		}
	}
}

// listenHooks serves the hook socket until ctx ends.
func (g *Guest) listenHooks(ctx context.Context, path string) error {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	_ = os.Chmod(path, 0o600) // the box user's, as the guest's socket
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	sem := make(chan struct{}, maxHookConns)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			select {
			case sem <- struct{}{}:
			default:
				c.Close() // a flood: the hook gives up quietly
				continue
			}
			go func() {
				defer func() { <-sem }()
				defer c.Close()
				if r, ok := readReport(c); ok {
					g.reports.publish(r)
				}
			}()
		}
	}()
	return nil
}

// readReport reads one report line from a hook connection, within
// hookReadTimeout and activity.MaxReport bytes.
func readReport(c net.Conn) (activity.Report, bool) {
	_ = c.SetReadDeadline(time.Now().Add(hookReadTimeout))
	br := bufio.NewReaderSize(io.LimitReader(c, activity.MaxReport+1), activity.MaxReport+1)
	line, err := br.ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return activity.Report{}, false
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	r, err := activity.ParseReport(line)
	return r, err == nil
}

// Hook is `paddock guest hook EVENT`: the command Claude Code's managed
// hooks (and tmux's pane-died hook) run in the box. It reads the hook's
// JSON input from stdin (at most activity.MaxHookInput bytes, for at
// most a second; none for pane-died), sends one report to the guest's
// hook socket beside socket, and returns. It never fails and never
// prints: a hook must not disturb claude, and what a SessionStart or
// UserPromptSubmit hook prints would reach the model.
func Hook(socket, event string, stdin io.Reader) {
	deadline := time.Now().Add(time.Second)
	var input []byte
	if activity.IsHookEvent(event) && stdin != nil {
		done := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(stdin, activity.MaxHookInput))
			done <- b
		}()
		select {
		case input = <-done:
		case <-time.After(time.Until(deadline)):
		}
	}
	var r activity.Report
	if activity.IsHookEvent(event) {
		var err error
		if r, err = activity.FromHook(event, input); err != nil {
			return
		}
	} else if event == activity.EventPaneDied {
		r = activity.Report{Event: event}
	} else {
		return
	}
	line, err := r.Marshal()
	if err != nil {
		return
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("unix", dirOf(socket)+"/"+HookSocketName)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetWriteDeadline(deadline)
	_, _ = c.Write(append(line, '\n'))
}
