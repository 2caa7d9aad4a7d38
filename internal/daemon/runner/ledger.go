package runner

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// transcriptMax bounds what the ledger reads of a session's transcript:
// its last transcriptMax bytes (a conversation of many hours may be
// larger; its earliest calls then have no tool or input in the ledger).
const transcriptMax = 32 << 20

// Ledger implements api.Ledgerer: the session's decision log (rotated
// parts too) joined by package ledger, with o.WithTranscript to the
// transcript read from its running box.
func (r *Runner) Ledger(ctx context.Context, ref string, o api.LedgerOptions) (api.LedgerResult, error) {
	if ref == "" {
		return api.LedgerResult{}, fmt.Errorf("no session named: %w", errdefs.ErrInvalid)
	}
	id := ref
	s, serr := r.Session(ctx, ref)
	if serr == nil {
		id = s.ID
	}
	var res api.LedgerResult
	var tr *ledger.Transcript
	if o.WithTranscript {
		if serr != nil { // a removed session's log may remain; its transcript went with it
			return res, fmt.Errorf("session %q: its transcript can be read only while it runs: %w", ref, serr)
		}
		var err error
		if tr, res.Transcript, err = r.readTranscript(ctx, s); err != nil {
			return res, err
		}
	}
	es, err := r.decisions.Read(id, 0)
	if err != nil {
		return res, err
	}
	res.Records = ledger.Join(es, tr)
	return res, nil
}

// readTranscript reads the session's transcript, and its subagents', from
// its running box: at most their last transcriptMax bytes, as the box
// user, through the channel.
func (r *Runner) readTranscript(ctx context.Context, s session.Session) (*ledger.Transcript, *api.TranscriptRead, error) {
	if s.Observed != session.Running {
		return nil, nil, fmt.Errorf("session %q is %s: its transcript is read through its running box; wake it (paddock wake %s), or export the ledger without --with-transcript: %w",
			s.Name, s.Observed, s.Name, errdefs.ErrConflict)
	}
	cl, err := r.transcriptClient(ctx, s, "read its transcript")
	if err != nil {
		return nil, nil, err
	}
	file := claudecode.TranscriptPath(sandbox.HomeDir, sandbox.WorkspaceDir, s.ClaudeSessionID)
	// The main transcript, then each subagent's (Claude Code keeps them in
	// <session id>/subagents/), each ending in a newline; the last
	// transcriptMax+1 bytes of all that tell whether it was cut.
	out, code, err := runInLimits(cl, 30*time.Second, transcriptMax+2, []string{"PATH=/usr/bin:/bin"}, nil,
		"sh", "-c", transcriptScript, "sh", file, path.Join(strings.TrimSuffix(file, ".jsonl"), "subagents"), strconv.Itoa(transcriptMax+1))
	if err != nil || code != 0 {
		return nil, nil, fmt.Errorf("read the transcript of session %q in its box: exit %d: %v: %w", s.Name, code, err, errdefs.ErrUnavailable)
	}
	read := &api.TranscriptRead{Path: file}
	if len(out) > transcriptMax {
		// Cut: the first line is a part of one; the part starts after it.
		read.Cut = true
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			out = out[i+1:]
		}
	}
	read.Bytes = len(out)
	tr, err := ledger.ParseTranscript(strings.NewReader(out))
	if err != nil {
		return nil, nil, err
	}
	read.Lines, read.Skipped, read.Problems, read.Calls = tr.Lines, tr.Skipped, tr.Problems, len(tr.ToolUses)
	return tr, read, nil
}

// transcriptClient is the channel to s's running box, thawed if it was
// frozen, through which its transcript is read (to do what).
func (r *Runner) transcriptClient(ctx context.Context, s session.Session, what string) (*channel.Client, error) {
	if s.Observed != session.Running {
		return nil, fmt.Errorf("session %q is %s: paddock can %s only while it runs; wake it (paddock wake %s): %w",
			s.Name, s.Observed, what, s.Name, errdefs.ErrConflict)
	}
	if err := r.waitAdopted(ctx); err != nil {
		return nil, err
	}
	// A frozen box answers nothing: it is thawed, as for an exec.
	if err := r.thawIfFrozen(ctx, s.ID); err != nil {
		return nil, err
	}
	lv := r.getLive(s.ID)
	if lv == nil || lv.link == nil {
		return nil, fmt.Errorf("session %q runs but the Runner has no channel to it yet; try again in a moment: %w", s.Name, errdefs.ErrUnavailable)
	}
	return lv.link.Client, nil
}

var _ api.Ledgerer = (*Runner)(nil)
