package runner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/activity"
	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/channel"
	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/guest"
	"github.com/paddockhq/paddock/internal/image"
	"github.com/paddockhq/paddock/internal/limits"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/mirror"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/session"
	"github.com/paddockhq/paddock/internal/store"
)

// Tmux: one server per box on its own socket, one session named claude.
const (
	TmuxSocket  = "paddock"
	TmuxSession = "claude"
)

// ErrCoMount is wrapped when a direct-mode session asks for a host
// workspace: a box that holds the owner's real credential must not see the
// owner's files, or the agent could hand the credential to a file the owner
// later runs. Split the work into two boxes: a proxy-mode box on the
// workspace, a direct-mode box without it.
var ErrCoMount = fmt.Errorf("a direct-mode box never mounts a host workspace (the real credential and your files would share one box); use a proxy-mode session for the workspace, or a direct-mode one without --workspace: %w", errdefs.ErrForbidden)

// live is what the Runner holds in memory for a running session.
type live struct {
	link *Link
	env  []string // claude's environment, also used by exec and attach

	mmu    sync.Mutex
	mirror *mirror.Mirror // the terminal mirror, started on the first attach
}

// sessionsState is the Runner's session bookkeeping.
type sessionsState struct {
	mu    sync.Mutex             // guards live and locks
	live  map[string]*live       // by session id
	locks map[string]*sync.Mutex // one operation at a time per session
}

// waitAdopted blocks until the start-up reconciliation is done.
func (r *Runner) waitAdopted(ctx context.Context) error {
	select {
	case <-r.adopted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) sessionLock(id string) func() {
	r.sess.mu.Lock()
	l := r.sess.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		r.sess.locks[id] = l
	}
	r.sess.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (r *Runner) getLive(id string) *live {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	return r.sess.live[id]
}

func (r *Runner) setLive(id string, l *live) {
	r.sess.mu.Lock()
	defer r.sess.mu.Unlock()
	// The old channel ends unless the new state keeps using it (set).
	if old := r.sess.live[id]; old != nil && old.link != nil && (l == nil || l.link != old.link) {
		old.link.Close()
	}
	if l != nil && l.link != nil {
		if old := r.sess.live[id]; old == nil || old.link != l.link {
			go r.watchLink(id, l.link)
			go r.watchEvents(id, l.link) // claude's activity (activity.go)
		}
	}
	if l == nil {
		delete(r.sess.live, id)
	} else {
		r.sess.live[id] = l
	}
}

// watchLink waits for a live session's channel to end. An end the Runner
// did not ask for (sleep, rm and shutdown all replace or drop the link
// first, or set stopping) means the box died or was killed from outside:
// the session's token is revoked and the session is marked asleep, or
// failed if its box is gone, with the reason; paddock wake resumes it.
func (r *Runner) watchLink(id string, l *Link) {
	<-l.Client.Done()
	current := func() bool {
		lv := r.getLive(id)
		return !r.stopping.Load() && lv != nil && lv.link == l
	}
	if !current() {
		return
	}
	unlock := r.sessionLock(id)
	defer unlock()
	if !current() {
		return
	}
	s, err := r.reload(id)
	if err != nil {
		r.log.Error("box channel lost: reload session", logkey.Session, id, logkey.Error, err)
		return
	}
	_ = r.detach(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		r.fail(&s, "lost the channel to its box, and its backend: "+err.Error())
		return
	}
	// A box killed from outside may still read as running for a moment
	// after its channel ended (Docker updates its state asynchronously).
	var bx sandbox.Box
	for i := 0; ; i++ {
		bx, err = be.Inspect(ctx, s.BoxID)
		if err != nil || bx.State != sandbox.StateRunning || i == 30 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		r.fail(&s, "its box disappeared (removed from outside paddock); paddock wake makes a new one on the same volume")
		return
	case err != nil:
		r.fail(&s, "lost the channel to its box: inspect: "+err.Error())
		return
	case bx.State == sandbox.StateRunning:
		// Alive but unreachable: a box paddock cannot control must not
		// keep running; stop it so wake starts it clean.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.fail(&s, "lost the channel to its box, and could not stop it: "+err.Error())
			return
		}
		s.Reason = "lost the channel to its box; paddock stopped it; paddock wake resumes it"
	default:
		s.Reason = "its box stopped from outside paddock (killed, or it exited); paddock wake resumes it"
		// What the backend holds for a running box goes now, not at the
		// next wake: the host workspace's view and its placeholders in
		// the owner's directory, cgroups. Stop of a stopped box does that.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("box stopped from outside: release what it held", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	s.Observed = session.Asleep
	s.Frozen, s.FrozenAt = false, time.Time{} // a frozen box killed from outside is no longer frozen
	_ = r.save(&s)
	r.log.Warn("session box lost", logkey.Session, s.ID, logkey.Reason, s.Reason)
}

// Sessions lists every session record, newest first.
func (r *Runner) Sessions(context.Context) ([]session.Session, error) {
	kvs, err := r.store.List(store.BucketSessions)
	if err != nil {
		return nil, err
	}
	out := make([]session.Session, 0, len(kvs))
	for _, kv := range kvs {
		var s session.Session
		if json.Unmarshal(kv.Value, &s) == nil {
			r.fillOwner(&s)
			r.owners.set(s.ID, s.Owner)
			if op, ok := r.ending.Load(s.ID); ok {
				s.Ending = op.(session.Op)
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	r.overlayActivity(out)
	return out, nil
}

func (r *Runner) save(s *session.Session) error {
	s.Updated = time.Now().UTC()
	s.YourRole = "" // per caller, never stored
	s.Ending = ""   // while an operation runs, never stored
	r.fillOwner(s)
	r.owners.set(s.ID, s.Owner)
	r.stampActivity(s) // the activity in memory is the current one
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return r.store.Put(store.BucketSessions, s.ID, b)
}

// Session resolves a name or id prefix.
func (r *Runner) Session(ctx context.Context, ref string) (session.Session, error) {
	all, err := r.Sessions(ctx)
	if err != nil {
		return session.Session{}, err
	}
	return session.Resolve(all, ref)
}

func (r *Runner) limits() sandbox.Limits {
	c := r.opts.Config.Sessions
	return sandbox.Limits{MemoryBytes: c.MemoryMB << 20, Pids: c.Pids, CPUs: c.CPUs}
}

// CreateSession checks the request, records the session, makes its box
// and, unless NoStart, starts claude in it.
func (r *Runner) CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	if req.Resume != nil { // a host conversation to resume (portable.go)
		return r.createResumed(ctx, req)
	}
	if req.Name == "" {
		req.Name = session.NewName()
	}
	if err := session.ValidName(req.Name); err != nil {
		return session.Session{}, err
	}
	if req.Backend == "" {
		req.Backend = r.opts.Config.Sessions.Backend
	}
	if req.Egress == "" {
		req.Egress = session.EgressOffline
	}
	mode := session.CredentialMode(req.CredentialMode)
	if mode == "" {
		mode = session.ModeProxy
	}
	switch mode {
	case session.ModeProxy:
	case session.ModeDirect:
		if req.Egress != session.EgressOffline && req.Egress != session.EgressAnthropic {
			return session.Session{}, fmt.Errorf("credential mode direct needs egress offline or anthropic, not %q: a box with the real credential may reach nothing else: %w", req.Egress, errdefs.ErrForbidden)
		}
		if req.Workspace != "" {
			return session.Session{}, ErrCoMount
		}
	default:
		return session.Session{}, fmt.Errorf("credential mode %q is not proxy or direct: %w", req.CredentialMode, errdefs.ErrInvalid)
	}
	var allow, deny, policies []string
	switch req.Egress {
	case session.EgressOffline:
		if len(req.Allow) > 0 || req.EgressPolicy != "" || req.Ask {
			return session.Session{}, fmt.Errorf("--allow, --ask and --egress-policy need --egress allowlist: %w", errdefs.ErrInvalid)
		}
	case session.EgressAnthropic:
		if len(req.Allow) > 0 || req.EgressPolicy != "" || req.Ask {
			return session.Session{}, fmt.Errorf("the anthropic posture allows the API only; for more use --egress allowlist: %w", errdefs.ErrInvalid)
		}
	case session.EgressAllowlist:
		if mode == session.ModeDirect {
			return session.Session{}, fmt.Errorf("credential mode direct needs egress offline or anthropic, not allowlist: %w", errdefs.ErrForbidden)
		}
		allow = append(allow, req.Allow...)
		if req.EgressPolicy != "" {
			if _, ok := r.opts.Config.Egress.Policies[req.EgressPolicy]; !ok {
				return session.Session{}, fmt.Errorf("no egress policy %q in the Runner's config: %w", req.EgressPolicy, errdefs.ErrNotFound)
			}
			policies = []string{req.EgressPolicy} // attached: read from the config, detachable live
		}
	default:
		return session.Session{}, fmt.Errorf("egress %q is not offline, anthropic or allowlist: %w", req.Egress, errdefs.ErrInvalid)
	}
	deny = append(deny, req.Deny...)
	if req.Egress != session.EgressOffline {
		sp, err := r.egressSpec(session.Session{Egress: req.Egress, EgressAllow: allow, EgressDeny: deny, EgressPolicies: policies, EgressAsk: req.Ask})
		if err != nil {
			return session.Session{}, err
		}
		if _, err := sp.Policy(); err != nil {
			return session.Session{}, err
		}
	}
	if err := session.ValidModel(req.Model); err != nil {
		return session.Session{}, err
	}
	if err := session.ValidEffort(req.Effort); err != nil {
		return session.Session{}, err
	}
	restart, err := activity.ParsePolicy(req.Restart)
	if err != nil {
		return session.Session{}, err
	}
	lim := limits.Limits{RPM: r.opts.Config.Sessions.RPM, Concurrent: r.opts.Config.Sessions.MaxStreams, TokenBudget: r.opts.Config.Sessions.TokenBudget}
	if req.RPM < 0 || req.MaxStreams < 0 || req.TokenBudget < 0 {
		return session.Session{}, fmt.Errorf("limits must be 0 (none) or more: %w", errdefs.ErrInvalid)
	}
	if req.RPM > 0 {
		lim.RPM = req.RPM
	}
	if req.MaxStreams > 0 {
		lim.Concurrent = req.MaxStreams
	}
	if req.TokenBudget > 0 {
		lim.TokenBudget = req.TokenBudget
	}
	if lim.BudgetUSD, err = budgetUSD(r.opts.Config.Sessions.BudgetUSD, req.BudgetUSD); err != nil {
		return session.Session{}, err
	}
	first, err := r.checkFirstStart(&req) // setup, git identity, prompt: setup.go
	if err != nil {
		return session.Session{}, err
	}
	var wsUID int // the workspace's owner now, kept for every later mount
	if req.Workspace != "" {
		abs, err := filepath.Abs(req.Workspace)
		if err != nil {
			return session.Session{}, err
		}
		// Every reason a workspace cannot be bound, said now, with the
		// next step, before anything of the session is made.
		_, own, err := wsmount.Check(abs)
		if err != nil {
			return session.Session{}, err
		}
		req.Workspace, wsUID = abs, own.UID
	} else if req.UnsafeHostCode {
		return session.Session{}, fmt.Errorf("--unsafe-host-code is about a host workspace; give --workspace too: %w", errdefs.ErrInvalid)
	}
	// The session creator's own credential, if given, else the owner's.
	var own *credential.Credential
	if v := req.Credential.Reveal(); v != "" {
		sv := secret.New(strings.TrimSpace(v))
		kind, ok := credential.DetectKind(sv)
		if req.CredentialKind != "" {
			var err error
			if kind, err = credential.ParseKind(req.CredentialKind); err != nil {
				return session.Session{}, err
			}
		} else if !ok {
			return session.Session{}, fmt.Errorf("cannot tell the kind of the session's credential from its prefix; give its kind (oauth, api_key, auth_token): %w", errdefs.ErrInvalid)
		}
		own = &credential.Credential{Kind: kind, Secret: sv, Source: "session"}
	}
	owner := r.caller(ctx)
	cred, err := r.credentialOfPerson(owner)
	if own != nil {
		cred, err = *own, nil
		cred.User = owner.Name
	}
	if err != nil {
		return session.Session{}, err
	}
	if !req.NoStart {
		if err := r.checkMaxSessions(ctx, owner, ""); err != nil {
			return session.Session{}, err
		}
	}
	if err := cred.Usable(time.Now()); err != nil {
		return session.Session{}, err
	}
	be, err := r.backend(ctx, req.Backend)
	if err != nil {
		return session.Session{}, err
	}
	if mode == session.ModeDirect && be.Capabilities(ctx).ProxyOnly {
		return session.Session{}, fmt.Errorf("the %s backend runs proxy-mode sessions only: nothing in it may ever hold your credential; leave out --credential-mode direct: %w", req.Backend, errdefs.ErrForbidden)
	}
	if mode == session.ModeDirect && r.lent(owner, cred) {
		return session.Session{}, errLentDirect(owner)
	}
	if mode == session.ModeDirect && cred.Kind != credential.KindOAuth {
		return session.Session{}, fmt.Errorf("credential mode direct passes a setup token (oauth) into the box; the owner's credential is %s: %w", cred.Kind, errdefs.ErrInvalid)
	}
	all, err := r.Sessions(ctx)
	if err != nil {
		return session.Session{}, err
	}
	for _, s := range all {
		if s.Name == req.Name && s.Live() {
			// Names are one space for everyone; the id is told only to
			// those who may see the session.
			if s.RoleOf(owner.UID) == session.RoleNone && !r.usesOwnersCredential(owner) {
				return session.Session{}, fmt.Errorf("the name %q is taken by another person's session; pick another --name: %w", req.Name, errdefs.ErrConflict)
			}
			return session.Session{}, fmt.Errorf("a session named %q exists (%s); pick another --name or paddock rm it: %w", req.Name, s.ID[:8], errdefs.ErrConflict)
		}
	}
	id, err := session.NewID()
	if err != nil {
		return session.Session{}, err
	}
	uuid, err := session.NewUUID()
	if err != nil {
		return session.Session{}, err
	}
	now := time.Now().UTC()
	s := session.Session{ID: id, Name: req.Name, Backend: be.Name(), Desired: session.Running, Observed: session.Created,
		CredentialMode: mode, CredentialKind: string(cred.Kind), Egress: req.Egress, EgressAllow: allow, EgressDeny: deny, EgressPolicies: policies, EgressAsk: req.Ask, Workspace: req.Workspace, WorkspaceUID: wsUID, UnsafeHostCode: req.UnsafeHostCode,
		Model: req.Model, Effort: req.Effort, ClaudeSessionID: uuid, Created: now, Limits: lim, Owner: owner}
	s.Restart = restart
	unlock := r.sessionLock(id)
	defer unlock()
	for name, v := range req.RelaySecrets {
		known := false
		for _, rl := range r.opts.Config.Relays {
			known = known || rl.Name == name
		}
		sv := strings.TrimSpace(v.Reveal())
		if !known || sv == "" {
			return session.Session{}, fmt.Errorf("relay %q: no such relay in the Runner's config, or an empty secret: %w", name, errdefs.ErrInvalid)
		}
		f := r.relaySecretFile(id, name)
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return session.Session{}, err
		}
		// Kept as a credential file (0600); its kind is only a label here.
		if err := f.Save(credential.KindAuthToken, secret.New(sv)); err != nil {
			return session.Session{}, err
		}
	}
	if own != nil {
		f := r.sessionCredFile(id)
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return session.Session{}, err
		}
		if err := f.Save(own.Kind, own.Secret); err != nil {
			return session.Session{}, err
		}
	}
	if err := r.save(&s); err != nil {
		return session.Session{}, err
	}
	if err := r.saveFirstStart(id, first); err != nil {
		r.fail(&s, "keep the session's setup for its first start: "+err.Error())
		return s, err
	}
	co := sandbox.CreateOptions{Session: id, Workspace: req.Workspace, WorkspaceUID: wsUID, UnsafeHostCode: req.UnsafeHostCode, Limits: r.limits()}
	if v := req.ClaudeVersion; v != "" && v != claudecode.PinnedVersion {
		if co, err = r.withClaudeVersion(ctx, co, be.Name(), v); err != nil {
			r.fail(&s, err.Error())
			return s, err
		}
		s.ClaudeVersion = v
	}
	began := time.Now()
	bx, err := be.Create(ctx, co)
	if err != nil {
		r.fail(&s, "create box: "+err.Error())
		return s, err
	}
	created := time.Since(began)
	s.BoxID = bx.ID
	if err := r.save(&s); err != nil {
		return s, err
	}
	r.log.Info("session created", logkey.Session, s.ID, "name", s.Name, "backend", s.Backend, "box", bx.ID)
	if req.NoStart {
		s.Desired = session.Asleep
		return s, r.save(&s)
	}
	if err := r.start(ctx, &s, be, began, created); err != nil {
		return s, err
	}
	return s, nil
}

// fail records a failure with its reason.
func (r *Runner) fail(s *session.Session, reason string) {
	s.Observed, s.Reason = session.Failed, reason
	_ = r.save(s)
	r.log.Warn("session failed", logkey.Session, s.ID, logkey.Reason, reason)
}

// start starts the box (if needed), links it and starts claude: the first
// time with --session-id, then with --resume.
//
// began is when the start began and created how long creating the box
// took (for a new session; 0 otherwise): s.LastStart counts both.
func (r *Runner) start(ctx context.Context, s *session.Session, be sandbox.Backend, began time.Time, created time.Duration) error {
	t := session.StartTimes{Began: began}
	lap := func(ms *float64) func() {
		t0 := time.Now()
		return func() { *ms = session.MS(time.Since(t0)) }
	}
	done := lap(&t.BoxMS)
	if _, err := be.Start(ctx, s.BoxID); err != nil {
		r.fail(s, "start box: "+err.Error())
		return err
	}
	done()
	if _, err := r.setPolicy(s); err != nil {
		r.fail(s, "egress policy: "+err.Error())
		return err
	}
	r.trackLimits(s)
	done = lap(&t.ChannelMS)
	link, err := r.linkSession(ctx, be, s)
	if err != nil {
		r.fail(s, "connect to box: "+err.Error())
		return err
	}
	done()
	// The self-test must pass before claude may start; reading Claude
	// Code's config, which needs no credential, goes on beside it.
	done = lap(&t.SelfTestMS)
	tested := make(chan error, 1)
	go func() { tested <- r.selfTest(ctx, link, s) }()
	read := readBoxConfig(link)
	if err := <-tested; err != nil {
		link.Close()
		r.fail(s, err.Error())
		_ = be.Stop(ctx, s.BoxID, sandbox.StopOptions{})
		return err
	}
	done()
	done = lap(&t.ClaudeMS)
	env, err := r.launchWith(ctx, s, link, read)
	if err != nil {
		link.Close()
		r.fail(s, "start claude: "+err.Error())
		return err
	}
	done()
	t.Launched = time.Now()
	t.BoxMS += session.MS(created)
	r.setLive(s.ID, &live{link: link, env: env})
	again := s.Started // claude ran in this session before: its conversation is resumed if on disk
	s.Started, s.Desired, s.Observed, s.Reason = true, session.Running, session.Running, ""
	s.LastStart = t
	r.log.Info("session running", logkey.Session, s.ID, "resume", again,
		"box_ms", t.BoxMS, "channel_ms", t.ChannelMS, "selftest_ms", t.SelfTestMS, "claude_ms", t.ClaudeMS)
	return r.save(s)
}

// credentialEnv picks what claude authenticates with: a fresh session
// token (proxy) or the owner's setup token (direct).
func (r *Runner) credentialEnv(s *session.Session) (varName, value string, err error) {
	cred, err := r.credentialOf(s.ID)
	if err != nil {
		return "", "", err
	}
	// An expired credential fails here, clearly, not as a stream of 401s.
	if err := cred.Usable(time.Now()); err != nil {
		return "", "", err
	}
	if s.CredentialMode == session.ModeDirect {
		// Checked at every start, not only at create: the person may have
		// removed their own credential since, leaving only a lent one.
		if owner := r.ownerOf(s.ID); r.lent(owner, cred) {
			return "", "", errLentDirect(owner)
		}
		if cred.Kind != credential.KindOAuth {
			return "", "", fmt.Errorf("direct mode needs an oauth setup token; the owner's credential is %s: %w", cred.Kind, errdefs.ErrInvalid)
		}
		return cred.Kind.EnvVar(), cred.Secret.Reveal(), nil
	}
	tok, err := r.tokens.Issue(s.ID, cred.Kind)
	if err != nil {
		return "", "", err
	}
	s.CredentialKind = string(cred.Kind)
	return cred.Kind.EnvVar(), tok.Reveal(), nil
}

// Claude Code's config directory and its two files, in every box.
var (
	boxConfigDir    = sandbox.HomeDir + "/" + claudecode.ConfigDirName
	boxClaudeJSON   = boxConfigDir + "/.claude.json"
	boxSettingsJSON = boxConfigDir + "/settings.json"
)

// boxConfig is what readBoxConfig read: both config files, NUL-separated.
type boxConfig struct {
	out string
	sep int // the last NUL
	err error
}

// readBoxConfig reads both of Claude Code's config files in one exec,
// NUL-separated (split at the last NUL: valid JSON holds none). It reads
// only regular files, and at most configMax+1 bytes of each, since the
// box writes them: a FIFO or a device there reads as no file and is
// replaced.
func readBoxConfig(link *Link) boxConfig {
	out, code, err := runIn(link.Client, []string{"PATH=/usr/bin:/bin"}, nil, "sh", "-c",
		`r() { if [ -f "$1" ]; then head -c `+strconv.Itoa(configMax+1)+` "$1" 2>/dev/null; fi; }; r "$1"; printf '\0'; r "$2"; true`,
		"sh", boxClaudeJSON, boxSettingsJSON)
	sep := strings.LastIndexByte(out, 0)
	if err != nil || code != 0 || sep < 0 {
		return boxConfig{err: fmt.Errorf("read Claude Code's config in the box: exit %d: %v", code, err)}
	}
	return boxConfig{out: out, sep: sep}
}

// launch seeds Claude Code's config and (re)starts tmux with claude.
func (r *Runner) launch(ctx context.Context, s *session.Session, link *Link) ([]string, error) {
	return r.launchWith(ctx, s, link, readBoxConfig(link))
}

// launchWith is launch with the config already read (start reads it
// beside the self-test).
func (r *Runner) launchWith(ctx context.Context, s *session.Session, link *Link, read boxConfig) ([]string, error) {
	if read.err != nil {
		return nil, read.err
	}
	varName, value, err := r.credentialEnv(s)
	if err != nil {
		return nil, err
	}
	cfgDir, claudeJSON, settingsJSON := boxConfigDir, boxClaudeJSON, boxSettingsJSON
	transcript := claudecode.TranscriptPath(sandbox.HomeDir, sandbox.WorkspaceDir, s.ClaudeSessionID)
	out, sep := read.out, read.sep
	// At the first start only: the creator's settings and MCP servers,
	// laid over what was read, so the seeding below (paddock's keys) wins.
	first := r.pendingFirstStart(s)
	out, sep = first.mergeConfig(out, sep)
	approve := ""
	if varName == credential.KindAPIKey.EnvVar() {
		approve = value
	}
	cj, cjKept, err := claudecode.SeedClaudeJSON([]byte(out[:sep]), sandbox.WorkspaceDir, approve)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", claudeJSON, err)
	}
	sj, sjKept, err := claudecode.SeedSettings([]byte(out[sep+1:]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", settingsJSON, err)
	}
	// What becomes of each file (the guest's put does it, or, with an
	// older guest, the start script): a file over configMax (Claude Code's
	// own .claude.json can grow to megabytes) is left as it is; one that
	// is not a JSON object (a box killed while Claude Code wrote it, or an
	// agent's doing) is kept aside as <name>.invalid; the seeded ones are
	// written (for the script, NUL-separated on stdin). Every path here is
	// under sandbox.HomeDir: no space in it.
	var aside, write []string
	var stdin []byte
	var seeded [][]byte
	for _, f := range []struct {
		path, read string
		seeded     []byte
		kept       bool
	}{{claudeJSON, out[:sep], cj, cjKept}, {settingsJSON, out[sep+1:], sj, sjKept}} {
		switch {
		case len(f.read) > configMax:
			r.log.Warn("Claude Code's config in the box is too large to seed; left as it is",
				logkey.Session, s.ID, "file", f.path, "limit_bytes", configMax)
			continue
		case !f.kept:
			r.log.Warn("Claude Code's config in the box was not a JSON object; kept aside as .invalid and written anew",
				logkey.Session, s.ID, "file", f.path)
			aside = append(aside, f.path)
		}
		write = append(write, f.path)
		seeded = append(seeded, f.seeded)
	}
	o := claudecode.LaunchOptions{Home: sandbox.HomeDir, CredentialVar: varName, Credential: value,
		SessionID: s.ClaudeSessionID, Model: s.Model, Effort: s.Effort} // the script turns --session-id into --resume
	if s.CredentialMode == session.ModeProxy {
		o.BaseURL = "http://" + BoxAPIAddr
	}
	// The plan of the owner's OAuth token, so the box's Claude Code picks
	// the model defaults of the owner's subscription.
	if varName == credential.KindOAuth.EnvVar() {
		if cred, err := r.credentialOf(s.ID); err == nil {
			o.Extra = append(o.Extra, cred.Plan.Env()...)
		}
	}
	{
		// Every box has the egress proxy in its environment, offline ones
		// too (it refuses everything there, and says so): a session's
		// egress can then change while claude runs, without a restart.
		p := "http://" + BoxEgressAddr
		o.Extra = append(o.Extra, "HTTPS_PROXY="+p, "HTTP_PROXY="+p, "https_proxy="+p, "http_proxy="+p,
			"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	}
	if r.direct(s) && r.opts.Config.Anthropic.UsageViewOn() {
		// /status usage is asked for only without the quiet switch; what
		// else the CLI then asks the API host for is refused on the direct
		// path, and other hosts follow the session's egress.
		o.NonessentialTraffic = true
	}
	if r.direct(s) {
		// The CA certificate (never its key), trusted for DirectHost alone.
		// The base URL counts as first party, so the CLI asks the API host
		// for what it asks it only then (remote managed settings); those
		// requests come to the Runner (DIRECT-REQUESTS.md).
		// Fast mode without its status request (which the quiet switch
		// blocks in the box anyway): the API itself refuses it to an
		// organization that does not allow it, and the CLI then turns it off.
		o.Extra = append(o.Extra, "NODE_EXTRA_CA_CERTS="+BoxCAFile, "_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL=1",
			"CLAUDE_CODE_SKIP_FAST_MODE_ORG_CHECK=1",
			// The owner's claude.ai connectors are not the agent's to list.
			"ENABLE_CLAUDEAI_MCP_SERVERS=false")
	}
	env := claudecode.Env(o)
	if err := first.write(link); err != nil { // the setup's files, ~/.gitconfig, the prompt
		return nil, err
	}
	// The guest writes the seeded files (and the CA certificate) itself,
	// after keeping aside the ones that were not JSON: no process in the
	// box for it. An older guest cannot: the start script does it below,
	// with `paddock guest put`.
	files := make([]channel.PutFile, 0, len(write)+1)
	for i, p := range write {
		files = append(files, channel.PutFile{Path: p, Data: seeded[i]})
	}
	if r.direct(s) {
		files = append(files, channel.PutFile{Path: BoxCAFile, Data: r.ca.PEM})
	}
	switch err := link.Client.Put(files, aside, time.Now().Add(runTimeout)); {
	case errors.Is(err, channel.ErrUnknownType):
		stdin = bytes.Join(seeded, []byte{0}) // for the script's `paddock guest put`
		if r.direct(s) {
			env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir}
			if out, code, err := runIn(link.Client, env, r.ca.PEM, "sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "sh", BoxCAFile); err != nil || code != 0 {
				return nil, fmt.Errorf("give the box the Runner's CA certificate: exit %d: %s %v", code, strings.TrimSpace(out), err)
			}
		}
	case err != nil:
		return nil, fmt.Errorf("write Claude Code's config in the box: %w", err)
	default:
		aside, write = nil, nil
	}

	// A second exec writes both files atomically, replaces any running tmux
	// whole (its server holds the old environment) and starts claude. The
	// files come on stdin, NUL-separated; the credential only ever travels
	// in this process's environment, which tmux keeps in memory.
	//
	// Only then, with any earlier claude gone, does it look at the
	// transcript: a conversation with a user message in it is resumed
	// (--session-id becomes --resume; claude refuses to start again with
	// the id of an existing conversation). One without — what a box killed
	// before claude wrote one leaves — cannot be resumed and would block
	// --session-id: it is kept aside, and the conversation starts anew.
	argv := append([]string{"tmux", "-L", TmuxSocket, "-f", "/dev/null",
		"start-server", ";",
		"set-option", "-g", "remain-on-exit", "on", ";",
		"set-option", "-g", "status", "off", ";",
		"set-option", "-g", "history-limit", "50000", ";",
		"set-option", "-g", "focus-events", "on", ";",
		// claude's end, reported to the guest; the Runner then asks tmux how (activity.go)
		"set-hook", "-g", "pane-died", "run-shell -b 'paddock guest hook pane-died'", ";",
		"new-session", "-d", "-s", TmuxSession, "-x", "200", "-y", "50", "-c", sandbox.WorkspaceDir, "--"},
		exitWrap(first.claudeArgv(claudecode.Args(o)))...)
	// Each external command here is a process in the box (2–3 ms on a
	// small VM): the builtin tests skip those with nothing to do.
	tmuxSock := fmt.Sprintf("/tmp/tmux-%d/%s", sandbox.BoxUID, TmuxSocket)
	script := `set -e
cfg=$1 tx=$2 aside=$3 write=$4; shift 4
[ -d "$cfg" ] && [ -d "$CLAUDE_CODE_TMPDIR" ] || mkdir -p "$cfg" "$CLAUDE_CODE_TMPDIR"
for f in $aside; do mv -f "$f" "$f.invalid" || true; done
if [ -n "$write" ]; then paddock guest put $write; fi  # stdin: those files, NUL-separated
# An old server (set, re-adoption) goes first, and fully: a client that
# reaches a server in its shutdown fails with "server exited unexpectedly";
# and its claude, which may write the transcript as it exits, goes too.
old_claude() {  # a process other than this shell with claude's flag in its argv
  for p in /proc/[0-9]*; do
    [ "$p" != /proc/$$ ] && grep -qsxzF -e --dangerously-skip-permissions "$p/cmdline" && return 0
  done
  return 1
}
if [ -S ` + tmuxSock + ` ] && tmux -L ` + TmuxSocket + ` kill-server 2>/dev/null; then
  i=0; while { tmux -L ` + TmuxSocket + ` has-session 2>/dev/null || old_claude; } && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done
  sleep 0.05
fi
[ ! -e ` + claudeExitFile + ` ] || rm -f ` + claudeExitFile + `  # the last claude's end, if any: not this one's
if [ -e "$tx" ]; then
  if grep -qs '"type":"user"' "$tx"; then
    for a do shift; [ "$a" = --session-id ] && a=--resume; set -- "$@" "$a"; done
  else
    mv -f "$tx" "$tx.unresumable"
  fi
fi
exec "$@"`
	if out, code, err := runIn(link.Client, env, stdin, "sh", append([]string{"-c", script, "sh", cfgDir, transcript, strings.Join(aside, " "), strings.Join(write, " ")}, argv...)...); err != nil || code != 0 {
		return nil, fmt.Errorf("start claude in tmux: exit %d: %s %v", code, strings.TrimSpace(out), err)
	}
	if first != nil {
		if err := r.dropFirstStart(s.ID); err != nil {
			r.log.Warn("could not remove the session's first-start setup", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	r.claudeStarted(s) // activity: starting, until its SessionStart hook (activity.go)
	return env, nil
}

// selfTest has the box's guest run the egress self-test before claude
// starts, in its own process: the session fails, with the failed checks as
// its reason, if the posture leaks. An older guest, which cannot, runs
// `paddock guest selftest` as a process instead. A box on a pod network
// (Capabilities.PodNetwork) proves instead that its interface reaches
// nothing, in a process.
func (r *Runner) selfTest(ctx context.Context, link *Link, s *session.Session) error {
	args := []string{"guest", "selftest", "--proxy", BoxEgressAddr}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return err
	}
	pod := be.Capabilities(ctx).PodNetwork
	var out string
	code := 0
	if !pod {
		out, err = link.Client.SelfTest(BoxEgressAddr, time.Now().Add(runTimeout))
		if err == nil && !guest.Passed(out) {
			code = 1
		}
	}
	if pod || errors.Is(err, channel.ErrUnknownType) {
		if pod {
			args = append(args, "--pod-network")
		}
		out, code, err = runIn(link.Client, []string{"PATH=/opt/paddock/bin:/usr/local/bin:/usr/bin:/bin"}, nil, "paddock", args...)
	}
	if err != nil {
		return fmt.Errorf("egress self-test: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("egress self-test failed in the box, claude not started: %s", guest.Failed(out))
	}
	return nil
}

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

// configMax is the largest Claude Code config file in a box that launch
// reads and seeds (two of them fit in runMaxOutput).
const configMax = 16 << 20

// runIn runs a command in the box and returns its combined output. Past
// runTimeout, or past runMaxOutput bytes of output, the process's stream is
// aborted (the guest kills the process group; nothing more is read) and
// runIn fails.
func runIn(cl *channel.Client, env []string, stdin []byte, argv0 string, args ...string) (string, int, error) {
	return runInLimits(cl, runTimeout, runMaxOutput, env, stdin, argv0, args...)
}

func runInLimits(cl *channel.Client, timeout time.Duration, maxOut int, env []string, stdin []byte, argv0 string, args ...string) (string, int, error) {
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
		if _, err := p.Write(stdin); err != nil {
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

// lockSession is how every operation on one session begins: wait for the
// start-up re-adoption, resolve ref, take the session's lock, read the
// record again under it, and check op against the state (the one guard).
// The caller runs unlock when done.
func (r *Runner) lockSession(ctx context.Context, ref string, op session.Op) (session.Session, func(), error) {
	if err := r.waitAdopted(ctx); err != nil {
		return session.Session{}, nil, err
	}
	s, err := r.Session(ctx, ref)
	if err != nil {
		return s, nil, err
	}
	unlock := r.sessionLock(s.ID)
	if s, err = r.reload(s.ID); err != nil {
		unlock()
		return s, nil, err
	}
	if err := session.Check(op, s.Name, s.Observed); err != nil {
		unlock()
		return s, nil, err
	}
	return s, unlock, nil
}

// sessionCredFile is where a session's own credential is kept (0600).
func (r *Runner) sessionCredFile(id string) credential.File {
	return credential.File{Path: filepath.Join(r.opts.StateDir, "session-credentials", id+".json")}
}

// withClaudeVersion sets up a box to run Claude Code v instead of the pin:
// the npm package installed (and verified) under the state directory for
// local boxes, the matching image for docker ones.
func (r *Runner) withClaudeVersion(ctx context.Context, co sandbox.CreateOptions, backend, v string) (sandbox.CreateOptions, error) {
	if _, err := (&image.Spec{Base: "sha256:" + strings.Repeat("0", 64), ClaudeVersion: v}).CheckVersion(); err != nil {
		return co, err
	}
	switch backend {
	case "docker":
		co.Image = "paddock/box:claude-" + v
	default:
		bin, err := claudecode.Install(ctx, claudecode.Dir(r.opts.StateDir, v), v)
		if err != nil {
			return co, fmt.Errorf("install Claude Code %s: %w", v, err)
		}
		co.ClaudeBinary = bin
	}
	return co, nil
}

// relaySecretFile is where a session's secret for a relay is kept (0600).
func (r *Runner) relaySecretFile(id, relay string) credential.File {
	return credential.File{Path: filepath.Join(r.opts.StateDir, "session-credentials", id+".relay-"+relay+".json")}
}

// credentialOf is the credential a session's requests go out with: its
// own, if its creator gave one, else its owner's (credentialOfPerson).
func (r *Runner) credentialOf(id string) (credential.Credential, error) {
	owner := r.ownerOf(id)
	// Most sessions have no credential of their own: that is remembered,
	// not looked for on every request (the file is written only when the
	// session is made, before its first request).
	if _, none := r.noOwnCred.Load(id); !none {
		c, err := r.sessionCredFile(id).Load()
		if err == nil {
			c.Source, c.User = "session", owner.Name
			return c, nil
		}
		if !errors.Is(err, credential.ErrMissing) {
			return credential.Credential{}, err
		}
		r.noOwnCred.Store(id, true)
	}
	return r.credentialOfPerson(owner)
}

// trackLimits gives the proxy the session's limits, with the tokens it
// has used so far read back from its decision log (rotated-away parts
// included, through their carry).
func (r *Runner) trackLimits(s *session.Session) {
	var used int64
	var spent float64
	if l, err := r.decisions.ReadLog(s.ID); err == nil {
		used, spent = l.Tokens(), r.spentOf(&l)
	} else {
		r.log.Error("read back the tokens a session used; its budget counts from 0", logkey.Session, s.ID, logkey.Error, err)
	}
	r.usage.Set(s.ID, s.Limits, used)
	r.usage.SetSpent(s.ID, spent)
}

// detach cuts a session's live side in the Runner: its token is revoked
// (refused from now on), its egress policy dropped, its channel closed.
func (r *Runner) detach(id string) error {
	if err := r.tokens.Revoke(id); err != nil {
		return err
	}
	r.tokens.Resume(id) // a frozen session's suspension ends with its token
	r.dropPolicy(id)
	r.setLive(id, nil)
	return nil
}

// lockAndDetach locks the session for op, cuts its live side (detach) and
// opens its backend: the common start of sleeping and removing. On error
// nothing stays locked.
func (r *Runner) lockAndDetach(ctx context.Context, ref string, op session.Op) (session.Session, sandbox.Backend, func(), error) {
	s, locked, err := r.lockSession(ctx, ref, op)
	if err != nil {
		return s, nil, nil, err
	}
	// From the detach on, the session says what is ending it (Ending),
	// until the operation is over.
	r.ending.Store(s.ID, op)
	unlock := func() {
		r.ending.Delete(s.ID)
		locked()
	}
	if err := r.detach(s.ID); err != nil {
		unlock()
		return s, nil, nil, err
	}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		unlock()
		return s, nil, nil, err
	}
	return s, be, unlock, nil
}

// thawToEnd thaws a frozen session's box that is about to be stopped or
// removed: a frozen box ends like any other, its guest seeing SIGTERM. The
// thaw is on record at once, so that if the stop or removal then fails the
// session reads as what it is, running (its token already revoked), as
// any session whose sleep failed: not frozen, which a wake would "thaw"
// without a token.
func (r *Runner) thawToEnd(ctx context.Context, be sandbox.Backend, s *session.Session) error {
	fz, ok := be.(sandbox.Freezer)
	if !ok || !s.Frozen || s.BoxID == "" {
		return nil
	}
	if err := fz.Thaw(ctx, s.BoxID); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) && !errdefs.Is(err, errdefs.ErrConflict) {
		return err
	}
	s.Frozen, s.FrozenAt = false, time.Time{}
	return r.save(s)
}

// Sleep revokes the session's token and stops its box; the volume keeps
// the conversation.
func (r *Runner) Sleep(ctx context.Context, ref string) (session.Session, error) {
	return r.sleepWithReason(ctx, ref, "")
}

// sleepWithReason is Sleep, recording why (the automatic policy's).
func (r *Runner) sleepWithReason(ctx context.Context, ref, reason string) (session.Session, error) {
	s, be, unlock, err := r.lockAndDetach(ctx, ref, session.OpSleep)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.thawToEnd(ctx, be, &s); err != nil {
		return s, err
	}
	if s.BoxID != "" {
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			return s, err
		}
	}
	s.Desired, s.Observed, s.Reason = session.Asleep, session.Asleep, reason
	s.Frozen, s.FrozenAt = false, time.Time{}
	r.decisions.Release(s.ID) // an asleep session holds no descriptor either
	r.log.Info("session asleep", logkey.Session, s.ID, logkey.Reason, cmp.Or(reason, "asked"))
	return s, r.save(&s)
}

func (r *Runner) reload(id string) (session.Session, error) {
	b, err := r.store.Get(store.BucketSessions, id)
	if err != nil {
		return session.Session{}, err
	}
	var s session.Session
	if err := json.Unmarshal(b, &s); err != nil {
		return s, err
	}
	r.fillOwner(&s)
	return s, nil
}

// Wake starts an asleep (or failed, or never started) session: a new
// token, and claude --resume.
func (r *Runner) Wake(ctx context.Context, ref string) (session.Session, error) {
	if cur, err := r.Session(ctx, ref); err == nil && cur.Frozen && cur.Desired != session.Removed {
		// The freeze tier: the same processes, where they were.
		if err := r.thawIfFrozen(ctx, cur.ID); err != nil {
			return cur, err
		}
		if s, err := r.Session(ctx, cur.ID); err != nil || s.Observed == session.Running {
			return s, err
		}
		// Slept or removed before the thaw had the lock: woken (or
		// refused) below as it is now.
		ref = cur.ID
	}
	if s, ok, err := r.wakeExited(ctx, ref); ok { // claude exited in a running box (activity.go)
		return s, err
	}
	s, unlock, err := r.lockSession(ctx, ref, session.OpWake)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.checkMaxSessions(ctx, s.Owner, s.ID); err != nil {
		return s, err
	}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return s, err
	}
	// A failed session may have lost its box: make a new one on the same volume.
	if _, err := be.Inspect(ctx, s.BoxID); errdefs.Is(err, errdefs.ErrNotFound) || s.BoxID == "" {
		co := sandbox.CreateOptions{Session: s.ID, Workspace: s.Workspace, WorkspaceUID: s.WorkspaceUID, UnsafeHostCode: s.UnsafeHostCode, Limits: r.limits()}
		if s.ClaudeVersion != "" {
			if co, err = r.withClaudeVersion(ctx, co, be.Name(), s.ClaudeVersion); err != nil {
				r.fail(&s, err.Error())
				return s, err
			}
		}
		bx, err := be.Create(ctx, co)
		if err != nil {
			r.fail(&s, "re-create box: "+err.Error())
			return s, err
		}
		s.BoxID = bx.ID
	}
	return s, r.start(ctx, &s, be, time.Now(), 0)
}

// RemoveSession stops and deletes the box and, unless keepVolume (which is
// recorded), the volume.
func (r *Runner) RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error) {
	s, be, unlock, err := r.lockAndDetach(ctx, ref, session.OpRemove)
	if err != nil {
		return s, err
	}
	defer unlock()
	if err := r.thawToEnd(ctx, be, &s); err != nil {
		// The removal ends the box's processes frozen or not.
		r.log.Warn("remove: could not thaw the box first; removing it frozen", logkey.Session, s.ID, logkey.Error, err)
	}
	if s.BoxID != "" {
		if err := be.Remove(ctx, s.BoxID, sandbox.RemoveOptions{KeepVolume: keepVolume}); err != nil {
			return s, err
		}
	}
	if !keepVolume {
		// A box removed earlier (failed session) may have left the volume.
		if err := r.removeSessionObjects(ctx, be, s.ID, false); err != nil {
			return s, err
		}
	}
	r.noOwnCred.Delete(s.ID)
	if err := r.sessionCredFile(s.ID).Remove(); err != nil {
		return s, err
	}
	if err := r.dropFirstStart(s.ID); err != nil {
		return s, err
	}
	for _, rl := range r.opts.Config.Relays {
		if err := r.relaySecretFile(s.ID, rl.Name).Remove(); err != nil {
			return s, err
		}
	}
	s.Desired, s.Observed, s.Reason, s.KeepVolume = session.Removed, session.Removed, "", keepVolume
	// No longer frozen: else a wake would try to thaw the box that is gone.
	s.Frozen, s.FrozenAt = false, time.Time{}
	r.decisions.Release(s.ID) // its log stays readable; its descriptor goes
	r.log.Info("session removed", logkey.Session, s.ID, "keep_volume", keepVolume)
	return s, r.save(&s)
}

// removeSessionObjects removes the backend's objects of one session;
// volumes only when withVolumes.
func (r *Runner) removeSessionObjects(ctx context.Context, be sandbox.Backend, id string, keepVolumes bool) error {
	objs, err := be.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if o.Session != id || o.Kind == sandbox.KindVolume && keepVolumes {
			continue
		}
		if err := be.RemoveObject(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Set changes the model or effort and, if the session runs, restarts
// claude with --resume and the new choice.
func (r *Runner) Set(ctx context.Context, ref string, req api.SetRequest) (session.Session, error) {
	s, unlock, err := r.lockSession(ctx, ref, session.OpSet)
	if err != nil {
		return s, err
	}
	defer unlock()
	if req.Model != nil {
		if err := session.ValidModel(*req.Model); err != nil {
			return s, err
		}
		s.Model = *req.Model
	}
	if req.Effort != nil {
		if err := session.ValidEffort(*req.Effort); err != nil {
			return s, err
		}
		s.Effort = *req.Effort
	}
	egressWas := s
	egressChanged, err := r.applyEgressSet(&s, req)
	if err != nil {
		return s, err
	}
	if egressChanged {
		if err := r.save(&s); err != nil {
			return s, err
		}
		cut, err := r.setPolicy(&s)
		if err != nil {
			return s, err
		}
		r.egressChanged(s, r.caller(ctx).Name, "egress "+egressWas.EgressSummary()+" → "+s.EgressSummary(), cut)
		if req.Model == nil && req.Effort == nil && req.TokenBudget == nil && req.BudgetUSD == nil {
			return s, nil // claude keeps running: its egress proxy applies the change
		}
	}
	if req.BudgetUSD != nil {
		if s.Limits.BudgetUSD, err = budgetUSD(0, *req.BudgetUSD); err != nil {
			return s, err
		}
		r.usage.Set(s.ID, s.Limits, -1) // at once, keeping what was spent
		if req.Model == nil && req.Effort == nil && req.TokenBudget == nil {
			return s, r.save(&s) // no need to restart claude for a budget
		}
	}
	if req.TokenBudget != nil {
		if *req.TokenBudget < 0 {
			return s, fmt.Errorf("budget %d: must be 0 (none) or more: %w", *req.TokenBudget, errdefs.ErrInvalid)
		}
		s.Limits.TokenBudget = *req.TokenBudget
		r.usage.Set(s.ID, s.Limits, -1) // at once, keeping what was used
		if req.Model == nil && req.Effort == nil {
			return s, r.save(&s) // no need to restart claude for a budget
		}
	}
	if s.Observed == session.Running {
		if s.Frozen { // a new claude needs its box thawed
			if err := r.thaw(ctx, &s); err != nil {
				return s, err
			}
		}
		lv := r.getLive(s.ID)
		if lv == nil {
			return s, fmt.Errorf("session %q runs but the Runner has no channel to it yet: %w", s.Name, errdefs.ErrUnavailable)
		}
		env, err := r.launch(ctx, &s, lv.link)
		if err != nil {
			return s, err
		}
		r.setLive(s.ID, &live{link: lv.link, env: env})
	}
	return s, r.save(&s)
}

// Prune removes every labelled object that no live session owns: boxes,
// processes and networks always; volumes unless a removed session kept
// them on purpose (then only with volumes=true).
func (r *Runner) Prune(ctx context.Context, volumes bool) (api.PruneResult, error) {
	if err := r.waitAdopted(ctx); err != nil {
		return api.PruneResult{}, err
	}
	all, err := r.Sessions(ctx)
	if err != nil {
		return api.PruneResult{}, err
	}
	owner := map[string]session.Session{}
	for _, s := range all {
		owner[s.ID] = s
	}
	var res api.PruneResult
	var errs []error
	for _, name := range []string{"local", "docker", "kubernetes"} {
		be, err := r.pruneBackend(ctx, name)
		if err != nil {
			continue // a backend this host cannot run has nothing to prune
		}
		objs, err := be.List(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			s, known := owner[o.Session]
			if known && s.Live() {
				continue
			}
			if o.Kind == sandbox.KindVolume && known && s.KeepVolume && !volumes {
				continue
			}
			if err := be.RemoveObject(ctx, o); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Removed = append(res.Removed, o)
		}
	}
	return res, errors.Join(errs...)
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

// reconcile runs at start: it compares every live session with what its
// backend reports. Running boxes are re-adopted: the channel is opened
// again and, since token hashes survive in the store, claude keeps running
// with its token; if the token is gone, a new one is issued and claude is
// restarted with --resume. Boxes that stopped are marked asleep, missing
// ones failed, each with the reason.
func (r *Runner) reconcile(ctx context.Context) {
	all, err := r.Sessions(ctx)
	if err != nil {
		r.log.Error("reconcile: list sessions", logkey.Error, err)
		return
	}
	for _, s := range all {
		if !s.Live() || s.Observed == session.Created && s.BoxID == "" {
			continue
		}
		s := s
		func() {
			unlock := r.sessionLock(s.ID)
			defer unlock()
			r.reconcileOne(ctx, &s)
		}()
	}
}

// adoptWait bounds the re-adoption of one session at the Runner's start.
const adoptWait = 2 * time.Minute

func (r *Runner) reconcileOne(ctx context.Context, s *session.Session) {
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		r.fail(s, "backend unavailable after restart: "+err.Error())
		return
	}
	// Every session waits for the reconcile loop: one box must not hold it
	// (each step below has its own bound too: Connect, runIn). The backend
	// above is the Runner's, not the box's: it may install Claude Code.
	ctx, cancel := context.WithTimeout(ctx, adoptWait)
	defer cancel()
	bx, err := be.Inspect(ctx, s.BoxID)
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		_ = r.tokens.Revoke(s.ID)
		r.fail(s, "its box disappeared while the Runner was down; paddock wake makes a new one on the same volume")
		return
	case err != nil:
		r.fail(s, "inspect box after restart: "+err.Error())
		return
	}
	if bx.State != sandbox.StateRunning {
		_ = r.tokens.Revoke(s.ID)
		// As in watchLink: release what the stopped box still holds (its
		// workspace view and placeholders), as a stop would have.
		if bx.State == sandbox.StateStopped && s.Workspace != "" {
			if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
				r.log.Warn("stopped box: release what it held", logkey.Session, s.ID, logkey.Error, err)
			}
		}
		if s.Observed == session.Running {
			s.Observed, s.Reason = session.Asleep, "its box stopped while the Runner was down; paddock wake resumes it"
			s.Frozen, s.FrozenAt = false, time.Time{}
			_ = r.save(s)
		}
		return
	}
	if s.Desired == session.Asleep {
		// An asleep session's box runs only while paddock reads its volume
		// (session export); a restart cut that short. It stays asleep.
		if err := be.Stop(ctx, s.BoxID, sandbox.StopOptions{Timeout: time.Second}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			r.log.Warn("stop the running box of an asleep session", logkey.Session, s.ID, logkey.Error, err)
		}
		r.log.Info("the box of an asleep session was running (an export cut short); stopped it", logkey.Session, s.ID)
		return
	}
	if s.Frozen {
		// Still frozen: its token stays suspended, its channel closed,
		// until a wake or an attach thaws it.
		r.tokens.Suspend(s.ID)
		r.log.Info("session still frozen", logkey.Session, s.ID)
		return
	}
	// Running: re-adopt.
	if _, err := r.setPolicy(s); err != nil {
		r.fail(s, "egress policy: "+err.Error())
		return
	}
	r.trackLimits(s)
	link, err := r.linkSession(ctx, be, s)
	if err != nil {
		r.fail(s, "re-adopt: "+err.Error())
		return
	}
	env, err := readTmuxEnv(link.Client)
	if err != nil || !r.tokens.Live(s.ID) && s.CredentialMode == session.ModeProxy {
		// Without the old environment or token: new token, claude --resume.
		if env, err = r.launch(ctx, s, link); err != nil {
			link.Close()
			r.fail(s, "restart claude after re-adoption: "+err.Error())
			return
		}
	}
	r.setLive(s.ID, &live{link: link, env: env})
	s.Observed, s.Reason = session.Running, ""
	_ = r.save(s)
	r.log.Info("session re-adopted", logkey.Session, s.ID)
}

// readTmuxEnv reads claude's environment back from the tmux server's
// global environment (the Runner keeps no token in its store).
func readTmuxEnv(cl *channel.Client) ([]string, error) {
	out, code, err := runIn(cl, []string{"PATH=/usr/bin:/bin"}, nil, "tmux", "-L", TmuxSocket, "show-environment", "-g")
	if err != nil || code != 0 {
		return nil, fmt.Errorf("tmux show-environment: exit %d: %v", code, err)
	}
	var env []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "-") || !strings.Contains(l, "=") {
			continue
		}
		env = append(env, l)
	}
	if len(env) == 0 {
		return nil, errors.New("tmux has no environment")
	}
	return env, nil
}
