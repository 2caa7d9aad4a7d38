// Package mirror shares one tmux pane among several participants: one
// tmux control-mode client (`tmux -C attach`) per session feeds every
// participant; drivers' keys go in with send-keys, observers' are refused.
//
// A participant joins with a snapshot of the screen (contents with colours,
// and the cursor) and then gets the live output. Each has a bounded queue:
// one that falls behind is not waited for; its queue is dropped and it gets
// a fresh snapshot when it reads again (a resync), so a stalled participant
// never slows the others.
//
// Size policy: the pane takes the smallest size among the drivers (so every
// driver sees all of it); observers do not change it. With no driver the
// size stays as it was.
package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/paddockhq/paddock/internal/box/tmuxcc"
)

// Role of a participant.
type Role string

// Roles.
const (
	Driver   Role = "driver"
	Observer Role = "observer"
)

// ErrReadOnly is returned when an observer sends keys.
var ErrReadOnly = errors.New("mirror: observers cannot type")

// ErrClosed is returned after the mirror ended.
var ErrClosed = errors.New("mirror: closed")

// QueueLen is the default bound of a participant's queue of output chunks.
const QueueLen = 256

// QueueBytes bounds the bytes a participant's queue holds: the chunks come
// from the box (a line of up to tmuxcc.MaxLine), so a count alone would let
// one stalled participant hold hundreds of megabytes. Past it, as past
// QueueLen, the queue is dropped for a fresh snapshot.
const QueueBytes = 8 << 20

// Mirror is the control-mode client of one pane.
type Mirror struct {
	pane string
	w    io.Writer // the control client's stdin
	rd   *tmuxcc.Reader

	wmu     sync.Mutex // one command at a time on the wire, in order with pending
	pmu     sync.Mutex
	pending []chan tmuxcc.Event

	// attached is closed once the control client is attached to its
	// session. tmux may run commands it reads before the attach itself
	// has finished, and until then it sends the client no %output: keys
	// typed then would be answered out of sight.
	attached     chan struct{}
	attachedOnce sync.Once

	queueLen int

	mu     sync.Mutex
	parts  map[*Participant]struct{}
	closed bool
	done   chan struct{}
	err    error
}

// New starts a mirror over a control-mode client's stdin (w) and stdout
// (r), for the pane with id pane (e.g. "%0").
func New(w io.Writer, r io.Reader, pane string) *Mirror {
	m := &Mirror{pane: pane, w: w, rd: tmuxcc.NewReader(r), parts: map[*Participant]struct{}{}, done: make(chan struct{}), queueLen: QueueLen,
		attached: make(chan struct{})}
	go m.loop()
	return m
}

// SetQueueLen changes the queue bound of participants that join later.
func (m *Mirror) SetQueueLen(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > 0 {
		m.queueLen = n
	}
}

// Done is closed when the control client ends.
func (m *Mirror) Done() <-chan struct{} { return m.done }

// Err is why the mirror ended.
func (m *Mirror) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *Mirror) loop() {
	var err error
	for {
		var ev tmuxcc.Event
		ev, err = m.rd.Next()
		var pe *tmuxcc.Error
		if errors.As(err, &pe) {
			continue // a bad line is skipped; the stream goes on
		}
		if err != nil {
			break
		}
		switch ev.Kind {
		case "session-changed":
			m.attachedOnce.Do(func() { close(m.attached) })
		case "reply", "error":
			// Flags 1 marks replies to commands this client sent; the
			// reply to the attach itself (flags 0) is not the answer to
			// any of ours. Once it has ended, the client is attached.
			if ev.Flags&1 == 0 {
				m.attachedOnce.Do(func() { close(m.attached) })
				continue
			}
			m.pmu.Lock()
			if len(m.pending) > 0 {
				ch := m.pending[0]
				m.pending = m.pending[1:]
				ch <- ev
			}
			m.pmu.Unlock()
		case "output", "extended-output":
			if ev.Pane == m.pane {
				m.broadcast(ev.Data)
			}
		case "exit":
			err = fmt.Errorf("tmux control client exited: %s", ev.Reason)
		}
		if ev.Kind == "exit" {
			break
		}
	}
	m.mu.Lock()
	m.closed, m.err = true, err
	for p := range m.parts {
		p.close()
	}
	m.mu.Unlock()
	m.pmu.Lock()
	for _, ch := range m.pending {
		close(ch)
	}
	m.pending = nil
	m.pmu.Unlock()
	close(m.done)
}

// command sends one tmux command and waits for its reply.
func (m *Mirror) command(ctx context.Context, cmd string) ([]string, error) {
	select {
	case <-m.attached:
	case <-m.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ch := make(chan tmuxcc.Event, 1)
	m.wmu.Lock()
	m.pmu.Lock()
	if m.closedLocked() {
		m.pmu.Unlock()
		m.wmu.Unlock()
		return nil, ErrClosed
	}
	m.pending = append(m.pending, ch)
	m.pmu.Unlock()
	_, err := io.WriteString(m.w, cmd+"\n")
	m.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case ev, ok := <-ch:
		if !ok {
			return nil, ErrClosed
		}
		if ev.Kind == "error" {
			return nil, fmt.Errorf("tmux: %s: %s", cmd, strings.Join(ev.Lines, "; "))
		}
		return ev.Lines, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *Mirror) closedLocked() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Snapshot renders the pane as it is now: clear, the visible lines with
// their colours, then the cursor where tmux has it.
func (m *Mirror) Snapshot(ctx context.Context) ([]byte, error) {
	lines, err := m.command(ctx, "capture-pane -p -e -N -t "+m.pane)
	if err != nil {
		return nil, err
	}
	pos, err := m.command(ctx, "display-message -p -t "+m.pane+" '#{cursor_x} #{cursor_y} #{cursor_flag}'")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("\x1b[0m\x1b[H\x1b[2J")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
		b.WriteString("\x1b[0m")
	}
	if len(pos) == 1 {
		f := strings.Fields(pos[0])
		if len(f) >= 2 {
			x, _ := strconv.Atoi(f[0])
			y, _ := strconv.Atoi(f[1])
			fmt.Fprintf(&b, "\x1b[%d;%dH", y+1, x+1)
		}
		if len(f) == 3 && f[2] == "0" {
			b.WriteString("\x1b[?25l")
		} else {
			b.WriteString("\x1b[?25h")
		}
	}
	return []byte(b.String()), nil
}

// Participant is one person attached to the pane.
type Participant struct {
	m    *Mirror
	Role Role

	mu     sync.Mutex
	q      chan []byte
	queued atomic.Int64 // bytes in q: added by who puts a chunk in, taken by who takes it out
	resync bool         // the queue overflowed; the next Read starts with a snapshot
	closed bool
	rows   int
	cols   int
}

// Join adds a participant. It is given the current screen as its first
// output, then the live output.
func (m *Mirror) Join(ctx context.Context, role Role, rows, cols int) (*Participant, error) {
	if role != Driver && role != Observer {
		return nil, fmt.Errorf("mirror: unknown role %q", role)
	}
	m.mu.Lock()
	n := m.queueLen
	m.mu.Unlock()
	p := &Participant{m: m, Role: role, q: make(chan []byte, n), rows: rows, cols: cols}
	// Register first, then snapshot: output that arrives in between is
	// queued after the snapshot and redrawn over it, never lost.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	m.parts[p] = struct{}{}
	m.mu.Unlock()
	// A new driver may change the size: resize first, so the snapshot is
	// of the screen at the size the participant will see.
	if role == Driver {
		_ = m.applySize(ctx)
	}
	snap, err := m.Snapshot(ctx)
	if err != nil {
		p.Leave()
		return nil, err
	}
	p.mu.Lock()
	var dropped bool
	p.q, dropped = prepend(p.q, snap, cap(p.q), &p.queued)
	p.resync = p.resync || dropped
	p.mu.Unlock()
	return p, nil
}

// prepend puts first in front of what a queue already holds; dropped
// reports that the queue could not hold it all (a resync is due). queued
// counts the bytes in the queue.
func prepend(q chan []byte, first []byte, n int, queued *atomic.Int64) (chan []byte, bool) {
	nq := make(chan []byte, n)
	nq <- first
	queued.Add(int64(len(first)))
	dropped := false
	for {
		select {
		case b := <-q:
			select {
			case nq <- b:
			default:
				dropped = true
				queued.Add(-int64(len(b)))
			}
		default:
			return nq, dropped
		}
	}
}

func (m *Mirror) broadcast(data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.parts {
		p.offer(data)
	}
}

// offer queues data without ever blocking: a full queue marks a resync.
func (p *Participant) offer(data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.resync {
		return
	}
	n := int64(len(data))
	if p.queued.Add(n) <= QueueBytes {
		select {
		case p.q <- data:
			return
		default:
		}
	}
	p.queued.Add(-n)
	p.resync = true
	for {
		select {
		case b := <-p.q:
			p.queued.Add(-int64(len(b)))
		default:
			return
		}
	}
}

// Read returns the next output for this participant, blocking until there
// is some. After an overflow it returns a fresh snapshot first.
func (p *Participant) Read(ctx context.Context) ([]byte, error) {
	p.mu.Lock()
	if p.resync {
		p.resync = false
		p.mu.Unlock()
		return p.m.Snapshot(ctx)
	}
	q := p.q
	p.mu.Unlock()
	select {
	case b, ok := <-q:
		if !ok {
			return nil, ErrClosed
		}
		p.queued.Add(-int64(len(b)))
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Send types keys into the pane; observers get ErrReadOnly and nothing
// reaches tmux.
func (p *Participant) Send(ctx context.Context, keys []byte) error {
	if p.Role != Driver {
		return ErrReadOnly
	}
	if len(keys) == 0 {
		return nil
	}
	return p.m.Keys(ctx, keys)
}

// Keys types keys into the pane with one send-keys -H (hex: no byte of
// the keys is ever parsed by tmux's command parser), as a driver's keys,
// for the Runner itself.
func (m *Mirror) Keys(ctx context.Context, keys []byte) error {
	var b strings.Builder
	b.WriteString("send-keys -t ")
	b.WriteString(m.pane)
	b.WriteString(" -H")
	for _, k := range keys {
		fmt.Fprintf(&b, " %02x", k)
	}
	_, err := m.command(ctx, b.String())
	return err
}

// Bracketed paste's markers: what a terminal sends around pasted text to
// an application that asked for it, as Claude Code does. Inside them a
// newline is part of the text, not an Enter.
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// pasteChunk is how many bytes of pasted text go in one send-keys: tmux
// caps a command at about 16 KiB, and -H spends three bytes on each.
const pasteChunk = 4 << 10

// ErrPasteEscape refuses text that holds an ESC for Paste: it could end
// the paste early and type the rest as keys.
var ErrPasteEscape = errors.New("mirror: pasted text holds an ESC")

// Paste types text into the pane as one bracketed paste, so its newlines
// stay in the text rather than being Enters. Like keys, no byte of text
// is parsed by tmux. Text with an ESC is refused (ErrPasteEscape). Text
// longer than pasteChunk goes in consecutive commands: a driver's keys
// typed meanwhile may land between them.
func (m *Mirror) Paste(ctx context.Context, text []byte) error {
	if bytes.IndexByte(text, 0x1b) >= 0 {
		return ErrPasteEscape
	}
	msg := make([]byte, 0, len(pasteStart)+len(text)+len(pasteEnd))
	msg = append(append(append(msg, pasteStart...), text...), pasteEnd...)
	for len(msg) > 0 {
		n := min(len(msg), pasteChunk)
		if err := m.Keys(ctx, msg[:n]); err != nil {
			return err
		}
		msg = msg[n:]
	}
	return nil
}

// Resize records the participant's terminal size.
func (p *Participant) Resize(ctx context.Context, rows, cols int) error {
	p.mu.Lock()
	p.rows, p.cols = rows, cols
	p.mu.Unlock()
	if p.Role == Driver {
		return p.m.applySize(ctx)
	}
	return nil
}

// applySize sets the pane to the smallest driver's size.
func (m *Mirror) applySize(ctx context.Context) error {
	m.mu.Lock()
	rows, cols := 0, 0
	for p := range m.parts {
		p.mu.Lock()
		if p.Role == Driver && p.rows > 0 && p.cols > 0 {
			if rows == 0 || p.rows < rows {
				rows = p.rows
			}
			if cols == 0 || p.cols < cols {
				cols = p.cols
			}
		}
		p.mu.Unlock()
	}
	m.mu.Unlock()
	if rows == 0 {
		return nil
	}
	_, err := m.command(ctx, fmt.Sprintf("resize-window -t %s -x %d -y %d", m.pane, cols, rows))
	return err
}

// Evict removes every participant: each one's Read ends with ErrClosed,
// as when the mirror ends, while the mirror itself goes on (a frozen
// session's: whoever attaches next thaws it and joins anew).
func (m *Mirror) Evict() {
	m.mu.Lock()
	parts := m.parts
	m.parts = map[*Participant]struct{}{}
	m.mu.Unlock()
	for p := range parts {
		p.close()
	}
}

// Leave removes the participant.
func (p *Participant) Leave() {
	p.m.mu.Lock()
	delete(p.m.parts, p)
	p.m.mu.Unlock()
	p.close()
}

func (p *Participant) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		close(p.q)
	}
}
