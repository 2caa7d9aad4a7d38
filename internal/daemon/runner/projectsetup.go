package runner

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// A project's setup command (project.Setup) runs once per session, in its
// box, in the workspace, before claude first starts: bash -lc COMMAND, as
// the box user, with the environment claude gets (the project's variables
// and the egress proxy) but no credential. Its egress is the session's
// with the setup's own rules added, for as long as it runs (a package
// registry, say); the session's own policy is put back when it ends, which
// cuts any tunnel only the setup's rules allowed. What it printed is kept
// on the record (its end, session.MaxSetupOutput bytes): paddock inspect
// shows it, and a failure says it.

// runSetup runs the session's project setup if it has one that has not
// run. A failure is returned with the end of the command's output.
func (r *Runner) runSetup(ctx context.Context, s *session.Session, link *Link) error {
	pu := s.Project
	if pu == nil || pu.Setup == "" || pu.SetupResult != nil {
		return nil
	}
	if len(pu.SetupAllow) > 0 {
		wide := *s
		wide.Egress, wide.EgressAsk = session.EgressAllowlist, false
		if s.Egress != session.EgressAllowlist {
			wide.EgressAllow, wide.EgressPolicies = nil, nil
		}
		wide.EgressAllow = append(slices.Clone(wide.EgressAllow), pu.SetupAllow...)
		if _, err := r.setPolicy(&wide); err != nil {
			return fmt.Errorf("the setup's egress: %w", err)
		}
		defer func() {
			if _, err := r.setPolicy(s); err != nil {
				r.log.Error("put the session's egress back after its setup", logkey.Session, s.ID, logkey.Error, err)
			}
		}()
	}
	timeout := time.Duration(pu.SetupTimeoutS) * time.Second
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	env := claudecode.Env(r.launchOptions(s, "", ""))
	out := &tailBuffer{max: session.MaxSetupOutput}
	r.log.Info("project setup: running", logkey.Session, s.ID)
	began := time.Now()
	p, err := link.Client.Exec(channel.ExecOptions{Argv: []string{"bash", "-lc", pu.Setup}, Env: env, Dir: sandbox.WorkspaceDir, Stdout: out, Stderr: out})
	if err != nil {
		return fmt.Errorf("start the project's setup command: %w", err)
	}
	_ = p.CloseStdin()
	done := make(chan struct{})
	var code int
	var werr error
	go func() { code, werr = p.Wait(); close(done) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.Abort()
		<-done
		werr = fmt.Errorf("it ran for %s, its timeout (setup.timeout in %s)", timeout, "the project file")
	case <-ctx.Done():
		p.Abort()
		<-done
		werr = ctx.Err()
	}
	res := &session.SetupResult{Exit: code, MS: session.MS(time.Since(began)), Output: out.String()}
	if werr != nil && code == 0 {
		res.Exit = -1
	}
	pu.SetupResult = res
	r.log.Info("project setup: done", logkey.Session, s.ID, "exit", res.Exit, "ms", res.MS)
	if werr != nil || code != 0 {
		why := fmt.Sprintf("exit %d", code)
		if werr != nil {
			why = werr.Error()
		}
		return &setupError{fmt.Errorf("the project's setup command failed (%s); what it printed last:\n%s(fix it in the project file, then paddock project allow and run again: %w)",
			why, indentTail(res.Output, 40), errdefs.ErrInvalid)}
	}
	return r.save(s)
}

// setupError is a setup command that failed: a create removes the
// session it was making, so none is left half-made.
type setupError struct{ error }

func (e *setupError) Unwrap() error { return e.error }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.b, []byte("?")))
}

// indentTail is the last n lines of s, each indented.
func indentTail(s string, n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("  | ")
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}
