package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/diffstat"
	"github.com/paddockhq/paddock/internal/sessions/gitimport"
	"github.com/paddockhq/paddock/internal/sessions/hostrun"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// A clone session (session.Clone) works in a repository of its own in
// its box, made at its first start by scripts/clone.sh from the host
// repository's git directory, which the box sees read-only at
// sandbox.OriginDir. The host repository is never written by the box;
// the work is seen with DiffSession and comes back with FetchSession.

// ownerOfDir is the uid and gid a directory belongs to.
func ownerOfDir(dir string) (uint32, uint32, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no owner", dir)
	}
	return st.Uid, st.Gid, nil
}

// resolveBase is the commit from names in the host repository repo, as a
// full object id, read as the repository's owner with gitimport's safety
// (nothing of the repository's runs): what a clone session's branch
// starts from.
func resolveBase(ctx context.Context, repo, from string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	uid, gid, err := ownerOfDir(repo)
	if err != nil {
		return "", fmt.Errorf("repository %s: %w", repo, err)
	}
	return gitimport.ResolveCommit(ctx, gitimport.Options{Repo: repo, UID: uid, GID: gid}, from)
}

// cloneTimeout bounds the clone's checkout in the box: a repository of
// 100,000 files takes tens of seconds on a small machine.
const cloneTimeout = 15 * time.Minute

// setupClone makes the session's clone in its box at its first start
// (scripts/clone.sh; nothing at a later one). Its files are the box
// user's. A box that cannot see the host repository (StreamedClone) gets
// the base's history as a pack, made on the host as the repository's
// owner (gitimport.Pack) and streamed in (scripts/clonestream.sh).
func setupClone(ctx context.Context, be sandbox.Backend, link *Link, s *session.Session) error {
	if s.Clone == nil {
		return nil
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir}
	if !be.Capabilities(ctx).StreamedClone {
		out, code, err := runInLimits(link.Client, cloneTimeout, runMaxOutput, env, nil, "sh", "-c", cloneScript, "sh",
			sandbox.OriginDir, s.Clone.Base, s.Clone.Branch, sandbox.WorkspaceDir)
		if err != nil || code != 0 {
			return fmt.Errorf("make the session's clone in its box: exit %d: %s %v", code, strings.TrimSpace(out), err)
		}
		return nil
	}
	step := func(name string, stdin io.Reader) (string, error) {
		out, code, err := runInLimits(link.Client, cloneTimeout, runMaxOutput, env, stdin, "sh", "-c", cloneStreamScript, "sh",
			name, sandbox.WorkspaceDir, s.Clone.Base, s.Clone.Branch)
		if err != nil || code != 0 {
			return "", fmt.Errorf("make the session's clone in its box (%s): exit %d: %s %v", name, code, strings.TrimSpace(out), err)
		}
		return strings.TrimSpace(out), nil
	}
	need, err := step("state", nil)
	switch {
	case err != nil:
		return err
	case need == "done":
		return nil
	case need == "checkout":
		_, err := step("checkout", nil)
		return err
	case need != "pack":
		return fmt.Errorf("make the session's clone in its box: the box says it needs %q: %w", logkeyClip(need), errdefs.ErrUnavailable)
	}
	uid, gid, err := ownerOfDir(s.Workspace)
	if err != nil {
		return fmt.Errorf("repository %s: %w", s.Workspace, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cloneTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := gitimport.Pack(ctx, gitimport.Options{Repo: s.Workspace, UID: uid, GID: gid}, s.Clone.Base, pw)
		pw.CloseWithError(err) // nil: EOF
		packed <- err
	}()
	_, err = step("pack", pr)
	pr.CloseWithError(errors.New("the box's end of the clone's pack ended")) // Pack, if still writing, ends
	if perr := <-packed; perr != nil {
		return fmt.Errorf("make the session's clone: the history of %s: %w", s.Workspace, perr)
	}
	return err
}

// maxDiff bounds what DiffSession copies out of a box.
const maxDiff = 64 << 20

// cloneSession resolves ref to a running clone session and its link.
func (r *Runner) cloneSession(ctx context.Context, ref string, op session.Op) (session.Session, *live, error) {
	if err := r.waitAdopted(ctx); err != nil {
		return session.Session{}, nil, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return s, nil, err
	}
	if s.Clone == nil {
		return s, nil, fmt.Errorf("session %q works in its workspace, not a clone: its changes are already in %s (git diff there); paddock run --clone makes a session with a branch of its own: %w", s.Name, s.Workspace, errdefs.ErrInvalid)
	}
	if err := session.Check(op, s.Name, s.Observed); err != nil {
		return s, nil, err
	}
	if err := r.thawIfFrozen(ctx, s.ID); err != nil {
		return s, nil, err
	}
	lv := r.getLive(s.ID)
	if lv == nil {
		return s, nil, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
	}
	return s, lv, nil
}

// DiffSession implements api.Cloner: scripts/diff.sh in the box, its
// output made safe for a terminal (safeText) on its way to w. A stat and
// a list of names take one git diff (--numstat -z, printed here as git
// does: diffstat); a patch takes two (the names first, for the host-run
// note), since a patch is read whole anyway.
func (r *Runner) DiffSession(ctx context.Context, ref string, o api.DiffOptions, w io.Writer) error {
	s, lv, err := r.cloneSession(ctx, ref, session.OpDiff)
	if err != nil {
		return err
	}
	add := "-A"
	if o.NoUntracked {
		add = "-u"
	}
	args := []string{"-c", diffScript, "sh", sandbox.WorkspaceDir, s.Clone.Base, add}
	switch {
	case o.NameOnly || o.Stat:
		args = append(args, "only", "--numstat", "-z")
	case o.Color:
		args = append(args, "names", "--color=always")
	default:
		args = append(args, "names", "--color=never")
	}
	sw := &safeText{w: w, color: o.Color}
	code, err := streamFromBox(lv.link.Client, 2*time.Minute, lv.env, func(rd io.Reader) error {
		if o.NameOnly || o.Stat {
			return writeStat(w, sw, rd, o)
		}
		br := bufio.NewReader(rd)
		names, err := readNames(br)
		if err != nil {
			return err
		}
		if banner := hostrun.Banner(hostrun.Classify(names)); banner != "" {
			if _, err := io.WriteString(w, banner+"\n"); err != nil {
				return err
			}
		}
		n, err := io.Copy(sw, io.LimitReader(br, maxDiff+1))
		if err == nil && n > maxDiff {
			_, _ = io.WriteString(w, fmt.Sprintf("\n(paddock: the diff goes on past %d MiB; see it in the box: paddock exec %s -- git diff %s)\n", maxDiff>>20, s.Name, s.Clone.Base))
			return nil
		}
		return err
	}, append([]string{"sh"}, args...)...)
	if err != nil {
		return fmt.Errorf("diff in the box: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("diff in the box: git exited %d (paddock exec %s -- git status says more): %w", code, s.Name, errdefs.ErrUnavailable)
	}
	// What the diff showed, ls and the web page show too: the branch as
	// it is now, read after (a commit made by exec is seen by no turn).
	go r.refreshClone(s.ID)
	return sw.flush()
}

// writeStat reads the box's git diff --numstat -z and writes the names
// (NameOnly, quoted as git quotes them) or the host-run note and the
// diffstat, through sw.
func writeStat(w io.Writer, sw *safeText, rd io.Reader, o api.DiffOptions) error {
	b, err := io.ReadAll(io.LimitReader(rd, maxNames+1))
	if err != nil {
		return err
	}
	if len(b) > maxNames {
		return fmt.Errorf("the box's list of changed files is over %d MiB: %w", maxNames>>20, errdefs.ErrUnavailable)
	}
	fs, err := diffstat.Parse(b)
	if err != nil {
		return fmt.Errorf("the box's diff: %v: %w", err, errdefs.ErrUnavailable)
	}
	if o.NameOnly {
		for _, f := range fs {
			if _, err := io.WriteString(sw, diffstat.Quote(f.Path)+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	if banner := hostrun.Banner(hostrun.Classify(diffstat.Names(fs))); banner != "" {
		if _, err := io.WriteString(w, banner+"\n"); err != nil {
			return err
		}
	}
	_, err = io.WriteString(sw, diffstat.Format(fs, o.Color))
	return err
}

// maxNames bounds the list of changed files diff.sh prints first.
const maxNames = 16 << 20

// readNames reads what diff.sh prints before the diff: a line with a
// length, then that many bytes of NUL-terminated file names.
func readNames(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadSlice('\n')
	n, perr := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || perr != nil || n < 0 || n > maxNames {
		return nil, fmt.Errorf("the box's diff did not begin with the list of its files (%q): %w", logkeyClip(string(line)), errdefs.ErrUnavailable)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("the box's list of changed files was cut short: %w", errdefs.ErrUnavailable)
	}
	return hostrun.ParseNameOnlyZ(b), nil
}

// maxFetch bounds the bundle a fetch takes from a box.
const maxFetch = gitimport.DefaultMaxBytes

// FetchSession implements api.Cloner: the box makes a bundle of the
// session's branch beyond its base (git bundle create, as the box user,
// in the box), which streams to gitimport.Import: checked object by
// object and imported into the host repository as its owner, as
// refs/remotes/paddock/<session>/<branch>, nothing of the repository's or
// the box's run. A session with no commit beyond its base fetches nothing.
func (r *Runner) FetchSession(ctx context.Context, ref string) (api.FetchResult, error) {
	s, lv, err := r.cloneSession(ctx, ref, session.OpFetch)
	if err != nil {
		return api.FetchResult{}, err
	}
	c := s.Clone
	st, err := readBranch(lv, s)
	if err != nil {
		return api.FetchResult{}, err
	}
	r.noteClone(s.ID, func(c *session.Clone) { st.apply(c) })
	res := api.FetchResult{Commit: st.head, Ahead: st.ahead, Uncommitted: st.dirty}
	if res.Ahead == 0 {
		return res, nil
	}
	uid, gid, err := ownerOfDir(s.Workspace)
	if err != nil {
		return res, fmt.Errorf("repository %s: %w", s.Workspace, err)
	}
	if s.WorkspaceUID != 0 && int(uid) != s.WorkspaceUID {
		return res, fmt.Errorf("repository %s belongs to uid %d now, not to %d, whose it was when session %q was made; nothing fetched: %w",
			s.Workspace, uid, s.WorkspaceUID, s.Name, errdefs.ErrConflict)
	}
	o := gitimport.Options{Repo: s.Workspace, Session: s.Name, Branches: []string{c.Branch}, MaxBytes: maxFetch, UID: uid, GID: gid}
	var im gitimport.Result
	code, err := streamFromBox(lv.link.Client, 10*time.Minute, lv.env, func(rd io.Reader) error {
		var err error
		im, err = gitimport.Import(ctx, o, rd)
		return err
	}, "git", "-C", sandbox.WorkspaceDir, "bundle", "create", "-", "refs/heads/"+c.Branch, "^"+c.Base)
	res.Bytes = im.Bytes
	for _, rf := range im.Refused {
		res.Refused = append(res.Refused, rf.String())
	}
	if err != nil {
		return res, fmt.Errorf("fetch session %q: %w", s.Name, err)
	}
	if code != 0 {
		return res, fmt.Errorf("fetch session %q: git bundle in the box exited %d: %w", s.Name, code, errdefs.ErrUnavailable)
	}
	for _, i := range im.Imported {
		if i.Branch == c.Branch {
			res.Ref, res.Commit, res.Old = i.Ref, i.OID, i.Old
		}
	}
	if res.Ref == "" {
		return res, fmt.Errorf("fetch session %q: its bundle did not carry %s: %w", s.Name, c.Branch, errdefs.ErrUnavailable)
	}
	r.noteClone(s.ID, func(c *session.Clone) { c.Fetched = res.Commit })
	r.log.Info("session fetched", logkey.Session, s.ID, "ref", res.Ref, "commit", res.Commit, "bytes", res.Bytes)
	return res, nil
}

// MergeSession implements api.Cloner: FetchSession, then
// gitimport.Merge of the fetched ref into the owner's branch, as the
// repository's owner; the changed files the host's tools run are named
// (hostrun).
func (r *Runner) MergeSession(ctx context.Context, ref string, o api.MergeOptions) (api.MergeResult, error) {
	fr, err := r.FetchSession(ctx, ref)
	res := api.MergeResult{Fetch: fr}
	if err != nil {
		return res, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return res, err
	}
	if fr.Ahead == 0 {
		return res, fmt.Errorf("session %q has no commit beyond its base yet: nothing to merge (paddock diff %s shows what it has not committed): %w",
			s.Name, s.Name, errdefs.ErrConflict)
	}
	uid, gid, err := ownerOfDir(s.Workspace)
	if err != nil {
		return res, fmt.Errorf("repository %s: %w", s.Workspace, err)
	}
	mo := gitimport.MergeOptions{
		Options: gitimport.Options{Repo: s.Workspace, Session: s.Name, UID: uid, GID: gid},
		Ref:     fr.Ref, Into: o.Into, Squash: o.Squash,
	}
	if o.Identity != nil {
		mo.Identity = *o.Identity
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	m, err := gitimport.Merge(ctx, mo)
	res.Into, res.Old, res.New, res.Kind, res.WorkTree, res.Files = m.Into, m.Old, m.New, m.Kind, m.WorkTree, len(m.Changed)
	for _, f := range hostrun.Classify(m.Changed) {
		res.HostRun = append(res.HostRun, api.HostRunPath{Path: f.Path, Why: f.Why})
	}
	if err != nil {
		return res, fmt.Errorf("merge session %q: %w", s.Name, err)
	}
	r.noteClone(s.ID, func(c *session.Clone) { c.Merged = fr.Commit })
	r.log.Info("session merged", logkey.Session, s.ID, "into", res.Into, "kind", res.Kind, "commit", res.New)
	return res, nil
}

// branchState is a clone's branch as scripts/branchstate.sh reads it,
// at the moment the reading began.
type branchState struct {
	head  string
	ahead int
	dirty bool
	at    time.Time
}

// apply records st in c unless c already holds a reading begun later:
// readings run concurrently (a turn's end, the web page's diff, a fetch)
// and a slow, older one must not overwrite a newer one.
func (st branchState) apply(c *session.Clone) {
	if c.Checked.After(st.at) {
		return
	}
	c.Head, c.Ahead, c.Dirty, c.Checked = st.head, st.ahead, st.dirty, st.at
}

// readBranch reads the clone session's branch in its box.
func readBranch(lv *live, s session.Session) (branchState, error) {
	c := s.Clone
	at := time.Now().UTC()
	out, code, err := runIn(lv.link.Client, lv.env, nil, "sh", "-c", branchStateScript, "sh", sandbox.WorkspaceDir, c.Branch, c.Base)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || code != 0 || len(lines) != 3 || !gitimport.IsOID(lines[0]) {
		return branchState{}, fmt.Errorf("session %q has no branch %s in its clone any more (exit %d: %s): paddock exec %s -- git -C /workspace branch shows what it has: %w",
			s.Name, c.Branch, code, logkeyClip(out), s.Name, errdefs.ErrConflict)
	}
	st := branchState{head: lines[0], dirty: lines[2] == "dirty", at: at}
	if st.ahead, err = strconv.Atoi(lines[1]); err != nil {
		return st, fmt.Errorf("session %q: count of its commits: %q: %w", s.Name, lines[1], errdefs.ErrUnavailable)
	}
	return st, nil
}

// noteClone changes the clone record of session id with f, under the
// session's lock; a session gone or without a clone is left alone.
func (r *Runner) noteClone(id string, f func(*session.Clone)) {
	_, unlock := r.lockSlot(id)
	defer unlock()
	s, err := r.reload(id)
	if err != nil || s.Clone == nil || s.Observed == session.Removed {
		return
	}
	f(s.Clone)
	if err := r.save(&s); err != nil {
		r.log.Warn("session record not saved", logkey.Session, id, logkey.Error, err)
	}
}

// refreshClone reads a running clone session's branch into its record
// (best effort: a box that does not answer leaves the record as it was).
func (r *Runner) refreshClone(id string) {
	s, err := r.reload(id)
	lv := r.getLive(id)
	if err != nil || s.Clone == nil || lv == nil || lv.link == nil {
		return
	}
	st, err := readBranch(lv, s)
	if err != nil {
		r.log.Debug("clone branch not read", logkey.Session, id, logkey.Error, err)
		return
	}
	r.noteClone(id, func(c *session.Clone) { st.apply(c) })
}

// logkeyClip is a box's output, clipped and on one line, for an error.
func logkeyClip(s string) string {
	return logkey.Clip(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "), 200)
}

// safeText passes a box's text to a person's terminal: printable text,
// newlines and tabs as they are; with color, SGR sequences (ESC [ … m,
// digits and ';' only) too; every other control byte (an escape that would
// set the terminal's title, write its clipboard, move its cursor) as '?'.
// Invalid UTF-8 passes as bytes (a terminal shows them as such).
type safeText struct {
	w     io.Writer
	color bool
	esc   []byte // an escape sequence being read, across writes
	out   []byte
}

// maxSGR bounds one colour sequence; a longer one is not one.
const maxSGR = 32

func (t *safeText) Write(p []byte) (int, error) {
	t.out = t.out[:0]
	for _, c := range p {
		if len(t.esc) > 0 {
			t.esc = append(t.esc, c)
			switch {
			case len(t.esc) == 2 && c == '[':
				continue
			case len(t.esc) > 2 && (c >= '0' && c <= '9' || c == ';') && len(t.esc) < maxSGR:
				continue
			case len(t.esc) > 2 && c == 'm' && t.color:
				t.out = append(t.out, t.esc...)
			default:
				t.out = append(t.out, '?')
				t.out = append(t.out, sanitize(t.esc[1:])...)
			}
			t.esc = t.esc[:0]
			continue
		}
		switch {
		case c == 0x1b:
			t.esc = append(t.esc, c)
		case c == '\n' || c == '\t' || c >= 0x20 && c != 0x7f:
			t.out = append(t.out, c)
		default:
			t.out = append(t.out, '?')
		}
	}
	if _, err := t.w.Write(t.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes out an escape sequence cut off at the end, made safe.
func (t *safeText) flush() error {
	if len(t.esc) == 0 {
		return nil
	}
	b := append([]byte{'?'}, sanitize(t.esc[1:])...)
	t.esc = t.esc[:0]
	_, err := t.w.Write(b)
	return err
}

// sanitize replaces the control bytes of b with '?'.
func sanitize(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			c = '?'
		}
		out[i] = c
	}
	return out
}

var _ api.Cloner = (*Runner)(nil)
