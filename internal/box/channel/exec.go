package channel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ExecOptions describe a process to run in the box.
type ExecOptions struct {
	Argv []string
	Env  []string // the whole environment; nothing is inherited from the guest
	Dir  string
	// TTY runs the process on a new pseudo-terminal of Rows × Cols; its
	// output then arrives on Stdout only.
	TTY        bool
	Rows, Cols uint16
	// Stdout and Stderr receive the output as it arrives; nil discards. A
	// slow writer slows the process (flow control), it never loses bytes.
	Stdout, Stderr io.Writer
}

// Process is a process running in the box.
type Process struct {
	st net.Conn
	br *bufio.Reader

	wmu sync.Mutex // serializes frames written to st

	aborted atomic.Bool // Abort was called

	stdout, stderr io.Writer

	done chan struct{}
	code int
	err  error
}

// Exec starts a process in the box.
func (c *Client) Exec(o ExecOptions) (*Process, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("channel: exec: empty argv")
	}
	st, br, err := c.open(Header{Type: TypeExec, Argv: o.Argv, Env: o.Env, Dir: o.Dir, TTY: o.TTY, Rows: o.Rows, Cols: o.Cols},
		time.Now().Add(30*time.Second))
	if err != nil {
		return nil, err
	}
	p := &Process{st: st, br: br, done: make(chan struct{}), code: -1, stdout: o.Stdout, stderr: o.Stderr}
	if p.stdout == nil {
		p.stdout = io.Discard
	}
	if p.stderr == nil {
		p.stderr = io.Discard
	}
	go p.readLoop()
	return p, nil
}

func (p *Process) readLoop() {
	defer close(p.done)
	var buf []byte
	for {
		typ, payload, nb, err := ReadFrame(p.br, buf)
		buf = nb
		if err == nil && p.aborted.Load() {
			err = errors.New("aborted")
		}
		if err != nil {
			p.err = fmt.Errorf("channel: exec stream ended before the exit code: %w", err)
			p.st.Close()
			return
		}
		switch typ {
		case FrameStdout:
			_, _ = p.stdout.Write(payload)
		case FrameStderr:
			_, _ = p.stderr.Write(payload)
		case FrameExit:
			code, ok := ParseExit(payload)
			if !ok {
				p.err = errors.New("channel: bad exit frame")
			}
			p.code = code
			p.st.Close()
			return
		}
	}
}

func (p *Process) send(typ byte, b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return WriteFrame(p.st, typ, b)
}

// Write sends bytes to the process's stdin.
func (p *Process) Write(b []byte) (int, error) {
	for off := 0; off < len(b); off += 32 << 10 {
		end := min(off+32<<10, len(b))
		if err := p.send(FrameStdin, b[off:end]); err != nil {
			return off, err
		}
	}
	return len(b), nil
}

// CloseStdin closes the process's stdin.
func (p *Process) CloseStdin() error { return p.send(FrameStdinEOF, nil) }

// Resize changes the terminal size of a TTY process.
func (p *Process) Resize(rows, cols uint16) error {
	return p.send(FrameResize, ResizePayload(rows, cols))
}

// Signal sends a signal to the process (its process group for a TTY).
func (p *Process) Signal(sig syscall.Signal) error { return p.send(FrameSignal, []byte{byte(sig)}) }

// Wait waits for the exit code: the process's own, or 128+n when signal n
// ended it. All output has been written to Stdout/Stderr when it returns.
func (p *Process) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Close abandons the process's stream (the guest then kills the process).
// It is a half-close: output the guest still sends is read until the guest
// closes its end too.
func (p *Process) Close() error { return p.st.Close() }

// Abort ends the process's stream from this side at once: nothing more is
// read (Wait returns), and the stream is closed as Close does. For a guest
// that may not be trusted to stop: one that goes on sending, or never sends
// the exit code.
func (p *Process) Abort() {
	p.aborted.Store(true) // the read loop stops at its next frame, even one already buffered
	_ = p.st.SetReadDeadline(time.Unix(1, 0))
	_ = p.st.Close()
}
