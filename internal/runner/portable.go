package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/activity"
	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/channel"
	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/config"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/limits"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/portable"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/session"
	"github.com/paddockhq/paddock/internal/store"
	"github.com/paddockhq/paddock/internal/version"
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

// adoption is what an import takes of a file's settings.
type adoption struct {
	create api.CreateRequest
	record adoptedRecord
	// adopted and declined say, in words, each setting taken from the
	// file, and each one it asked for that was not (with the flag that
	// takes it).
	adopted, declined []string
}

// take says a setting taken from the file.
func (ad *adoption) take(format string, a ...any) {
	ad.adopted = append(ad.adopted, fmt.Sprintf(format, a...))
}

// decline says a setting the file asked for that was not taken.
func (ad *adoption) decline(format string, a ...any) {
	ad.declined = append(ad.declined, fmt.Sprintf(format, a...))
}

// importEgress is the egress posture an import starts from: a create's
// default. A file's posture is taken only if it is no wider, or with
// KeepEgress.
const importEgress = session.EgressOffline

// egressWidth orders postures by what they let a box reach.
func egressWidth(posture string) int {
	switch posture {
	case "", session.EgressOffline:
		return 0
	case session.EgressAnthropic:
		return 1
	}
	return 2
}

// adopt decides what an import takes of a file's settings, never more
// than this Runner's defaults give unless req says so: a file is what
// someone handed the importer, and it may ask for anything.
//
//   - credential mode direct (the importer's own credential in the box,
//     past the credential proxy and every budget): only with
//     KeepCredentialMode; else proxy;
//   - an egress posture wider than importEgress, allow rules, ask mode,
//     attached policies and approvals: only with KeepEgress; approvals
//     are then recorded as imported from the file, the approver the file
//     names quoted as what the file said, never as who approved;
//   - a limit or budget looser than the Runner's default (none where it
//     has one, or a larger one): only with KeepLimits;
//   - the rest (name, model, effort, restart policy, deny rules, limits
//     no looser than the defaults, the restarts' history) always.
//
// Every setting taken is said in adopted, every one not in declined.
func (r *Runner) adopt(st portable.Settings, req api.ImportRequest, now time.Time) (adoption, error) {
	var ad adoption
	take := ad.take
	cr := api.CreateRequest{Name: req.Name, Backend: req.Backend, Workspace: req.Workspace, NoStart: req.NoStart,
		Model: st.Model, Effort: st.Effort, Restart: string(st.Restart)}
	if cr.Name == "" {
		cr.Name = st.Name
		if st.Name != "" {
			take("name %s", st.Name)
		}
	}
	if st.Model != "" {
		take("model %s", st.Model)
	}
	if st.Effort != "" {
		take("effort %s", st.Effort)
	}
	if st.Restart != "" {
		take("restart policy %s", st.Restart)
	}
	ad.adoptCredentialMode(st, req, &cr)
	if err := r.adoptEgress(&ad, st, req, &cr, now); err != nil {
		return ad, err
	}
	ad.adoptLimits(st, req, r.opts.Config.Sessions, &cr)
	ad.record.restarts = st.Restarts
	ad.create = cr
	return ad, nil
}

// adoptCredentialMode: direct only with KeepCredentialMode, else proxy.
func (ad *adoption) adoptCredentialMode(st portable.Settings, req api.ImportRequest, cr *api.CreateRequest) {
	take, decline := ad.take, ad.decline
	switch {
	case st.CredentialMode != session.ModeDirect:
		take("credential mode proxy")
	case req.KeepCredentialMode:
		cr.CredentialMode = string(session.ModeDirect)
		take("credential mode direct, with --keep-credential-mode: your own credential goes into the box, past the credential proxy and every limit and budget")
	default:
		decline("credential mode direct (your own credential in the box, past the credential proxy and every limit and budget): the session is proxy mode; --keep-credential-mode takes it")
	}
}

// adoptEgress: a posture no wider than importEgress, and the deny rules,
// always; a wider one, allow rules, ask mode, attached policies (each one
// in this Runner's config) and approvals only with KeepEgress.
func (r *Runner) adoptEgress(ad *adoption, st portable.Settings, req api.ImportRequest, cr *api.CreateRequest, now time.Time) error {
	take, decline := ad.take, ad.decline
	posture := st.Egress
	if posture == "" {
		posture = session.EgressOffline
	}
	switch {
	case egressWidth(posture) <= egressWidth(importEgress):
		cr.Egress = posture
		take("egress %s", posture)
	case req.KeepEgress:
		cr.Egress = posture
		take("egress %s, with --keep-egress", posture)
	default:
		cr.Egress = importEgress
		decline("egress %s: the session is %s; --keep-egress takes it", posture, importEgress)
	}
	var claimed []string
	var approved []session.Approval
	for _, a := range st.EgressApproved {
		if !a.Until.IsZero() && !now.Before(a.Until) {
			continue // expired: nothing to carry
		}
		claimed = append(claimed, printable(a.Rule, 256)+" (the file says by "+printable(a.By, 64)+")")
		approved = append(approved, session.Approval{Rule: a.Rule, Until: a.Until, At: now, By: importedBy(req.Source, a.By)})
	}
	keepRules := req.KeepEgress && cr.Egress == session.EgressAllowlist
	for _, ru := range []struct {
		what  string // with the items after it
		items []string
		apply func()
	}{
		{"allow rules ", st.EgressAllow, func() { cr.Allow = st.EgressAllow }},
		{"egress policies ", st.EgressPolicies, func() { cr.EgressPolicy = st.EgressPolicies[0]; ad.record.policies = st.EgressPolicies }},
		{"ask mode", boolItem(st.EgressAsk), func() { cr.Ask = true }},
		{"approvals ", claimed, func() { ad.record.approved = approved }},
	} {
		what := ru.what + strings.Join(ru.items, ", ")
		switch {
		case len(ru.items) == 0:
		case keepRules:
			ru.apply()
			if ru.what != "approvals " { // approvals: said one by one below
				take("%s, with --keep-egress", what)
			}
		case req.KeepEgress:
			decline("%s: egress %s has none", what, cr.Egress)
		default:
			decline("%s: not taken; --keep-egress takes it, with the file's egress allowlist", what)
		}
	}
	if keepRules {
		for _, a := range approved {
			take("approval of %s, with --keep-egress, recorded as by %q", printable(a.Rule, 256), a.By)
		}
	}
	if cr.EgressPolicy != "" {
		for _, p := range st.EgressPolicies {
			if _, ok := r.opts.Config.Egress.Policies[p]; !ok {
				return fmt.Errorf("the session file's egress policy %q is not in this Runner's config (egress.policies.%s): add it there, then import again: %w", p, p, errdefs.ErrNotFound)
			}
		}
	}
	if len(st.EgressDeny) > 0 { // deny rules only narrow
		cr.Deny = st.EgressDeny
		take("deny rules: %s", strings.Join(st.EgressDeny, ", "))
	}
	return nil
}

// adoptLimits: each limit and budget no looser than def, this Runner's
// default, always; a looser one only with KeepLimits.
func (ad *adoption) adoptLimits(st portable.Settings, req api.ImportRequest, def config.Sessions, cr *api.CreateRequest) {
	take, decline := ad.take, ad.decline
	lim := limits.Limits{RPM: def.RPM, Concurrent: def.MaxStreams, TokenBudget: def.TokenBudget, BudgetUSD: def.BudgetUSD}
	for _, f := range []struct {
		what        string
		file, deflt float64
		set         func(float64)
		show        func(float64) string
	}{
		{"rpm limit", float64(st.Limits.RPM), float64(def.RPM), func(v float64) { lim.RPM = int(v) }, plainLimit},
		{"max streams", float64(st.Limits.Concurrent), float64(def.MaxStreams), func(v float64) { lim.Concurrent = int(v) }, plainLimit},
		{"token budget", float64(st.Limits.TokenBudget), float64(def.TokenBudget), func(v float64) { lim.TokenBudget = int64(v) }, plainLimit},
		{"budget", st.Limits.BudgetUSD, def.BudgetUSD, func(v float64) { lim.BudgetUSD = v }, dollarLimit},
	} {
		switch {
		case f.file == f.deflt:
			if f.file != 0 {
				take("%s %s", f.what, f.show(f.file))
			}
		case f.file != 0 && (f.deflt == 0 || f.file < f.deflt): // no looser
			f.set(f.file)
			take("%s %s", f.what, f.show(f.file))
		case req.KeepLimits:
			f.set(f.file)
			take("%s %s, with --keep-limits (this Runner's default is %s)", f.what, f.show(f.file), f.show(f.deflt))
		default:
			decline("%s %s: looser than this Runner's %s, which the session has; --keep-limits takes it", f.what, f.show(f.file), f.show(f.deflt))
		}
	}
	// The create checks them as it checks run's; the record takes them
	// all after, "none" too.
	cr.RPM, cr.MaxStreams, cr.TokenBudget, cr.BudgetUSD = lim.RPM, lim.Concurrent, lim.TokenBudget, lim.BudgetUSD
	ad.record.limits = lim
}

// boolItem is one item, empty, for true: a setting without a value.
func boolItem(b bool) []string {
	if b {
		return []string{""}
	}
	return nil
}

func plainLimit(v float64) string {
	if v == 0 {
		return "none"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func dollarLimit(v float64) string {
	if v == 0 {
		return "none"
	}
	return "$" + strconv.FormatFloat(v, 'f', -1, 64)
}

// importedBy is who an approval carried over by an import is recorded
// as approved by: the file it came from, and the approver it names only
// as what the file said.
func importedBy(source, claimed string) string {
	src := printable(path.Base(source), 64)
	if source == "" || src == "." || src == "/" {
		src = "a session file"
	}
	return "imported from " + src + " (approver said " + printable(claimed, 64) + ")"
}

// printable is s with what a terminal would act on (control characters,
// invalid UTF-8) as '?', at most n runes.
func printable(s string, n int) string {
	var b strings.Builder
	k := 0
	for _, c := range s {
		if k == n {
			b.WriteString("…")
			break
		}
		if c == utf8.RuneError || !unicode.IsPrint(c) {
			c = '?'
		}
		b.WriteRune(c)
		k++
	}
	return b.String()
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

var _ api.Porter = (*Runner)(nil)
