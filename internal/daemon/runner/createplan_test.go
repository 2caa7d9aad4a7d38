package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// planFacts are the facts of TestPlanCreate's rows before each row's
// change: ann (not an admin) asks, with an oauth token of her own, on a
// Runner with one egress policy ("docs"), one relay ("hub") and no
// session yet.
func planFacts() createFacts {
	cfg := config.Default()
	cfg.Egress.Policies = map[string]config.EgressPolicy{"docs": {Allow: []string{"docs.example.com"}}}
	cfg.Relays = []config.Relay{{Name: "hub", Prefix: "/mod", Upstream: "https://hub.example.com", Header: "X-Hub"}}
	ann := session.Person{UID: 1001, Name: "ann"}
	return createFacts{cfg: &cfg, now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), caller: ann,
		cred: credential.Credential{Kind: credential.KindOAuth, Secret: secret.New("sk-ant-oat01-ann"), Source: "user:ann", User: "ann"}}
}

// liveNamed is a running session of owner, named name.
func liveNamed(name string, owner session.Person) session.Session {
	return session.Session{ID: "0123456789abcdef" + name, Name: name, Owner: owner, Desired: session.Running, Observed: session.Running}
}

// TestPlanCreate: every refusal of a create request, in the order the
// checks run (a request with two faults is refused for the first), and
// the main shapes of what is admitted, each a row: the request, a change
// to the facts (planFacts), the backend's capabilities, and either the
// refusal (a part of its words and its errdefs class) or what the plan
// says.
func TestPlanCreate(t *testing.T) {
	ben := session.Person{UID: 1002, Name: "ben"}
	errDisk := errors.New("the store cannot be read")
	apiKey := credential.Credential{Kind: credential.KindAPIKey, Secret: secret.New("sk-ant-api03-x"), User: "ann"}
	for _, c := range []struct {
		name  string
		req   api.CreateRequest
		facts func(*createFacts)
		caps  sandbox.Capabilities
		// The refusal: words in it and its class (nil: any) ...
		err string
		is  error
		// ... or, for a plan, what it must say.
		want func(*testing.T, createPlan)
	}{
		// Refusals, in the order of the checks.
		{name: "bad name", req: api.CreateRequest{Name: "Bad Name", Egress: "open"},
			err: `session name "Bad Name"`, is: errdefs.ErrInvalid},
		{name: "direct reaching more than the API", req: api.CreateRequest{CredentialMode: "direct", Egress: "allowlist", Allow: []string{"x.com"}},
			err: `credential mode direct needs egress offline or anthropic, not "allowlist"`, is: errdefs.ErrForbidden},
		{name: "direct on a workspace", req: api.CreateRequest{CredentialMode: "direct", Workspace: "/srv/w"},
			err: "a direct-mode box never mounts a host workspace", is: errdefs.ErrForbidden},
		{name: "unknown credential mode", req: api.CreateRequest{CredentialMode: "both"},
			err: `credential mode "both" is not proxy or direct`, is: errdefs.ErrInvalid},
		{name: "offline with rules", req: api.CreateRequest{Allow: []string{"x.com"}},
			err: "--allow, --ask and --egress-policy need --egress allowlist", is: errdefs.ErrInvalid},
		{name: "offline in ask mode", req: api.CreateRequest{Egress: "offline", Ask: true},
			err: "--allow, --ask and --egress-policy need --egress allowlist", is: errdefs.ErrInvalid},
		{name: "anthropic with a policy", req: api.CreateRequest{Egress: "anthropic", EgressPolicy: "docs"},
			err: "the anthropic posture allows the API only; for more use --egress allowlist", is: errdefs.ErrInvalid},
		{name: "policy not in the config", req: api.CreateRequest{Egress: "allowlist", EgressPolicy: "wiki"},
			err: `no egress policy "wiki" in the Runner's config`, is: errdefs.ErrNotFound},
		{name: "unknown posture", req: api.CreateRequest{Egress: "open"},
			err: `egress "open" is not offline, anthropic or allowlist`, is: errdefs.ErrInvalid},
		{name: "empty allowlist", req: api.CreateRequest{Egress: "allowlist"},
			err: "egress allowlist is empty", is: errdefs.ErrInvalid},
		{name: "a rule that does not parse", req: api.CreateRequest{Egress: "allowlist", Allow: []string{"*"}},
			err: `rule "*"`, is: errdefs.ErrInvalid},
		{name: "a deny rule that does not parse", req: api.CreateRequest{Egress: "anthropic", Deny: []string{"x.com:port"}},
			err: `rule "x.com:port"`, is: errdefs.ErrInvalid},
		{name: "bad model", req: api.CreateRequest{Model: "no such model"},
			err: `model "no such model" is not a model name`, is: errdefs.ErrInvalid},
		{name: "bad effort", req: api.CreateRequest{Effort: "huge"},
			err: `effort "huge" is not one of`, is: errdefs.ErrInvalid},
		{name: "bad restart policy", req: api.CreateRequest{Restart: "sometimes"},
			err: `restart policy "sometimes"`, is: errdefs.ErrInvalid},
		{name: "a negative limit", req: api.CreateRequest{MaxStreams: -1},
			err: "limits must be 0 (none) or more", is: errdefs.ErrInvalid},
		{name: "a budget past the most", req: api.CreateRequest{BudgetUSD: config.MaxBudgetUSD + 1},
			err: "budget of $", is: errdefs.ErrInvalid},
		{name: "a Claude Code version not allowed", req: api.CreateRequest{ClaudeVersion: "9.9.9"},
			err: "this Runner runs Claude Code", is: errdefs.ErrForbidden},
		{name: "a prompt too long", req: api.CreateRequest{Prompt: firstprompt.Text(strings.Repeat("x", firstprompt.MaxBytes+1))},
			err: "the prompt is", is: errdefs.ErrInvalid},
		{name: "a workspace that cannot be bound", req: api.CreateRequest{Workspace: "/srv/w", Model: "claude-x", Credential: api.Secret("unknowable")},
			facts: func(f *createFacts) {
				f.workspaceErr = fmt.Errorf("workspace /srv/w does not exist: %w", errdefs.ErrInvalid)
			},
			err: "workspace /srv/w does not exist", is: errdefs.ErrInvalid},
		{name: "unsafe host code without a workspace", req: api.CreateRequest{UnsafeHostCode: true},
			err: "--unsafe-host-code is about a host workspace; give --workspace too", is: errdefs.ErrInvalid},
		{name: "--clone and --no-clone", req: api.CreateRequest{Workspace: "w", Clone: true, NoClone: true},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   "--clone and --no-clone: give one", is: errdefs.ErrInvalid},
		{name: "a branch without a clone", req: api.CreateRequest{Workspace: "w", Branch: "x"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   "--branch and --from are about a clone; give --clone too", is: errdefs.ErrInvalid},
		{name: "a clone without a workspace", req: api.CreateRequest{Clone: true},
			err: "--clone clones the repository of --workspace; give it", is: errdefs.ErrInvalid},
		{name: "a clone with unsafe host code", req: api.CreateRequest{Clone: true, Workspace: "w", UnsafeHostCode: true},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   "a clone session's box never writes the host repository", is: errdefs.ErrInvalid},
		{name: "a clone session whose name cannot name a ref", req: api.CreateRequest{Name: "v1..2", Clone: true, Workspace: "w"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   `session name "v1..2" cannot name a git ref`, is: errdefs.ErrInvalid},
		{name: "a clone on a branch that reads as an option", req: api.CreateRequest{Clone: true, Workspace: "w", Branch: "-evil"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   `branch "-evil"`, is: errdefs.ErrInvalid},
		{name: "a clone on a branch that climbs", req: api.CreateRequest{Clone: true, Workspace: "w", Branch: "a/../../x"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   `branch "a/../../x"`, is: errdefs.ErrInvalid},
		{name: "a clone from a revision expression", req: api.CreateRequest{Clone: true, Workspace: "w", From: "main@{upstream}"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			err:   `--from "main@{upstream}"`, is: errdefs.ErrInvalid},
		{name: "a credential of no kind known", req: api.CreateRequest{Credential: api.Secret("hunter2")},
			err: "cannot tell the kind of the session's credential from its prefix", is: errdefs.ErrInvalid},
		{name: "a credential kind unknown", req: api.CreateRequest{Credential: api.Secret("hunter2"), CredentialKind: "password"},
			err: `"password" is not a credential kind`, is: errdefs.ErrInvalid},
		{name: "no credential for the caller", req: api.CreateRequest{},
			facts: func(f *createFacts) {
				f.credErr = fmt.Errorf("ann has no credential of their own: %w", errdefs.ErrForbidden)
				f.cfg.Users.MaxSessions, f.sessions = 1, []session.Session{liveNamed("other", f.caller)}
			},
			err: "ann has no credential of their own", is: errdefs.ErrForbidden},
		{name: "as many sessions running as the caller may", req: api.CreateRequest{Name: "other"},
			facts: func(f *createFacts) {
				f.cfg.Users.MaxSessions, f.sessions = 1, []session.Session{liveNamed("other", f.caller)}
			},
			err: "ann already has 1 sessions running, their limit (users.max_sessions = 1)", is: errdefs.ErrLimit},
		{name: "sessions unreadable, counting them", req: api.CreateRequest{},
			facts: func(f *createFacts) { f.cfg.Users.MaxSessions, f.sessionsErr = 1, errDisk },
			err:   errDisk.Error()},
		{name: "an expired credential", req: api.CreateRequest{CredentialMode: "direct"},
			facts: func(f *createFacts) { f.cred.Expires, f.lent = f.now.Add(-time.Minute), true },
			err:   "expired at", is: credential.ErrExpired},
		{name: "direct on a lent credential", req: api.CreateRequest{CredentialMode: "direct", Egress: "anthropic"},
			facts: func(f *createFacts) { f.cred.User, f.lent, f.cred.Kind = "owner", true, credential.KindAPIKey },
			err:   "ann has none of their own: the owner's is lent through the proxy only", is: errdefs.ErrForbidden},
		{name: "direct without a setup token", req: api.CreateRequest{CredentialMode: "direct"},
			facts: func(f *createFacts) { f.cred = apiKey },
			err:   "credential mode direct passes a setup token (oauth) into the box; the owner's credential is api_key", is: errdefs.ErrInvalid},
		{name: "a name the caller's session has", req: api.CreateRequest{Name: "mine", RelaySecrets: map[string]api.SecretString{"nohub": "x"}},
			facts: func(f *createFacts) { f.sessions = []session.Session{liveNamed("mine", f.caller)} },
			err:   `a session named "mine" exists (01234567); pick another --name or paddock rm it`, is: errdefs.ErrConflict},
		{name: "a name another person's session has", req: api.CreateRequest{Name: "bens"},
			facts: func(f *createFacts) { f.sessions = []session.Session{liveNamed("bens", ben)} },
			err:   `the name "bens" is taken by another person's session; pick another --name`, is: errdefs.ErrConflict},
		{name: "a name another person's session has, asked by an admin", req: api.CreateRequest{Name: "bens"},
			facts: func(f *createFacts) { f.admin, f.sessions = true, []session.Session{liveNamed("bens", ben)} },
			err:   `a session named "bens" exists (01234567)`, is: errdefs.ErrConflict},
		{name: "sessions unreadable, for the names", req: api.CreateRequest{NoStart: true},
			facts: func(f *createFacts) { f.cfg.Users.MaxSessions, f.sessionsErr = 1, errDisk },
			err:   errDisk.Error()},
		{name: "a secret for no relay", req: api.CreateRequest{RelaySecrets: map[string]api.SecretString{"nohub": "x"}},
			err: `relay "nohub": no such relay in the Runner's config, or an empty secret`, is: errdefs.ErrInvalid},
		{name: "an empty relay secret", req: api.CreateRequest{RelaySecrets: map[string]api.SecretString{"hub": " \n"}},
			err: `relay "hub": no such relay`, is: errdefs.ErrInvalid},
		{name: "direct on a proxy-only backend", req: api.CreateRequest{CredentialMode: "direct", Backend: "cluster"},
			caps: sandbox.Capabilities{ProxyOnly: true},
			err:  "the cluster backend runs proxy-mode sessions only", is: errdefs.ErrForbidden},

		// What is admitted.
		{name: "the defaults", req: api.CreateRequest{},
			want: func(t *testing.T, p createPlan) {
				if p.name != "s" || p.backend != "local" || p.mode != session.ModeProxy || p.egress != session.EgressOffline ||
					p.allow != nil || p.deny != nil || p.policies != nil || p.ask || p.restart != activity.DefaultPolicy ||
					p.first != nil || p.own != nil || p.cred.User != "ann" || p.owner.Name != "ann" || p.relaySecrets != nil || p.workspace != "" {
					t.Errorf("%+v", p)
				}
				if d := config.Default().Sessions; p.limits.RPM != d.RPM || p.limits.Concurrent != d.MaxStreams || p.limits.TokenBudget != d.TokenBudget || p.limits.BudgetUSD != d.BudgetUSD {
					t.Errorf("limits %+v, not the config's", p.limits)
				}
			}},
		{name: "an allowlist with rules, a policy and ask mode", req: api.CreateRequest{Backend: "docker", Egress: "allowlist", Allow: []string{"x.com"}, Deny: []string{"bad.x.com"}, EgressPolicy: "docs", Ask: true},
			want: func(t *testing.T, p createPlan) {
				if p.backend != "docker" || p.egress != "allowlist" || strings.Join(p.allow, ",") != "x.com" || strings.Join(p.deny, ",") != "bad.x.com" ||
					strings.Join(p.policies, ",") != "docs" || !p.ask {
					t.Errorf("%+v", p)
				}
			}},
		{name: "a policy alone makes the allowlist", req: api.CreateRequest{Egress: "allowlist", EgressPolicy: "docs"},
			want: func(t *testing.T, p createPlan) {
				if strings.Join(p.policies, ",") != "docs" || p.allow != nil {
					t.Errorf("%+v", p)
				}
			}},
		{name: "direct to the API on the caller's own setup token", req: api.CreateRequest{CredentialMode: "direct", Egress: "anthropic", Deny: []string{"x.com"}},
			want: func(t *testing.T, p createPlan) {
				if p.mode != session.ModeDirect || p.egress != "anthropic" || p.cred.Kind != credential.KindOAuth || p.own != nil {
					t.Errorf("%+v", p)
				}
			}},
		{name: "the session's own credential, its kind told by its prefix", req: api.CreateRequest{Credential: api.Secret(" sk-ant-api03-own\n")},
			facts: func(f *createFacts) { f.credErr = errors.New("not looked up") },
			want: func(t *testing.T, p createPlan) {
				if p.own == nil || p.own.Kind != credential.KindAPIKey || p.own.Secret.Reveal() != "sk-ant-api03-own" || p.own.Source != "session" ||
					p.cred.User != "ann" || p.cred.Kind != credential.KindAPIKey {
					t.Errorf("%+v", p)
				}
			}},
		{name: "the session's own credential, its kind given", req: api.CreateRequest{Credential: api.Secret("tok"), CredentialKind: "auth_token"},
			want: func(t *testing.T, p createPlan) {
				if p.own == nil || p.own.Kind != credential.KindAuthToken {
					t.Errorf("%+v", p)
				}
			}},
		{name: "limits, a budget and a restart policy given", req: api.CreateRequest{RPM: 7, MaxStreams: 2, TokenBudget: 1000, BudgetUSD: 5, Restart: "always", Model: "claude-sonnet-4-5", Effort: "high"},
			want: func(t *testing.T, p createPlan) {
				if p.limits.RPM != 7 || p.limits.Concurrent != 2 || p.limits.TokenBudget != 1000 || p.limits.BudgetUSD != 5 ||
					p.restart != activity.RestartAlways || p.model != "claude-sonnet-4-5" || p.effort != "high" {
					t.Errorf("%+v", p)
				}
			}},
		{name: "a workspace, as looked up", req: api.CreateRequest{Workspace: "w", UnsafeHostCode: true},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			want: func(t *testing.T, p createPlan) {
				if p.workspace != "/home/ann/w" || p.workspaceUID != 1001 || !p.unsafeHostCode {
					t.Errorf("%+v", p)
				}
			}},
		{name: "a clone, its branch and base by default", req: api.CreateRequest{Name: "five", Clone: true, Workspace: "w"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			want: func(t *testing.T, p createPlan) {
				if p.clone == nil || p.clone.Branch != "paddock/five" || p.clone.From != "HEAD" || p.clone.Base != "" || p.workspace != "/home/ann/w" {
					t.Errorf("%+v %+v", p, p.clone)
				}
			}},
		{name: "sessions.clone: a git workspace is cloned", req: api.CreateRequest{Name: "six", Workspace: "w"},
			facts: func(f *createFacts) {
				f.workspace, f.workspaceUID, f.workspaceGit, f.cfg.Sessions.Clone = "/home/ann/w", 1001, true, true
			},
			want: func(t *testing.T, p createPlan) {
				if p.clone == nil || p.clone.Branch != "paddock/six" {
					t.Errorf("%+v", p.clone)
				}
			}},
		{name: "sessions.clone: --no-clone, a workspace that is not git, unsafe host code: live", req: api.CreateRequest{Workspace: "w", NoClone: true},
			facts: func(f *createFacts) {
				f.workspace, f.workspaceUID, f.workspaceGit, f.cfg.Sessions.Clone = "/home/ann/w", 1001, true, true
			},
			want: func(t *testing.T, p createPlan) {
				if p.clone != nil {
					t.Errorf("--no-clone made a clone: %+v", p.clone)
				}
				for _, c := range []struct {
					req api.CreateRequest
					git bool
				}{{api.CreateRequest{Workspace: "w", UnsafeHostCode: true}, true}, {api.CreateRequest{Workspace: "w"}, false}} {
					f := createFacts{cfg: &config.Config{}, workspace: "/home/ann/w", workspaceUID: 1001, workspaceGit: c.git}
					f.cfg.Sessions.Clone = true
					var q createPlan
					if err := q.planClone(c.req, f); err != nil || q.clone != nil {
						t.Errorf("%+v (git %v): %v %+v", c.req, c.git, err, q.clone)
					}
				}
			}},
		{name: "a clone on a named branch from a tag", req: api.CreateRequest{Clone: true, Workspace: "w", Branch: "feat/login", From: "v1.2"},
			facts: func(f *createFacts) { f.workspace, f.workspaceUID = "/home/ann/w", 1001 },
			want: func(t *testing.T, p createPlan) {
				if p.clone == nil || p.clone.Branch != "feat/login" || p.clone.From != "v1.2" {
					t.Errorf("%+v", p.clone)
				}
			}},
		{name: "a first start with a prompt, not started", req: api.CreateRequest{Prompt: "go", NoStart: true},
			facts: func(f *createFacts) {
				f.cfg.Users.MaxSessions, f.sessions = 1, []session.Session{liveNamed("other", f.caller)}
			},
			want: func(t *testing.T, p createPlan) {
				if p.first == nil || p.first.Prompt != "go" || !p.noStart {
					t.Errorf("%+v", p)
				}
			}},
		{name: "the name of a removed session", req: api.CreateRequest{Name: "gone"},
			facts: func(f *createFacts) {
				s := liveNamed("gone", f.caller)
				s.Observed, s.Desired = session.Removed, session.Removed
				f.sessions = []session.Session{s}
			},
			want: func(t *testing.T, p createPlan) {
				if p.name != "gone" {
					t.Errorf("%+v", p)
				}
			}},
		{name: "a relay's secret, trimmed", req: api.CreateRequest{RelaySecrets: map[string]api.SecretString{"hub": " s3cret\n"}},
			want: func(t *testing.T, p createPlan) {
				if len(p.relaySecrets) != 1 || p.relaySecrets["hub"].Reveal() != "s3cret" {
					t.Errorf("%v", p.relaySecrets)
				}
			}},
		{name: "proxy mode on a proxy-only backend", req: api.CreateRequest{Backend: "cluster"}, caps: sandbox.Capabilities{ProxyOnly: true},
			want: func(t *testing.T, p createPlan) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := planFacts()
			if c.facts != nil {
				c.facts(&f)
			}
			req := c.req
			if req.Name == "" {
				req.Name = "s"
			}
			p, err := planCreate(req, f)
			if err == nil {
				err = p.checkBackend(c.caps)
			}
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("want a refusal saying %q, got %v", c.err, err)
			case c.err != "" && c.is != nil && !errors.Is(err, c.is):
				t.Fatalf("refusal %q: not %v", err, c.is)
			case c.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.err == "":
				c.want(t, p)
			}
		})
	}
}

// TestPlanRuntime: the request's runtime, else the backend's key, else
// sessions.runtime; checkBackend turns a family word into the engine's
// name and refuses one the engine lacks, before anything is made.
func TestPlanRuntime(t *testing.T) {
	cfg := config.Default()
	cfg.Sessions.Runtime = "gvisor"
	cfg.Docker.Runtime = "runc"
	for _, c := range []struct {
		req     api.CreateRequest
		offered []string
		want    string
		refused string
	}{
		{api.CreateRequest{Backend: "docker"}, []string{"runc", "runsc"}, "runc", ""},
		{api.CreateRequest{Backend: "docker", Runtime: "gvisor"}, []string{"runc", "runsc"}, "runsc", ""},
		{api.CreateRequest{Backend: "kubernetes"}, []string{"gvisor"}, "gvisor", ""},
		{api.CreateRequest{Backend: "docker", Runtime: "runsc"}, []string{"runc"}, "", `no runtime "runsc" (it offers: runc)`},
		{api.CreateRequest{Backend: "docker", Runtime: "Not One"}, nil, "", "not a runtime name"},
	} {
		c.req.Name = "rt"
		p, err := planCreate(c.req, createFacts{cfg: &cfg, now: time.Now()})
		if err == nil {
			err = p.checkBackend(sandbox.Capabilities{Name: p.backend, Runtimes: c.offered})
		}
		switch {
		case c.refused != "":
			if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%+v: %v, want a refusal with %q", c.req, err, c.refused)
			}
		case err != nil || p.runtime != c.want:
			t.Errorf("%+v: %q, %v; want %q", c.req, p.runtime, err, c.want)
		}
	}
}
