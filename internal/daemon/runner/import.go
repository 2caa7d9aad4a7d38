package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// seed is what a new session gets before claude first starts in it.
type seed struct {
	// conversation is Claude Code's id of the conversation to resume; ""
	// keeps the new session's own.
	conversation string
	// files go into the box's ~/.claude.
	files []portable.File
	// decisions and carried become the session's decision log (import).
	decisions []decisionlog.Entry
	carried   *decisionlog.Carry
	// record, if set, is what the record takes of a file beyond what the
	// create request says (import): what adopt took.
	record *adoptedRecord
}

// adoptedRecord is what an import sets on the record after its create:
// the egress policies beyond the first, the approvals carried over (as
// imported), the limits (a "none" a create request cannot say), and the
// file's history of restarts.
type adoptedRecord struct {
	policies []string
	approved []session.Approval
	limits   limits.Limits
	restarts activity.Restarts
}

// createSeeded creates a session as CreateSession does, then seeds it
// before claude's first start: its decision log, Claude Code's state on
// its volume, the conversation it resumes. Unless req.NoStart, it then
// starts as a wake does, resuming the conversation. A failure before the
// start takes back everything made (record, box, volume, log); a failed
// start leaves the session failed with its reason, its conversation on
// its volume, for paddock wake.
func (r *Runner) createSeeded(ctx context.Context, req api.CreateRequest, sd *seed) (session.Session, error) {
	start := !req.NoStart
	if start {
		// Before anything is made: CreateSession checks it only when it starts.
		if err := r.checkMaxSessions(ctx, r.caller(ctx), ""); err != nil {
			return session.Session{}, err
		}
	}
	req.NoStart = true
	s, err := r.CreateSession(ctx, req)
	if err != nil {
		if s.ID != "" {
			r.undoCreate(s.ID)
		}
		return session.Session{}, err
	}
	if err := r.seedSession(ctx, s.ID, sd, start); err != nil {
		r.undoCreate(s.ID)
		return session.Session{}, err
	}
	if !start {
		return r.reload(s.ID)
	}
	return r.Wake(ctx, s.ID)
}

// seedSession applies sd to a session just created (with NoStart): under
// its lock, its decision log first, then the files through its box (left
// running when start follows), then the record.
func (r *Runner) seedSession(ctx context.Context, id string, sd *seed, start bool) error {
	unlock := r.sessionLock(id)
	defer unlock()
	s, err := r.reload(id)
	if err != nil {
		return err
	}
	if rec := sd.record; rec != nil {
		// What adopt took, checked as the start will check it.
		if len(rec.policies) > 1 && s.Egress == session.EgressAllowlist {
			s.EgressPolicies = append([]string(nil), rec.policies...)
		}
		if s.Egress == session.EgressAllowlist {
			s.EgressApproved = append(s.EgressApproved, rec.approved...)
		}
		s.Limits = rec.limits
		s.Restarts = rec.restarts
		if s.Egress != session.EgressOffline {
			sp, err := r.egressSpec(s)
			if err == nil {
				_, err = sp.Policy()
			}
			if err != nil {
				return fmt.Errorf("the session file's egress rules, on this Runner: %w", err)
			}
		}
	}
	if len(sd.decisions) > 0 || sd.carried != nil {
		if err := r.decisions.Import(s.ID, sd.decisions, sd.carried); err != nil {
			return err
		}
	}
	if len(sd.files) > 0 {
		if err := r.withBox(ctx, &s, start, func(cl *channel.Client) error { return writeBoxState(cl, sd.files) }); err != nil {
			return err
		}
	}
	if sd.conversation != "" {
		s.ClaudeSessionID = sd.conversation
	}
	return r.save(&s)
}

// undoCreate takes back a session made by createSeeded that could not be
// seeded: its box and volume, its files in the state directory, its
// decision log and its record, as if it had never been. What cannot be
// removed is logged (paddock prune removes leftover boxes and volumes).
func (r *Runner) undoCreate(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.RemoveSession(ctx, id, false); err != nil {
		r.log.Warn("take back a session whose import failed", logkey.Session, id, logkey.Error, err)
	}
	if err := r.decisions.Remove(id); err != nil {
		r.log.Warn("take back a session whose import failed: its decision log", logkey.Session, id, logkey.Error, err)
	}
	unlock := r.sessionLock(id)
	defer unlock()
	if err := r.store.Delete(store.BucketSessions, id); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
		r.log.Warn("take back a session whose import failed: its record", logkey.Session, id, logkey.Error, err)
	}
}

// ImportSession implements api.Porter. At most maxImports run at once,
// maxImportsPerPerson of one person's; one more is refused, busy, before
// a byte of its file is read. The file is read and checked whole
// (portable.Read, each entry as it streams in) before anything is made;
// then the session is created as run creates one, owned by the caller,
// with what adopt takes of the file's settings (req's name, backend and
// workspace where given), and seeded with the file's Claude Code state,
// decision log and history; it resumes the file's conversation.
func (r *Runner) ImportSession(ctx context.Context, req api.ImportRequest, file io.Reader) (api.ImportResult, error) {
	release, err := r.admitImport(r.caller(ctx))
	if err != nil {
		return api.ImportResult{}, err
	}
	defer release()
	a, notes, err := portable.Read(file, portable.Limits{})
	if err != nil {
		return api.ImportResult{}, err
	}
	ad, err := r.adopt(a.Settings, req, time.Now().UTC())
	if err != nil {
		return api.ImportResult{Adopted: ad.adopted, Declined: ad.declined}, err
	}
	if v := a.Manifest.ClaudeVersion; v != "" && v != claudecode.PinnedVersion {
		notes = append(notes, fmt.Sprintf("the session ran Claude Code %s; it resumes with this Runner's %s", v, claudecode.PinnedVersion))
	}
	sd := &seed{conversation: a.Manifest.Conversation, files: a.Files, decisions: a.Decisions, carried: a.Settings.Carried, record: &ad.record}
	a.Files, a.Decisions = nil, nil // the seed holds them, and lets go of them once written
	s, err := r.createSeeded(ctx, ad.create, sd)
	res := api.ImportResult{Session: s, Conversation: a.Manifest.Conversation, Files: len(sd.files), Decisions: len(sd.decisions), Notes: notes,
		Adopted: ad.adopted, Declined: ad.declined}
	if err != nil {
		return res, err
	}
	r.log.Info("session imported", logkey.Session, s.ID, "files", res.Files, "decisions", res.Decisions,
		"keep_egress", req.KeepEgress, "keep_credential_mode", req.KeepCredentialMode, "keep_limits", req.KeepLimits)
	return res, nil
}

// How many imports run at once: each holds its file's entries while it
// checks them and until they are in the new box (at most
// portable.DefaultLimits: 128 MiB of data, 250000 decoded decision log
// entries), so they are bounded per person and in all.
var (
	maxImports          = 4
	maxImportsPerPerson = 2
)

// importGate counts a Runner's imports under way, in all and by person.
type importGate struct {
	mu  sync.Mutex
	all int
	per map[uint32]int
}

// importGates holds each Runner's importGate.
var importGates sync.Map // *Runner → *importGate

// admitImport counts one more import of p's, or refuses it, busy
// (ErrLimit), when p or the Runner has as many under way as they may.
// release ends it.
func (r *Runner) admitImport(p session.Person) (release func(), err error) {
	v, _ := importGates.LoadOrStore(r, &importGate{per: map[uint32]int{}})
	g := v.(*importGate)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.per[p.UID] >= maxImportsPerPerson:
		return nil, fmt.Errorf("busy: you have %d imports under way, the most one person may run at once; nothing was imported: try again when one of them ends: %w", g.per[p.UID], errdefs.ErrLimit)
	case g.all >= maxImports:
		return nil, fmt.Errorf("busy: this Runner has %d imports under way, the most it runs at once; nothing was imported: try again in a moment: %w", g.all, errdefs.ErrLimit)
	}
	g.all++
	g.per[p.UID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.all--
			if g.per[p.UID]--; g.per[p.UID] <= 0 {
				delete(g.per, p.UID)
			}
		})
	}, nil
}

// createResumed is CreateSession for a request that brings a host
// conversation (paddock run --resume-host): it is checked as the box
// input it is, laid out where the box's Claude Code finds it (under
// projects/ of /workspace), and the session resumes it.
func (r *Runner) createResumed(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	c := req.Resume
	req.Resume = nil
	if err := c.Check(); err != nil {
		return session.Session{}, fmt.Errorf("the conversation to resume: %w", err)
	}
	files, notes := c.ClaudeFiles(sandbox.WorkspaceDir)
	for _, n := range notes { // names only, never a value
		r.log.Warn("host conversation: sanitized", "note", n)
	}
	return r.createSeeded(ctx, req, &seed{conversation: c.ID, files: files})
}
