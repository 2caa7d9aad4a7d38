package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/activity"
	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/image"
	"github.com/paddockhq/paddock/internal/limits"
	"github.com/paddockhq/paddock/internal/logkey"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/session"
)

// ErrCoMount is wrapped when a direct-mode session asks for a host
// workspace: a box that holds the owner's real credential must not see the
// owner's files, or the agent could hand the credential to a file the owner
// later runs. Split the work into two boxes: a proxy-mode box on the
// workspace, a direct-mode box without it.
var ErrCoMount = fmt.Errorf("a direct-mode box never mounts a host workspace (the real credential and your files would share one box); use a proxy-mode session for the workspace, or a direct-mode one without --workspace: %w", errdefs.ErrForbidden)

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
