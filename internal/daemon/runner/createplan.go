package runner

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/claudesetup"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/project"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// A create is decided before anything of the session is made: the
// Runner looks up what the checks need (gatherCreateFacts), planCreate checks
// the request against that without I/O and returns a createPlan or the
// refusal, and CreateSession then acts on the plan. A refusal is an
// error classed with errdefs (ErrInvalid, ErrForbidden, ErrNotFound,
// ErrConflict, ErrLimit) whose words say what to do next; people and
// tests read them, so they do not change.

// createFacts is what planCreate needs beyond the request: the Runner's
// config and what was looked up for the request. A look-up that failed
// keeps its error here; planCreate returns it where the check that needs
// it stands, so a request refused on its own fields is refused for those
// first.
type createFacts struct {
	cfg *config.Config
	now time.Time
	// caller is who asks, the session's owner; admin, whether they pay
	// with the owner's credential (Runner.usesOwnersCredential).
	caller session.Person
	admin  bool
	// workspace is the request's workspace made absolute, workspaceUID
	// its owner's uid now; workspaceErr says why it cannot be bound
	// (wsmount.Check). Unset for a request without one.
	workspace    string
	workspaceUID int
	workspaceErr error
	// workspaceGit says the workspace holds a git repository (a .git
	// directory): sessions.clone makes such a session a clone.
	workspaceGit bool
	// cred is what the caller's sessions go out with
	// (Runner.credentialOfPerson), looked up only for a request that
	// brings no credential of its own; lent, whether it is the owner's,
	// lent to the caller (Runner.lent).
	cred    credential.Credential
	credErr error
	lent    bool
	// sessions is every session of the Runner (the names taken, the
	// caller's running ones), or sessionsErr why they could not be read.
	sessions    []session.Session
	sessionsErr error
	// secrets are the caller's stored service credentials (their names
	// and kinds are what the plan needs), read only for a request that
	// grants some.
	secrets    []service.Secret
	secretsErr error
	// project is the workspace's project file (nil: none, or
	// --no-project), projectDecision its owner's acceptance of it, and
	// projectErr why it cannot be read or checked.
	project         *project.File
	projectDecision project.Decision
	projectErr      error
}

// gatherCreateFacts looks up what planCreate needs for req. The backend
// is not among them: CreateSession makes it only for a request the plan
// admits, since making one may install Claude Code or dial a daemon.
func (r *Runner) gatherCreateFacts(ctx context.Context, req api.CreateRequest) createFacts {
	f := createFacts{cfg: &r.opts.Config, now: time.Now(), caller: r.caller(ctx)}
	f.admin = r.usesOwnersCredential(f.caller)
	if req.Workspace != "" {
		f.workspace, f.workspaceErr = filepath.Abs(req.Workspace)
		if f.workspaceErr == nil {
			// Every reason a workspace cannot be bound, said now, with the
			// next step, before anything of the session is made.
			var own wsmount.Owner
			_, own, f.workspaceErr = wsmount.Check(f.workspace)
			f.workspaceUID = own.UID
			fi, err := os.Lstat(filepath.Join(f.workspace, ".git"))
			f.workspaceGit = err == nil && fi.IsDir()
			if f.workspaceErr == nil {
				f.project, f.projectDecision, f.projectErr = r.loadProject(req, f.workspace)
			}
		}
	}
	if req.Credential.Reveal() == "" {
		f.cred, f.credErr = r.credentialOfPerson(f.caller)
		f.lent = f.credErr == nil && r.lent(f.caller, f.cred)
	}
	f.sessions, f.sessionsErr = r.Sessions(ctx)
	if len(req.Secrets) > 0 || len(req.SecretSets) > 0 {
		f.secrets, f.secretsErr = r.secretsStore(f.caller.UID).List()
	}
	return f
}

// createPlan is a create request checked, each choice made: what
// CreateSession's actions need, nothing they must check again.
type createPlan struct {
	name    string
	backend string // as asked, else sessions.backend
	mode    session.CredentialMode
	// The egress posture and its rules; policies is the one policy the
	// request attached by name (read from the config at every start).
	egress                string
	allow, deny, policies []string
	ask                   bool
	workspace             string // absolute; "" for none
	workspaceUID          int    // the workspace's owner now, kept for every later mount
	unsafeHostCode        bool
	// clone: the session works in a clone of the workspace's repository
	// (session.Clone; its Base is resolved when the session is made).
	clone         *session.Clone
	model, effort string
	restart       activity.Policy
	limits        limits.Limits
	claudeVersion string // "" or the pin: the pinned one
	// runtime is the runtime word asked for (or the config's for the
	// backend); checkBackend turns it into the engine's name.
	runtime string
	noStart bool
	// first waits for the session's first start (nil: nothing); dropped
	// names what of the request's Claude setup was left out, for the log.
	first   *firstStart
	dropped []claudesetup.Warning
	owner   session.Person
	// own is the credential the request brought, kept for the session
	// alone (nil: none); cred is what the session goes out with, own or
	// its owner's.
	own  *credential.Credential
	cred credential.Credential
	// relaySecrets are the request's secrets for the config's relays,
	// trimmed, by relay.
	relaySecrets map[string]secret.Value
	// services are the request's grants, checked against the caller's
	// secrets (placeholders are made with the session); pushRefs the
	// branches it may push besides its own.
	services []service.Grant
	pushRefs []string
	// From the workspace's project file (applyProject): the box's
	// environment, the ports to publish, what the session keeps of the
	// file (its setup), and the image recipe.
	env          []string
	ports        []session.Port
	project      *session.ProjectUse
	projectImage project.Image
	// projectDockerfile is the Dockerfile its owner accepted with the
	// project file; image is the id of the box image made for it.
	projectDockerfile []byte
	image             string
}

// planCreate checks req against f and decides the session, with no I/O:
// a plan, or the refusal. The checks run in a fixed order, the request's
// own fields first, then its workspace, credential, name and relays; the
// first refusal is the one said. req.Name must be set (CreateSession
// names an unnamed session). The backend is checked after, by
// createPlan.checkBackend.
func planCreate(req api.CreateRequest, f createFacts) (createPlan, error) {
	p := createPlan{name: req.Name, backend: req.Backend, egress: req.Egress, ask: req.Ask,
		unsafeHostCode: req.UnsafeHostCode, model: req.Model, effort: req.Effort,
		claudeVersion: req.ClaudeVersion, noStart: req.NoStart, owner: f.caller}
	if err := session.ValidName(p.name); err != nil {
		return createPlan{}, err
	}
	if req.Workspace != "" && f.workspaceErr == nil {
		// The project file fills what the request leaves out, before
		// anything of the request is checked.
		if err := p.applyProject(&req, f); err != nil {
			return createPlan{}, err
		}
	}
	if p.backend == "" {
		p.backend = f.cfg.Sessions.Backend
	}
	if p.runtime = cmp.Or(req.Runtime, f.cfg.RuntimeFor(p.backend)); p.runtime != "" {
		if err := runtimes.Valid(p.runtime); err != nil {
			return createPlan{}, fmt.Errorf("%v: %w", err, errdefs.ErrInvalid)
		}
	}
	if err := p.planEgress(req, f.cfg.Egress.Policies); err != nil {
		return createPlan{}, err
	}
	if err := session.ValidModel(p.model); err != nil {
		return createPlan{}, err
	}
	if err := session.ValidEffort(p.effort); err != nil {
		return createPlan{}, err
	}
	var err error
	if p.restart, err = activity.ParsePolicy(req.Restart); err != nil {
		return createPlan{}, err
	}
	if p.limits, err = planLimits(req, f.cfg.Sessions); err != nil {
		return createPlan{}, err
	}
	// setup, git identity, prompt, Claude Code version: setup.go
	if p.first, p.dropped, err = checkFirstStart(&req, f.cfg.Claude.AllowedVersions); err != nil {
		return createPlan{}, err
	}
	if err := p.planWorkspace(req, f); err != nil {
		return createPlan{}, err
	}
	if err := p.planClone(req, f); err != nil {
		return createPlan{}, err
	}
	if err := p.planCredential(req, f); err != nil {
		return createPlan{}, err
	}
	if err := p.checkName(f); err != nil {
		return createPlan{}, err
	}
	if p.relaySecrets, err = relaySecrets(req.RelaySecrets, f.cfg.Relays); err != nil {
		return createPlan{}, err
	}
	if err := p.planServices(req, f); err != nil {
		return createPlan{}, err
	}
	return p, nil
}

// planServices checks the request's grants: each names a secret the
// caller stored, in the form its kind wants, once; a push grant or a
// --push-ref needs a session that can push (a proxy-mode box: a
// direct-mode one holds the model credential, and is kept to the API).
func (p *createPlan) planServices(req api.CreateRequest, f createFacts) error {
	for _, r := range req.PushRefs {
		if err := service.ValidPushRef(r); err != nil {
			return err
		}
	}
	for _, set := range req.SecretSets {
		grants, ok := f.cfg.Services.Sets[set]
		if !ok {
			var names []string
			for n := range f.cfg.Services.Sets {
				names = append(names, n)
			}
			slices.Sort(names)
			return fmt.Errorf("--secret-set %s: the Runner's config names no such set (services.sets: %s): %w", set, cmp.Or(strings.Join(names, ", "), "none"), errdefs.ErrNotFound)
		}
		req.Secrets = append(slices.Clone(req.Secrets), grants...)
	}
	if len(req.PushRefs) > 0 && len(req.Secrets) == 0 {
		return fmt.Errorf("--push-ref names branches a session may push with a grant; give --secret NAME:OWNER/REPO:push too: %w", errdefs.ErrInvalid)
	}
	if len(req.Secrets) == 0 {
		return nil
	}
	if p.mode != session.ModeProxy {
		return fmt.Errorf("--secret: a direct-mode box talks to the API alone; service credentials are for proxy-mode sessions: %w", errdefs.ErrInvalid)
	}
	if f.secretsErr != nil {
		return f.secretsErr
	}
	seen := map[string]bool{}
	for _, s := range req.Secrets {
		g, err := service.ParseGrant(s)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(f.secrets, func(x service.Secret) bool { return x.Name == g.Secret })
		if i < 0 {
			return fmt.Errorf("--secret %s: you have no secret named %s; store it with paddock secret set %s --kind github|gitlab|header: %w", s, g.Secret, g.Secret, errdefs.ErrNotFound)
		}
		if err := g.CheckKind(f.secrets[i].Kind); err != nil {
			return err
		}
		key := g.Secret + ":" + strings.ToLower(g.Repo)
		if seen[key] {
			return fmt.Errorf("--secret %s: given twice: %w", s, errdefs.ErrInvalid)
		}
		seen[key] = true
		p.services = append(p.services, g)
	}
	p.pushRefs = req.PushRefs
	return nil
}

// planEgress decides the credential mode and the egress: offline and
// proxy by default; a direct-mode box reaches the API or nothing, and
// mounts no host workspace (ErrCoMount); rules, ask mode and a policy
// need the allowlist posture, the policy one in policies; and the rules
// must make a policy (checkEgressRules).
func (p *createPlan) planEgress(req api.CreateRequest, policies map[string]config.EgressPolicy) error {
	if p.egress == "" {
		p.egress = session.EgressOffline
	}
	p.mode = session.CredentialMode(req.CredentialMode)
	if p.mode == "" {
		p.mode = session.ModeProxy
	}
	switch p.mode {
	case session.ModeProxy:
	case session.ModeDirect:
		if p.egress != session.EgressOffline && p.egress != session.EgressAnthropic {
			return fmt.Errorf("credential mode direct needs egress offline or anthropic, not %q: a box with the real credential may reach nothing else: %w", p.egress, errdefs.ErrForbidden)
		}
		if req.Workspace != "" {
			return ErrCoMount
		}
	default:
		return fmt.Errorf("credential mode %q is not proxy or direct: %w", req.CredentialMode, errdefs.ErrInvalid)
	}
	switch p.egress {
	case session.EgressOffline:
		if len(req.Allow) > 0 || req.EgressPolicy != "" || req.Ask {
			return fmt.Errorf("--allow, --ask and --egress-policy need --egress allowlist: %w", errdefs.ErrInvalid)
		}
	case session.EgressAnthropic:
		if len(req.Allow) > 0 || req.EgressPolicy != "" || req.Ask {
			return fmt.Errorf("the anthropic posture allows the API only; for more use --egress allowlist: %w", errdefs.ErrInvalid)
		}
	case session.EgressAllowlist:
		p.allow = append(p.allow, req.Allow...)
		if req.EgressPolicy != "" {
			if _, ok := policies[req.EgressPolicy]; !ok {
				return fmt.Errorf("no egress policy %q in the Runner's config: %w", req.EgressPolicy, errdefs.ErrNotFound)
			}
			p.policies = []string{req.EgressPolicy} // attached: read from the config, detachable live
		}
	default:
		return fmt.Errorf("egress %q is not offline, anthropic or allowlist: %w", p.egress, errdefs.ErrInvalid)
	}
	p.deny = append(p.deny, req.Deny...)
	if p.egress == session.EgressOffline {
		return nil
	}
	return checkEgressRules(*p, policies)
}

// checkEgressRules makes the policy the session's start will make
// (Runner.egressSpec), so that a rule that does not parse, or an
// allowlist with nothing in it, is refused before anything is made. The
// owner's standing approvals, which egressSpec adds in ask mode, are left
// out: they cannot make it fail (an ask policy is never empty, and an
// approval comes parsed).
func checkEgressRules(p createPlan, policies map[string]config.EgressPolicy) error {
	sp := egress.Spec{Posture: p.egress, Allow: slices.Clone(p.allow), Deny: slices.Clone(p.deny), Ask: p.ask}
	for _, name := range p.policies {
		sp.Allow = append(sp.Allow, policies[name].Allow...)
		sp.Deny = append(sp.Deny, policies[name].Deny...)
	}
	_, err := sp.Policy()
	return err
}

// planLimits is the session's limits: the config's defaults c, each one
// the request gives (more than 0) in its place.
func planLimits(req api.CreateRequest, c config.Sessions) (limits.Limits, error) {
	lim := limits.Limits{RPM: c.RPM, Concurrent: c.MaxStreams, TokenBudget: c.TokenBudget}
	if req.RPM < 0 || req.MaxStreams < 0 || req.TokenBudget < 0 {
		return limits.Limits{}, fmt.Errorf("limits must be 0 (none) or more: %w", errdefs.ErrInvalid)
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
	var err error
	if lim.BudgetUSD, err = budgetUSD(c.BudgetUSD, req.BudgetUSD); err != nil {
		return limits.Limits{}, err
	}
	return lim, nil
}

// planWorkspace takes the request's workspace as gatherCreateFacts found it;
// --unsafe-host-code is about one and needs it.
func (p *createPlan) planWorkspace(req api.CreateRequest, f createFacts) error {
	if req.Workspace == "" {
		if req.UnsafeHostCode {
			return fmt.Errorf("--unsafe-host-code is about a host workspace; give --workspace too: %w", errdefs.ErrInvalid)
		}
		return nil
	}
	if f.workspaceErr != nil {
		return f.workspaceErr
	}
	p.workspace, p.workspaceUID = f.workspace, f.workspaceUID
	return nil
}

// planClone decides a clone session's branch and base: --clone needs a
// workspace (the repository) and a proxy-mode box; the branch is
// paddock/<name> unless named, the base HEAD unless given. With
// sessions.clone, a workspace that is a git repository is cloned unless
// the request says --no-clone or --unsafe-host-code (which is about a
// live workspace).
func (p *createPlan) planClone(req api.CreateRequest, f createFacts) error {
	if req.Clone && req.NoClone {
		return fmt.Errorf("--clone and --no-clone: give one: %w", errdefs.ErrInvalid)
	}
	if !req.Clone && !req.NoClone && !req.UnsafeHostCode && f.cfg.Sessions.Clone && req.Workspace != "" && f.workspaceGit {
		req.Clone = true
	}
	if !req.Clone {
		if req.Branch != "" || req.From != "" {
			return fmt.Errorf("--branch and --from are about a clone; give --clone too: %w", errdefs.ErrInvalid)
		}
		return nil
	}
	if req.Workspace == "" {
		return fmt.Errorf("--clone clones the repository of --workspace; give it: %w", errdefs.ErrInvalid)
	}
	if req.UnsafeHostCode {
		return fmt.Errorf("--unsafe-host-code is about a live workspace; a clone session's box never writes the host repository: %w", errdefs.ErrInvalid)
	}
	if strings.Contains(p.name, "..") || strings.HasSuffix(p.name, ".lock") || strings.HasSuffix(p.name, ".") {
		// It names the session's refs in the host repository (paddock fetch).
		return fmt.Errorf("session name %q cannot name a git ref (no '..', no trailing '.' or '.lock'); choose another for a clone session: %w", p.name, errdefs.ErrInvalid)
	}
	c := session.Clone{Branch: cmp.Or(req.Branch, "paddock/"+p.name), From: cmp.Or(req.From, "HEAD")}
	if err := session.ValidBranch(c.Branch); err != nil {
		return err
	}
	if err := session.ValidBranch(c.From); err != nil && c.From != "HEAD" {
		return fmt.Errorf("--from %q: name a branch, tag or commit of the repository: %w", c.From, errdefs.ErrInvalid)
	}
	p.clone = &c
	return nil
}

// planCredential decides what the session goes out with: the credential
// the request brought (its kind told by its prefix, or given), else its
// owner's (createFacts.cred). Then the owner may run one more session
// (users.max_sessions; a NoStart create runs none), the credential has
// not expired, and direct mode gets the owner's own setup token (oauth),
// never one lent.
func (p *createPlan) planCredential(req api.CreateRequest, f createFacts) error {
	if v := req.Credential.Reveal(); v != "" {
		sv := secret.New(strings.TrimSpace(v))
		kind, ok := credential.DetectKind(sv)
		if req.CredentialKind != "" {
			var err error
			if kind, err = credential.ParseKind(req.CredentialKind); err != nil {
				return err
			}
		} else if !ok {
			return fmt.Errorf("cannot tell the kind of the session's credential from its prefix; give its kind (oauth, api_key, auth_token): %w", errdefs.ErrInvalid)
		}
		p.own = &credential.Credential{Kind: kind, Secret: sv, Source: "session"}
	}
	switch {
	case p.own != nil:
		p.cred = *p.own
		p.cred.User = f.caller.Name
	case f.credErr != nil:
		return f.credErr
	default:
		p.cred = f.cred
	}
	if max := f.cfg.Users.For(f.caller.Name).MaxSessions; !p.noStart && max > 0 {
		if f.sessionsErr != nil {
			return f.sessionsErr
		}
		if err := maxSessions(f.sessions, f.caller, "", max); err != nil {
			return err
		}
	}
	if err := p.cred.Usable(f.now); err != nil {
		return err
	}
	if p.mode != session.ModeDirect {
		return nil
	}
	if p.own == nil && f.lent { // one the request brought is the caller's own
		return errLentDirect(f.caller)
	}
	if p.cred.Kind != credential.KindOAuth {
		return fmt.Errorf("credential mode direct passes a setup token (oauth) into the box; the owner's credential is %s: %w", p.cred.Kind, errdefs.ErrInvalid)
	}
	return nil
}

// checkName refuses a name that a live session has. Names are one space
// for everyone; the session's id is told only to those who may see it.
func (p *createPlan) checkName(f createFacts) error {
	if f.sessionsErr != nil {
		return f.sessionsErr
	}
	for _, s := range f.sessions {
		if s.Name == p.name && s.Live() {
			if s.RoleOf(f.caller.UID) == session.RoleNone && !f.admin {
				return fmt.Errorf("the name %q is taken by another person's session; pick another --name: %w", p.name, errdefs.ErrConflict)
			}
			return fmt.Errorf("a session named %q exists (%s); pick another --name or paddock rm it: %w", p.name, s.ID[:8], errdefs.ErrConflict)
		}
	}
	return nil
}

// relaySecrets takes the request's secrets for relays (in), trimmed:
// each one for a relay of the config, none empty. Nil for none.
func relaySecrets(in map[string]api.SecretString, relays []config.Relay) (map[string]secret.Value, error) {
	var out map[string]secret.Value
	for name, v := range in {
		known := false
		for _, rl := range relays {
			known = known || rl.Name == name
		}
		sv := strings.TrimSpace(v.Reveal())
		if !known || sv == "" {
			return nil, fmt.Errorf("relay %q: no such relay in the Runner's config, or an empty secret: %w", name, errdefs.ErrInvalid)
		}
		if out == nil {
			out = map[string]secret.Value{}
		}
		out[name] = secret.New(sv)
	}
	return out, nil
}

// checkBackend refuses direct mode on a backend whose boxes must never
// hold the credential (Capabilities.ProxyOnly, as kubernetes').
func (p *createPlan) checkBackend(caps sandbox.Capabilities) error {
	if p.mode == session.ModeDirect && caps.ProxyOnly {
		return fmt.Errorf("the %s backend runs proxy-mode sessions only: nothing in it may ever hold your credential; leave out --credential-mode direct: %w", p.backend, errdefs.ErrForbidden)
	}
	// The runtime as the engine names it, or its refusal: what the engine
	// offers and how to add one; a VM runtime on a host without KVM.
	rt, err := runtimes.Choose(caps.Name, p.runtime, caps.Runtimes, caps.SameHost)
	if err != nil {
		return err
	}
	p.runtime = rt
	return nil
}
