package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/mirror"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// What the Runner runs in a box for itself (runIn) ends within
// runTimeout and may print at most runMaxOutput bytes. The box controls
// what those commands meet — a FIFO or /dev/zero in place of a file, a
// tmux socket that never answers, a fake guest that sends no exit code —
// so without these bounds it could hold a session's lock, or the Runner's
// start-up re-adoption that every session waits for, forever, or fill the
// Runner's memory.
const (
	runTimeout   = 30 * time.Second
	runMaxOutput = 40 << 20
)

// runIn runs a command in the box and returns its combined output. Past
// runTimeout, or past runMaxOutput bytes of output, the process's stream is
// aborted (the guest kills the process group; nothing more is read) and
// runIn fails.
func runIn(cl *channel.Client, env []string, stdin []byte, argv0 string, args ...string) (string, int, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	return runInLimits(cl, runTimeout, runMaxOutput, env, in, argv0, args...)
}

// runInLimits is runIn with its own bounds, its stdin (nil: none) copied
// to the process as it is read.
func runInLimits(cl *channel.Client, timeout time.Duration, maxOut int, env []string, stdin io.Reader, argv0 string, args ...string) (string, int, error) {
	var proc atomic.Pointer[channel.Process]
	out := &cappedBuffer{max: maxOut, over: func() {
		if p := proc.Load(); p != nil {
			p.Abort()
		}
	}}
	p, err := cl.Exec(channel.ExecOptions{Argv: append([]string{argv0}, args...), Env: env, Dir: sandbox.WorkspaceDir, Stdout: out, Stderr: out})
	if err != nil {
		return "", -1, err
	}
	proc.Store(p)
	if out.exceeded.Load() { // before the Store: over found no process
		p.Abort()
	}
	var timedOut atomic.Bool
	t := time.AfterFunc(timeout, func() { timedOut.Store(true); p.Abort() })
	defer t.Stop()
	if stdin != nil {
		if _, err := io.CopyBuffer(p, stdin, make([]byte, 256<<10)); err != nil {
			p.Abort()
			if timedOut.Load() {
				return "", -1, fmt.Errorf("%s in the box: no end after %v", argv0, timeout)
			}
			return "", -1, err
		}
	}
	_ = p.CloseStdin()
	code, err := p.Wait()
	switch {
	case out.exceeded.Load():
		return "", -1, fmt.Errorf("%s in the box: more than %d bytes of output", argv0, maxOut)
	case timedOut.Load():
		return "", -1, fmt.Errorf("%s in the box: no end after %v", argv0, timeout)
	}
	return out.buf.String(), code, err
}

// cappedBuffer keeps up to max bytes; at the first write past that it
// drops everything after, marks itself exceeded and calls over once. The
// exec stream's one reading goroutine is its only writer; buf is read
// once that goroutine is done (Process.Wait).
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int
	exceeded atomic.Bool
	over     func()
}

func (c *cappedBuffer) Write(b []byte) (int, error) {
	if c.exceeded.Load() {
		return len(b), nil
	}
	if c.buf.Len()+len(b) > c.max {
		c.exceeded.Store(true)
		c.over()
		return len(b), nil
	}
	return c.buf.Write(b)
}

// Exec runs a command in a running session's box with claude's
// environment, wired to the caller's streams.
func (r *Runner) Exec(ctx context.Context, ref string, o channel.ExecOptions) (*channel.Process, error) {
	if err := r.waitAdopted(ctx); err != nil {
		return nil, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := session.Check(session.OpExec, s.Name, s.Observed); err != nil {
		return nil, err
	}
	if err := r.thawIfFrozen(ctx, s.ID); err != nil {
		return nil, err
	}
	lv := r.getLive(s.ID)
	if lv == nil {
		return nil, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
	}
	o.Env = append(append([]string(nil), lv.env...), o.Env...)
	if o.Dir == "" {
		o.Dir = sandbox.WorkspaceDir
	}
	return lv.link.Client.Exec(o)
}

// Attach implements api.Sessions: it joins the session's terminal mirror,
// starting its tmux control-mode client on first use.
func (r *Runner) Attach(ctx context.Context, ref string, req api.AttachRequest) (api.Participant, error) {
	if err := r.waitAdopted(ctx); err != nil {
		return nil, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := session.Check(session.OpAttach, s.Name, s.Observed); err != nil {
		return nil, err
	}
	role := mirror.Role(req.Role)
	if role == "" {
		role = mirror.Driver
	}
	if role != mirror.Driver && role != mirror.Observer {
		return nil, fmt.Errorf("role %q is not driver or observer: %w", req.Role, errdefs.ErrInvalid)
	}
	if err := r.thawIfFrozen(ctx, s.ID); err != nil { // a frozen session's attach thaws it
		return nil, err
	}
	lv := r.getLive(s.ID)
	if lv == nil {
		return nil, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
	}
	m, err := lv.mirrorOf(ctx)
	if err != nil {
		return nil, err
	}
	rows, cols := int(req.Rows), int(req.Cols)
	return m.Join(ctx, role, rows, cols)
}

// mirrorOf returns the live session's mirror, starting a control-mode
// client (tmux -C attach over the channel) if there is none or it ended.
// evict sends every attached participant away, keeping the mirror.
func (lv *live) evict() {
	lv.mmu.Lock()
	defer lv.mmu.Unlock()
	if lv.mirror != nil {
		lv.mirror.Evict()
	}
}

func (lv *live) mirrorOf(ctx context.Context) (*mirror.Mirror, error) {
	lv.mmu.Lock()
	defer lv.mmu.Unlock()
	if lv.mirror != nil {
		select {
		case <-lv.mirror.Done():
		default:
			return lv.mirror, nil
		}
	}
	out, code, err := runIn(lv.link.Client, lv.env, nil, "tmux", "-L", TmuxSocket, "display-message", "-p", "-t", TmuxSession, "#{pane_id}")
	if err != nil || code != 0 {
		return nil, fmt.Errorf("find claude's pane: exit %d: %s %v", code, strings.TrimSpace(out), err)
	}
	pane := strings.TrimSpace(out)
	pr, pw := io.Pipe()
	p, err := lv.link.Client.Exec(channel.ExecOptions{Argv: []string{"tmux", "-L", TmuxSocket, "-C", "attach-session", "-t", TmuxSession},
		Env: lv.env, Dir: sandbox.WorkspaceDir, Stdout: pw})
	if err != nil {
		return nil, fmt.Errorf("start the control-mode client: %w", err)
	}
	go func() { _, err := p.Wait(); pw.CloseWithError(fmt.Errorf("control client ended: %v", err)) }()
	lv.mirror = mirror.New(p, pr, pane)
	return lv.mirror, nil
}

// StartExec implements api.Sessions: a command in the box with claude's
// environment, on a terminal when TTY.
func (r *Runner) StartExec(ctx context.Context, ref string, req api.ExecRequest, stdout, stderr io.Writer) (*channel.Process, error) {
	argv := req.Argv
	if len(argv) == 0 {
		return nil, fmt.Errorf("nothing to run: give a command after --: %w", errdefs.ErrInvalid)
	}
	return r.Exec(ctx, ref, channel.ExecOptions{Argv: argv, TTY: req.TTY, Rows: req.Rows, Cols: req.Cols, Stdout: stdout, Stderr: stderr})
}
