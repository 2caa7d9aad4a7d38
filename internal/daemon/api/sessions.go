package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/claudesetup"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// CreateRequest asks for a new session.
type CreateRequest struct {
	Name    string `json:"name,omitempty"`
	Backend string `json:"backend,omitempty"`
	Egress  string `json:"egress,omitempty"`
	// Allow lists NAME[:PORT] rules for the allowlist posture; EgressPolicy
	// names a policy of the Runner's config instead (or as well).
	Allow        []string `json:"allow,omitempty"`
	EgressPolicy string   `json:"egress_policy,omitempty"`
	// Deny lists NAME[:PORT] rules refused whatever else allows.
	Deny []string `json:"deny,omitempty"`
	// Ask holds connections no rule decides for a person's answer
	// (allowlist posture): paddock egress pending / approve / deny.
	Ask       bool   `json:"ask,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// UnsafeHostCode leaves the workspace's host code (.git/hooks,
	// .git/config, .vscode, … docs/SECURITY.md) writable in the box.
	UnsafeHostCode bool `json:"unsafe_host_code,omitempty"`
	// Clone makes the session work in a clone of Workspace's repository
	// in its box, on Branch (paddock/<name> if empty), from From (HEAD if
	// empty) in the host repository; the host repository is never written
	// by the box (session.Clone).
	Clone bool `json:"clone,omitempty"`
	// NoClone makes a live-workspace session where the Runner's
	// sessions.clone would make a clone.
	NoClone bool   `json:"no_clone,omitempty"`
	Branch  string `json:"branch,omitempty"`
	From    string `json:"from,omitempty"`
	// Secrets grant the session the use of its creator's stored service
	// credentials: NAME[:OWNER/REPO[:read|push]] (service.ParseGrant);
	// PushRefs are branches (or NAME/*) it may push besides its own.
	Secrets  []string `json:"secrets,omitempty"`
	PushRefs []string `json:"push_refs,omitempty"`
	// SecretSets name sets of grants of the Runner's config
	// (services.sets), given as if each grant were in Secrets.
	SecretSets     []string `json:"secret_sets,omitempty"`
	Model          string   `json:"model,omitempty"`
	Effort         string   `json:"effort,omitempty"`
	CredentialMode string   `json:"credential_mode,omitempty"`
	// ClaudeVersion runs another Claude Code version than the pinned one
	// (paddock smoke proves a version with it): local boxes get it
	// installed under <state-dir>/cli/<version>; docker boxes need the
	// image paddock/box:claude-<version> (paddock image build).
	ClaudeVersion string `json:"claude_version,omitempty"`
	// Runtime is what the box runs on: "gvisor" (or "runsc"), "kata",
	// or a name the backend's engine has (internal/box/runtimes); ""
	// takes the config's (sessions.runtime, or the backend's own key).
	Runtime string `json:"runtime,omitempty"`
	// NoProject ignores the workspace's project file (.paddock.toml).
	NoProject bool `json:"no_project,omitempty"`
	// NoStart creates the box without starting claude.
	NoStart bool `json:"no_start,omitempty"`
	// Restart is the restart policy for claude's exits: no, on-failure
	// (the default) or always (activity.Policy).
	Restart string `json:"restart,omitempty"`
	// Credential, if set, is this session's own credential (the session
	// creator's), used instead of the owner's; CredentialKind says its
	// kind (default: from its prefix). It is stored like the owner's
	// (0600) and never shown.
	Credential     SecretString `json:"credential,omitempty"`
	CredentialKind string       `json:"credential_kind,omitempty"`
	// RelaySecrets are the session's secrets for the Runner's relay routes,
	// by relay name; stored like credentials, injected by the relay.
	RelaySecrets map[string]SecretString `json:"relay_secrets,omitempty"`
	// Limits override the Runner's defaults (sessions.rpm, …) where set.
	RPM         int   `json:"rpm,omitempty"`
	MaxStreams  int   `json:"max_streams,omitempty"`
	TokenBudget int64 `json:"token_budget,omitempty"`
	// BudgetUSD is a budget in US dollars, priced with the Runner's
	// [prices] (sessions.budget_usd where 0).
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// ClaudeSetup is the creator's Claude Code setup, as paddock run reads
	// it from their home (claudesetup.Collect); GitIdentity is their git
	// user.name and user.email; Prompt is the task claude starts with.
	// All three are for the session's first start only (runner.firstStart).
	ClaudeSetup *claudesetup.Bundle `json:"claude_setup,omitempty"`
	GitIdentity *gitident.Identity  `json:"git_identity,omitempty"`
	Prompt      firstprompt.Text    `json:"prompt,omitempty"`
	// Resume is a conversation Claude Code kept on the creator's host,
	// read by paddock run --resume-host as them: the session's claude
	// resumes it (docs/PORTABLE.md). The Runner checks it as any input.
	Resume *portable.Conversation `json:"resume,omitempty"`
}

// SecretString carries a secret in a request body; it prints redacted
// (fmt) but marshals as itself, to cross the owner-only socket.
type SecretString string

// Secret wraps a secret for a request.
func Secret(s string) SecretString { return SecretString(s) }

// Reveal returns the secret.
func (s SecretString) Reveal() string { return string(s) }

func (s SecretString) String() string { return "[redacted]" }

// Format prints redacted for every verb.
func (s SecretString) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// SetRequest changes a session's model or effort; nil leaves it.
type SetRequest struct {
	Model  *string `json:"model,omitempty"`
	Effort *string `json:"effort,omitempty"`
	// TokenBudget changes the session's token budget (0: none); it takes
	// effect at once, without restarting claude.
	TokenBudget *int64 `json:"token_budget,omitempty"`
	// BudgetUSD changes the session's budget in US dollars (0: none), at
	// once like TokenBudget.
	BudgetUSD *float64 `json:"budget_usd,omitempty"`
	// Egress changes the posture at once, without restarting claude;
	// Allow and Deny, if given, replace the session's rules, and Ask turns
	// ask mode on or off. Tunnels the new policy refuses are cut.
	Egress *string   `json:"egress,omitempty"`
	Allow  *[]string `json:"allow,omitempty"`
	Deny   *[]string `json:"deny,omitempty"`
	Ask    *bool     `json:"ask,omitempty"`
	// Attach and Detach name policies of the Runner's config.
	Attach []string `json:"attach,omitempty"`
	Detach []string `json:"detach,omitempty"`
}

// ApproveRequest answers a session's connections waiting for approval
// (and those to come) to a host: HOST or *.DOMAIN, with :PORT or 443.
type ApproveRequest struct {
	Rule string `json:"rule"`
	// Scope: "session" (default: for the session's life), "for" (For
	// long), or "always" (also every later ask of the owner's sessions).
	Scope string `json:"scope,omitempty"`
	For   string `json:"for,omitempty"`
	// Deny refuses instead; with Scope "session" it adds a deny rule.
	Deny bool `json:"deny,omitempty"`
}

// ApproveResult says what an answer did.
type ApproveResult struct {
	Rule     string `json:"rule"`
	Answered int    `json:"answered"` // waiting connections answered now
	Recorded bool   `json:"recorded"` // a rule was kept for later ones
}

// PruneResult lists what prune removed.
type PruneResult struct {
	Removed []sandbox.Object `json:"removed"`
}

// ExecRequest runs a process in a session's box.
type ExecRequest struct {
	Argv []string `json:"argv,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
}

// AttachRequest joins a session's terminal mirror.
type AttachRequest struct {
	// Role is "driver", "observer", or "" for the best the caller may have
	// (driver, else observer); the answer's Paddock-Role header says which
	// they got.
	Role string `json:"role,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Participant is one attach to the terminal mirror (mirror.Participant).
type Participant interface {
	Read(ctx context.Context) ([]byte, error)
	Send(ctx context.Context, keys []byte) error
	Resize(ctx context.Context, rows, cols int) error
	Leave()
}

// Sessions is the part of the Backend that manages sessions.
type Sessions interface {
	CreateSession(ctx context.Context, req CreateRequest) (session.Session, error)
	Sessions(ctx context.Context) ([]session.Session, error)
	Session(ctx context.Context, ref string) (session.Session, error)
	Sleep(ctx context.Context, ref string) (session.Session, error)
	Wake(ctx context.Context, ref string) (session.Session, error)
	RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error)
	Set(ctx context.Context, ref string, req SetRequest) (session.Session, error)
	Prune(ctx context.Context, volumes bool) (PruneResult, error)
	// StartExec starts a process whose output goes to stdout/stderr.
	StartExec(ctx context.Context, ref string, req ExecRequest, stdout, stderr io.Writer) (*channel.Process, error)
	// Attach joins the session's terminal mirror.
	Attach(ctx context.Context, ref string, req AttachRequest) (Participant, error)
}

// UpgradeExec is the protocol an exec request upgrades to: channel frames
// both ways (stdin, resize, signal in; stdout, stderr, exit out).
const UpgradeExec = "paddock-exec/1"

func sessionRoutes(mux *http.ServeMux, b Backend) {
	one := func(pattern string, f func(r *http.Request) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			v, err := f(r)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, 200, v)
		})
	}
	one("POST /v1/sessions", func(r *http.Request) (any, error) {
		var req CreateRequest
		if err := decodeLimit(r, &req, MaxCreateBody); err != nil {
			return nil, err
		}
		return b.CreateSession(r.Context(), req)
	})
	one("GET /v1/sessions", func(r *http.Request) (any, error) {
		var all []session.Session
		var err error
		if r.URL.Query().Get("all_users") == "1" {
			au, ok := b.(AllUsers)
			if !ok {
				return nil, fmt.Errorf("this Runner has one user; leave out --all-users: %w", errdefs.ErrInvalid)
			}
			all, err = au.AllSessions(r.Context())
		} else {
			all, err = b.Sessions(r.Context())
		}
		if all == nil {
			all = []session.Session{}
		}
		return all, err
	})
	one("GET /v1/sessions/{ref}", func(r *http.Request) (any, error) { return b.Session(r.Context(), r.PathValue("ref")) })
	one("POST /v1/sessions/{ref}/sleep", func(r *http.Request) (any, error) { return b.Sleep(r.Context(), r.PathValue("ref")) })
	if fz, ok := b.(Freezer); ok {
		one("POST /v1/sessions/{ref}/freeze", func(r *http.Request) (any, error) { return fz.Freeze(r.Context(), r.PathValue("ref")) })
	}
	one("POST /v1/sessions/{ref}/wake", func(r *http.Request) (any, error) { return b.Wake(r.Context(), r.PathValue("ref")) })
	one("DELETE /v1/sessions/{ref}", func(r *http.Request) (any, error) {
		return b.RemoveSession(r.Context(), r.PathValue("ref"), r.URL.Query().Get("keep_volume") == "1")
	})
	one("POST /v1/sessions/{ref}/set", func(r *http.Request) (any, error) {
		var req SetRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return b.Set(r.Context(), r.PathValue("ref"), req)
	})
	portRoutes(b, one)
	projectRoutes(b, one)
	one("POST /v1/prune", func(r *http.Request) (any, error) { return b.Prune(r.Context(), r.URL.Query().Get("volumes") == "1") })
	mux.HandleFunc("POST /v1/sessions/{ref}/exec", func(w http.ResponseWriter, r *http.Request) { serveExec(w, r, b) })
	mux.HandleFunc("POST /v1/sessions/{ref}/attach", func(w http.ResponseWriter, r *http.Request) { serveAttach(w, r, b) })
}

// MaxCreateBody bounds a create request: a Claude setup of
// claudesetup.MaxBytes and a conversation of portable.MaxConversation, in
// base64, and the rest.
const MaxCreateBody = claudesetup.MaxBytes*4/3 + portable.MaxConversation*4/3 + 4<<20

// decode reads a JSON body of at most 1 MiB strictly.
func decode(r *http.Request, v any) error { return decodeLimit(r, v, 1<<20) }

// decodeLimit reads a JSON body of at most limit bytes strictly.
func decodeLimit(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://paddock"+path, rd)
	if err != nil {
		return err
	}
	return c.roundTrip(req, out)
}

// CreateSession calls POST /v1/sessions.
func (c *Client) CreateSession(ctx context.Context, req CreateRequest) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions", req, &s)
}

// Sessions calls GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context) ([]session.Session, error) {
	var s []session.Session
	return s, c.do(ctx, "GET", "/v1/sessions", nil, &s)
}

// Session calls GET /v1/sessions/{ref}.
func (c *Client) Session(ctx context.Context, ref string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(ref), nil, &s)
}

// Freezer is the optional Backend feature behind POST
// /v1/sessions/{ref}/freeze (paddock sleep --freeze).
type Freezer interface {
	Freeze(ctx context.Context, ref string) (session.Session, error)
}

// Freeze calls POST /v1/sessions/{ref}/freeze.
func (c *Client) Freeze(ctx context.Context, ref string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/freeze", nil, &s)
}

// Sleep calls POST /v1/sessions/{ref}/sleep.
func (c *Client) Sleep(ctx context.Context, ref string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/sleep", nil, &s)
}

// Wake calls POST /v1/sessions/{ref}/wake.
func (c *Client) Wake(ctx context.Context, ref string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/wake", nil, &s)
}

// RemoveSession calls DELETE /v1/sessions/{ref}.
func (c *Client) RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error) {
	var s session.Session
	q := ""
	if keepVolume {
		q = "?keep_volume=1"
	}
	return s, c.do(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(ref)+q, nil, &s)
}

// Set calls POST /v1/sessions/{ref}/set.
func (c *Client) Set(ctx context.Context, ref string, req SetRequest) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/set", req, &s)
}

// Prune calls POST /v1/prune.
func (c *Client) Prune(ctx context.Context, volumes bool) (PruneResult, error) {
	var p PruneResult
	q := ""
	if volumes {
		q = "?volumes=1"
	}
	return p, c.do(ctx, "POST", "/v1/prune"+q, nil, &p)
}

// PendingView is a connection waiting for approval, with its session's
// name.
type PendingView struct {
	egress.Pending
	Name string `json:"name"`
}
