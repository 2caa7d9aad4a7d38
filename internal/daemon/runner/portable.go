package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Portable sessions (docs/PORTABLE.md): export writes a session out as a
// session file (package portable), import makes a new session of one, and
// paddock run --resume-host starts a session on a conversation the
// person had with Claude Code on the host. The last two share seeding:
// the new session's volume gets Claude Code's state through its box
// before claude's first start, which then resumes the conversation.

// portableTimeout bounds one read or write of Claude Code's state in a box.
const portableTimeout = 5 * time.Minute

// claudeDir is CLAUDE_CONFIG_DIR in every box.
var claudeDir = sandbox.HomeDir + "/" + claudecode.ConfigDirName

// boxEnv is the environment of what the Runner runs in a box to move files.
var boxEnv = []string{"PATH=/usr/bin:/bin", "HOME=" + sandbox.HomeDir}

// ExportSession implements api.Porter: the session's file, made whole in
// memory (within portable.DefaultLimits) before a byte of it goes out.
//
// Claude Code's state is read through the box, as the box user: from the
// running box of a running session, while claude runs (a transcript's
// last line, if claude is writing it, is left out; a frozen session is
// thawed first, as an attach thaws it); for a session that
// sleeps (or was made with --no-start, or failed with its box still
// there), its box is started for the read, without claude, and stopped
// again. The session's lock is held throughout: no sleep, wake or set
// changes it meanwhile.
func (r *Runner) ExportSession(ctx context.Context, ref string) ([]byte, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpExport)
	if err != nil {
		return nil, err
	}
	defer unlock()
	files, notes, err := r.readClaudeState(ctx, &s)
	if err != nil {
		return nil, err
	}
	l, err := r.decisions.ReadLog(s.ID)
	if err != nil {
		return nil, fmt.Errorf("read the session's decision log: %w", err)
	}
	a := &portable.Archive{
		Manifest: portable.Manifest{Paddock: version.String(), ClaudeVersion: s.ClaudeVersion, Conversation: s.ClaudeSessionID, LeftOut: notes},
		Settings: portable.Settings{Name: s.Name, Model: s.Model, Effort: s.Effort, CredentialMode: s.CredentialMode,
			Egress: s.Egress, EgressAllow: s.EgressAllow, EgressDeny: s.EgressDeny, EgressAsk: s.EgressAsk,
			EgressPolicies: s.EgressPolicies, EgressApproved: s.EgressApproved, Limits: s.Limits,
			Restart: s.Restart, Restarts: s.Restarts, Activity: s.Activity, Created: s.Created},
		Decisions: l.Entries,
		Files:     files,
	}
	if l.Carried.Lines > 0 {
		a.Settings.Carried = &l.Carried
	}
	var buf bytes.Buffer
	if err := portable.Write(&buf, a); err != nil {
		return nil, fmt.Errorf("write session %q out: %w", s.Name, err)
	}
	r.log.Info("session exported", logkey.Session, s.ID, "files", len(files), "bytes", buf.Len())
	return buf.Bytes(), nil
}

// readClaudeState reads what travels of the box's ~/.claude (under the
// session's lock): through the live channel of a running session, else
// through its box started for the read.
func (r *Runner) readClaudeState(ctx context.Context, s *session.Session) ([]portable.File, []string, error) {
	if s.Observed == session.Running {
		if s.Frozen { // its guest is stopped with the rest: thawed, as an attach does
			if err := r.thaw(ctx, s); err != nil {
				return nil, nil, err
			}
		}
		lv := r.getLive(s.ID)
		if lv == nil || lv.link == nil {
			return nil, nil, fmt.Errorf("session %q runs but the Runner has no channel to it yet; try again in a moment: %w", s.Name, errdefs.ErrUnavailable)
		}
		return readBoxState(lv.link.Client)
	}
	var files []portable.File
	var notes []string
	err := r.withBox(ctx, s, false, func(cl *channel.Client) error {
		var err error
		files, notes, err = readBoxState(cl)
		return err
	})
	return files, notes, err
}

// withBox runs f with a channel to the box of a session that does not
// run: the box is started for it (without claude, without a token) and,
// unless keepRunning, stopped again after. The caller holds the
// session's lock.
func (r *Runner) withBox(ctx context.Context, s *session.Session, keepRunning bool, f func(*channel.Client) error) error {
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return err
	}
	if s.BoxID == "" {
		return fmt.Errorf("session %q has no box (it failed before one was made); paddock wake makes one on its volume: %w", s.Name, errdefs.ErrConflict)
	}
	bx, err := be.Inspect(ctx, s.BoxID)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("session %q lost its box; paddock wake makes a new one on its volume, then try again: %w", s.Name, errdefs.ErrConflict)
	}
	if err != nil {
		return err
	}
	if bx.State != sandbox.StateRunning {
		if _, err := be.Start(ctx, s.BoxID); err != nil {
			return fmt.Errorf("start the box of session %q to reach its volume: %w", s.Name, err)
		}
		if !keepRunning {
			defer func() {
				if err := be.Stop(context.WithoutCancel(ctx), s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
					r.log.Warn("stop a box started to reach its volume", logkey.Session, s.ID, logkey.Error, err)
				}
			}()
		}
	}
	conn, err := be.Connect(ctx, s.BoxID)
	if err != nil {
		return fmt.Errorf("connect to the box of session %q: %w", s.Name, err)
	}
	cl, err := channel.NewClient(conn)
	if err != nil {
		conn.Close()
		return err
	}
	defer cl.Close()
	if _, _, err := cl.Ping(time.Now().Add(30 * time.Second)); err != nil {
		return fmt.Errorf("the box of session %q does not answer: %w", s.Name, err)
	}
	return f(cl)
}

// readBoxState reads the box's ~/.claude, what travels of it, as a tar
// stream from the box's own tar (every box image has it), parsed as the
// untrusted bytes they are (portable.ReadBoxTar). GNU tar exits 1 when a
// file changed while it read it (claude writing): that read is kept, its
// cut last line dropped.
func readBoxState(cl *channel.Client) ([]portable.File, []string, error) {
	var files []portable.File
	var notes []string
	code, err := streamFromBox(cl, portableTimeout, boxEnv, func(rd io.Reader) error {
		var err error
		files, notes, err = portable.ReadBoxTar(rd, portable.Limits{}) // no ~/.claude yet: no bytes, no files
		return err
	}, append([]string{"sh", "-c", readStateScript, "sh", claudeDir, portable.CredentialFile}, portable.CarriedTops()...)...)
	if err != nil {
		return nil, nil, err
	}
	if code != 0 {
		return nil, nil, fmt.Errorf("read Claude Code's state in the box: tar exited %d: %w", code, errdefs.ErrUnavailable)
	}
	return files, notes, nil
}

// errBoxTimeout ends a stream from a box that took too long.
var errBoxTimeout = errors.New("no end in time")

// streamFromBox runs argv in the box and hands its stdout to read as it
// comes (stderr is dropped), within timeout. An error of read aborts the
// process; what read left unread is drained, up to 1 MiB (tar's padding),
// before the exit code is taken.
func streamFromBox(cl *channel.Client, timeout time.Duration, env []string, read func(io.Reader) error, argv ...string) (int, error) {
	pr, pw := io.Pipe()
	p, err := cl.Exec(channel.ExecOptions{Argv: argv, Env: env, Dir: sandbox.WorkspaceDir, Stdout: pw})
	if err != nil {
		return -1, err
	}
	var timedOut atomic.Bool
	t := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		pr.CloseWithError(errBoxTimeout)
		p.Abort()
	})
	defer t.Stop()
	_ = p.CloseStdin()
	go func() {
		_, err := p.Wait()
		pw.CloseWithError(err) // nil: EOF for the reader
	}()
	fail := func(err error) (int, error) {
		pr.CloseWithError(err) // the read loop's next write fails: it stops
		p.Abort()
		<-p.Done()
		if timedOut.Load() {
			return -1, fmt.Errorf("%s in the box: no end after %v: %w", argv[0], timeout, errdefs.ErrUnavailable)
		}
		return -1, err
	}
	if err := read(pr); err != nil {
		return fail(err)
	}
	if n, err := io.CopyN(io.Discard, pr, 1<<20+1); n > 1<<20 {
		return fail(fmt.Errorf("%s in the box: more output than expected: %w", argv[0], errdefs.ErrUnavailable))
	} else if err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	code, err := p.Wait()
	if timedOut.Load() {
		return -1, fmt.Errorf("%s in the box: no end after %v: %w", argv[0], timeout, errdefs.ErrUnavailable)
	}
	return code, err
}

// writeBoxState writes files into the box's ~/.claude with the box's own
// tar, as the box user: the stream is paddock's own (portable.WriteBoxTar,
// every path checked), written to tar's stdin as it is made, and a new
// session's volume holds nothing of its own yet for it to meet.
func writeBoxState(cl *channel.Client, files []portable.File) error {
	if len(files) == 0 {
		return nil
	}
	fail := func(code int, out string, err error) error {
		return fmt.Errorf("write Claude Code's state into the box: exit %d: %s %v: %w", code, strings.TrimSpace(out), err, errdefs.ErrUnavailable)
	}
	var proc atomic.Pointer[channel.Process]
	out := &cappedBuffer{max: 1 << 20, over: func() {
		if p := proc.Load(); p != nil {
			p.Abort()
		}
	}}
	p, err := cl.Exec(channel.ExecOptions{Argv: []string{"sh", "-c", writeStateScript, "sh", claudeDir},
		Env: boxEnv, Dir: sandbox.WorkspaceDir, Stdout: out, Stderr: out})
	if err != nil {
		return fail(-1, "", err)
	}
	proc.Store(p)
	if out.exceeded.Load() { // before the Store: over found no process
		p.Abort()
	}
	var timedOut atomic.Bool
	t := time.AfterFunc(portableTimeout, func() { timedOut.Store(true); p.Abort() })
	defer t.Stop()
	bw := bufio.NewWriterSize(p, 64<<10)
	err = portable.WriteBoxTar(bw, files)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		p.Abort()
		<-p.Done()
		return fail(-1, "", err)
	}
	_ = p.CloseStdin()
	code, err := p.Wait()
	switch {
	case out.exceeded.Load():
		return fail(code, "more than 1 MiB of output", err)
	case timedOut.Load():
		return fail(code, fmt.Sprintf("no end after %v", portableTimeout), err)
	case err != nil || code != 0:
		return fail(code, out.buf.String(), err)
	}
	return nil
}

var _ api.Porter = (*Runner)(nil)
