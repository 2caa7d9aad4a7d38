package runner

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/mirror"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/message"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// How long SendMessage waits for claude: to reach its prompt when it is
// starting (keys typed before it draws its prompt may be lost), and to
// take a message typed at its prompt.
const (
	messageStartWait  = 90 * time.Second
	messageAcceptWait = 30 * time.Second
	// pieceWait bounds the wait for the screen to show a piece of a
	// message before the next is pasted (then it goes anyway).
	pieceWait = time.Second
)

// screenChanged polls the pane until it is not prev, or for at most d, and
// returns it as it is then.
func screenChanged(ctx context.Context, m *mirror.Mirror, prev []byte, d time.Duration) []byte {
	deadline := time.Now().Add(d)
	for {
		cur, err := m.Snapshot(ctx)
		if err != nil || !bytes.Equal(cur, prev) || time.Now().After(deadline) || ctx.Err() != nil {
			return cur
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// SendMessage implements api.Messenger: the text goes into claude's
// prompt through the session's terminal mirror, as a driver's keys do, in
// short bracketed pastes (message.Pieces: Claude Code keeps those as the
// person's own words, where one long paste would become pasted material),
// then an Enter. One message at a time per
// session, whole. A driver typing at the same moment shares the prompt
// with it: the paste lands after what they typed.
func (r *Runner) SendMessage(ctx context.Context, ref string, req api.MessageRequest) (api.MessageResult, error) {
	text, err := message.Parse(req.Text)
	if err != nil {
		return api.MessageResult{}, err
	}
	if err := r.waitAdopted(ctx); err != nil {
		return api.MessageResult{}, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return api.MessageResult{}, err
	}
	if err := session.Check(session.OpMessage, s.Name, s.Observed); err != nil {
		return api.MessageResult{}, err
	}
	if err := r.thawIfFrozen(ctx, s.ID); err != nil {
		return api.MessageResult{}, err
	}
	lv := r.getLive(s.ID)
	if lv == nil {
		return api.MessageResult{}, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
	}
	lv.smu.Lock()
	defer lv.smu.Unlock()

	a, err := r.waitPastStart(ctx, s, messageStartWait)
	if err != nil {
		return api.MessageResult{}, err
	}
	before := r.promptsTaken(s.ID)
	m, err := lv.mirrorOf(ctx)
	if err != nil {
		return api.MessageResult{}, err
	}
	pieces := text.Pieces()
	screen, _ := m.Snapshot(ctx)
	for i, piece := range pieces {
		if err := m.Paste(ctx, []byte(piece)); err != nil {
			return api.MessageResult{}, fmt.Errorf("type the message into session %q: %w", s.Name, err)
		}
		if i < len(pieces)-1 {
			// Claude Code takes pastes that reach it together as one
			// (pasted material, not the person's words): the next piece
			// goes once the screen shows it took this one. A loaded box
			// reads its terminal late, and the pieces would pile up.
			screen = screenChanged(ctx, m, screen, pieceWait)
		}
	}
	if err := m.Keys(ctx, []byte("\r")); err != nil { // Enter
		return api.MessageResult{}, fmt.Errorf("type the message into session %q: %w", s.Name, err)
	}
	res := api.MessageResult{Bytes: len(text)}
	r.log.Info("message typed", logkey.Session, s.ID, "bytes", len(text), "activity", a.State)
	if a.State == activity.Working {
		res.Queued = true
	} else if res.Accepted, err = r.waitPrompt(ctx, s.ID, before, messageAcceptWait); err != nil {
		return res, err
	} else if !res.Accepted {
		return res, fmt.Errorf("the message was typed into session %q, but its claude did not take it within %v (a question on its screen may wait for an answer): look with paddock attach %s: %w",
			s.Name, messageAcceptWait, s.Name, errdefs.ErrUnavailable)
	}
	res.Session, err = r.Session(ctx, s.ID)
	return res, err
}

// waitPastStart waits, up to d, until s's claude is past its start (at its
// prompt or in a turn) and returns its activity; an exited claude, or one
// still starting after d, is an error that says what to do.
func (r *Runner) waitPastStart(ctx context.Context, s session.Session, d time.Duration) (activity.Activity, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		changed := r.act.waitChan()
		a, _ := r.current(s.ID)
		switch a.State {
		case activity.Waiting, activity.Working:
			return a, nil
		case activity.Exited:
			return a, fmt.Errorf("claude has exited in session %q (%s): paddock wake %s starts it again, with its conversation: %w",
				s.Name, a.Short(time.Now()), s.Name, errdefs.ErrConflict)
		}
		select {
		case <-changed:
		case <-deadline.C:
			return a, fmt.Errorf("claude in session %q has not reached its prompt after %v: look with paddock attach %s: %w", s.Name, d, s.Name, errdefs.ErrUnavailable)
		case <-ctx.Done():
			return a, ctx.Err()
		}
	}
}

// promptsTaken is how many prompts id's claude has taken (actEntry.prompts).
func (r *Runner) promptsTaken(id string) uint64 {
	sl := r.slot(id)
	if sl == nil {
		return 0
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.act == nil {
		return 0
	}
	return sl.act.prompts
}

// waitPrompt waits, up to d, until id's claude has taken a prompt beyond
// the first before.
func (r *Runner) waitPrompt(ctx context.Context, id string, before uint64, d time.Duration) (bool, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		changed := r.act.waitChan()
		if r.promptsTaken(id) > before {
			return true, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

var _ api.Messenger = (*Runner)(nil)
