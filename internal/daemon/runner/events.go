package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Events subscribes to the Runner's event stream, of every session (id
// "") or of one (its id or name), after the given Seq.
func (r *Runner) Events(ctx context.Context, ref string, after uint64) (api.Stream, error) {
	id := ""
	if ref != "" {
		s, err := r.Session(ctx, ref)
		if err != nil {
			return api.Stream{}, err
		}
		id = s.ID
	}
	sub := r.events.Subscribe(after)
	if id == "" {
		return api.Stream{C: sub.C, Lagged: sub.Lagged, Err: sub.Err, Close: sub.Close}, nil
	}
	out := make(chan events.Event, 64)
	go func() {
		defer close(out)
		for e := range sub.C {
			if e.Session != id {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				sub.Close()
				return
			}
		}
	}()
	return api.Stream{C: out, Lagged: sub.Lagged, Err: sub.Err, Close: sub.Close}, nil
}

// turnTail is how much of the end of a transcript LastTurn reads: a turn
// longer than that shows its last part only (no prompt).
const turnTail = 8 << 20

// Claude Code writes a turn's last lines to its transcript just after its
// Stop hook, which is what makes the activity waiting: LastTurn reads
// again, every turnPoll for up to turnSettle, until the transcript holds
// a turn that ended no earlier than turnSlack before the activity
// changed (the clocks are the box's and the Runner's: the same kernel's
// on local and docker).
const (
	turnPoll   = 100 * time.Millisecond
	turnSettle = 5 * time.Second
	turnSlack  = 250 * time.Millisecond
)

// LastTurn reads the last turn of a running session's conversation from
// its transcript in the box. Done says claude is not working on it; when
// it is done, the turn read is the one that just ended.
func (r *Runner) LastTurn(ctx context.Context, ref string) (api.TurnResult, error) {
	s, err := r.Session(ctx, ref)
	if err != nil {
		return api.TurnResult{}, err
	}
	cl, err := r.transcriptClient(ctx, s, "read its last turn")
	if err != nil {
		return api.TurnResult{}, err
	}
	file := claudecode.TranscriptPath(sandbox.HomeDir, sandbox.WorkspaceDir, s.ClaudeSessionID)
	deadline := time.Now().Add(turnSettle)
	for {
		out, code, err := runInLimits(cl, 30*time.Second, turnTail+1, []string{"PATH=/usr/bin:/bin"}, nil,
			"sh", "-c", `[ -f "$1" ] || exit 0; exec tail -c "$2" "$1"`, "sh", file, strconv.Itoa(turnTail))
		if err != nil || code != 0 {
			return api.TurnResult{}, fmt.Errorf("read the transcript of session %q in its box: exit %d: %v: %w", s.Name, code, err, errdefs.ErrUnavailable)
		}
		if len(out) >= turnTail { // cut: the first line is a part of one
			if i := strings.IndexByte(out, '\n'); i >= 0 {
				out = out[i+1:]
			}
		}
		t, err := ledger.LastTurn(strings.NewReader(out))
		if err != nil {
			return api.TurnResult{}, err
		}
		now, err := r.Session(ctx, s.ID) // its activity, after the read
		if err != nil {
			return api.TurnResult{}, err
		}
		working := now.Activity.State == activity.Working || now.Activity.State == activity.Starting
		settled := t.Ended && !t.EndedAt.Before(now.Activity.Since.Add(-turnSlack))
		noTurn := t.Lines == 0 // no transcript yet: claude has had no prompt
		if working || settled || noTurn || time.Now().After(deadline) || now.Observed != session.Running {
			return api.TurnResult{Session: now, Turn: t, Done: !working && t.Ended}, nil
		}
		select {
		case <-ctx.Done():
			return api.TurnResult{}, ctx.Err()
		case <-time.After(turnPoll):
		}
	}
}

var (
	_ api.Eventer    = (*Runner)(nil)
	_ api.TurnReader = (*Runner)(nil)
)
