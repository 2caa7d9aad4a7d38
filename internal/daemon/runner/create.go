package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
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
// and, unless NoStart, starts claude in it. It looks up what the checks
// need (gatherCreateFacts), decides without I/O (planCreate, createplan.go),
// then makes the backend, which only an admitted request gets to do
// (making one may install Claude Code), checks it, and acts (create).
func (r *Runner) CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error) {
	if req.Resume != nil { // a host conversation to resume (portable.go)
		return r.createResumed(ctx, req)
	}
	if req.Name == "" {
		req.Name = session.NewName()
	}
	p, err := planCreate(req, r.gatherCreateFacts(ctx, req))
	if err != nil {
		return session.Session{}, err
	}
	for _, w := range p.dropped { // names only, never a value
		r.log.Warn("claude setup: dropped from the request", "item", w.Item, logkey.Reason, w.Reason)
	}
	be, err := r.backend(ctx, p.backend)
	if err != nil {
		return session.Session{}, err
	}
	if err := p.checkBackend(be.Capabilities(ctx)); err != nil {
		return session.Session{}, err
	}
	if p.clone != nil { // the base, as the repository has it now (clone.go)
		if err := wsmount.CheckOrigin(p.workspace); err != nil {
			return session.Session{}, err
		}
		if p.clone.Base, err = resolveBase(ctx, p.workspace, p.clone.From); err != nil {
			return session.Session{}, err
		}
	}
	if p.image, err = r.ensureProjectImage(ctx, &p, be.Name()); err != nil {
		return session.Session{}, err
	}
	return r.create(ctx, p, be)
}

// create makes the session p plans on be: its record and secrets, what
// waits for its first start, its box and, unless p.noStart, claude
// started in it. A failure once the record is saved leaves the session
// failed, with its reason.
func (r *Runner) create(ctx context.Context, p createPlan, be sandbox.Backend) (session.Session, error) {
	id, err := session.NewID()
	if err != nil {
		return session.Session{}, err
	}
	uuid, err := session.NewUUID()
	if err != nil {
		return session.Session{}, err
	}
	now := time.Now().UTC()
	s := session.Session{ID: id, Name: p.name, Backend: be.Name(), Desired: session.Running, Observed: session.Created,
		CredentialMode: p.mode, CredentialKind: string(p.cred.Kind), Egress: p.egress, EgressAllow: p.allow, EgressDeny: p.deny, EgressPolicies: p.policies, EgressAsk: p.ask, Workspace: p.workspace, WorkspaceUID: p.workspaceUID, UnsafeHostCode: p.unsafeHostCode,
		Clone: p.clone, Model: p.model, Effort: p.effort, ClaudeSessionID: uuid, Created: now, Limits: p.limits, Owner: p.owner}
	s.Restart = p.restart
	s.Runtime = p.runtime
	s.PushRefs = p.pushRefs
	s.Env, s.Ports, s.Project = p.env, p.ports, p.project
	if p.image != "" {
		s.Project.Image = p.image
	}
	placeholders := map[string]string{} // one per secret: the box's tools hold one token per host
	for _, g := range p.services {
		if placeholders[g.Secret] == "" {
			if placeholders[g.Secret], err = service.NewPlaceholder(g.Secret); err != nil {
				return session.Session{}, err
			}
		}
		g.Placeholder = placeholders[g.Secret]
		s.Services = append(s.Services, g)
	}
	unlock := r.sessionLock(id)
	defer func() { unlock() }()
	for name, sv := range p.relaySecrets {
		// Kept as a credential file (0600); its kind is only a label here.
		if err := saveCredentialFile(r.relaySecretFile(id, name), credential.KindAuthToken, sv); err != nil {
			return session.Session{}, err
		}
	}
	if p.own != nil {
		if err := saveCredentialFile(r.sessionCredFile(id), p.own.Kind, p.own.Secret); err != nil {
			return session.Session{}, err
		}
	}
	if err := r.save(&s); err != nil {
		return session.Session{}, err
	}
	if err := r.saveFirstStart(id, p.first); err != nil {
		r.fail(&s, "keep the session's setup for its first start: "+err.Error())
		return s, err
	}
	co := sandbox.CreateOptions{Session: id, Workspace: p.workspace, WorkspaceUID: p.workspaceUID, UnsafeHostCode: p.unsafeHostCode,
		Clone: p.clone != nil, Limits: r.limits(), Runtime: p.runtime}
	if v := p.claudeVersion; v != "" && v != claudecode.PinnedVersion {
		if co, err = r.withClaudeVersion(ctx, co, be.Name(), v); err != nil {
			r.fail(&s, err.Error())
			return s, err
		}
		s.ClaudeVersion = v
	}
	if p.image != "" {
		co.Image = p.image
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
	if p.noStart {
		s.Desired = session.Asleep
		return s, r.save(&s)
	}
	if err := r.start(ctx, &s, be, began, created); err != nil {
		var se *setupError
		if errors.As(err, &se) {
			// Nothing of a session whose setup failed is kept: its box
			// and record go (the output is in the error).
			unlock()
			unlock = func() {}
			if _, rerr := r.RemoveSession(context.WithoutCancel(ctx), s.ID, false); rerr != nil {
				r.log.Error("remove the session whose setup failed", logkey.Session, s.ID, logkey.Error, rerr)
			}
		}
		return s, err
	}
	return s, nil
}

// saveCredentialFile keeps v in f (0600), its directory made (0700).
func saveCredentialFile(f credential.File, kind credential.Kind, v secret.Value) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return err
	}
	return f.Save(kind, v)
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
