package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// Scope is what an API token may do (tokens.go). Each is the one before
// and more: read < drive < operate.
type Scope string

// The scopes. ScopeSocket is a route's scope when no token may call it:
// only a person on the Runner's socket.
const (
	ScopeSocket  Scope = ""
	ScopeRead    Scope = "read"
	ScopeDrive   Scope = "drive"
	ScopeOperate Scope = "operate"
)

var scopeRank = map[Scope]int{ScopeRead: 1, ScopeDrive: 2, ScopeOperate: 3}

// Allows says whether a token of scope s may call a route of scope need.
func (s Scope) Allows(need Scope) bool {
	return need != ScopeSocket && scopeRank[s] > 0 && scopeRank[s] >= scopeRank[need]
}

// ParseScope checks a scope's name.
func ParseScope(v string) (Scope, error) {
	s := Scope(v)
	if scopeRank[s] == 0 {
		return "", fmt.Errorf("scope %q is none of read, drive, operate: %w", v, errdefs.ErrInvalid)
	}
	return s, nil
}

// Param is a query parameter of a route.
type Param struct {
	Name, Type, Doc string
}

// Route is one route of the API as the OpenAPI document describes it, and
// the scope a token needs to call it. Routes is the list; a test checks it
// against the routes Handler serves, both ways.
type Route struct {
	Pattern string // "METHOD /v1/path/{param}"
	Scope   Scope
	Summary string
	Query   []Param
	// Request and Response are values of the bodies' types (nil: none);
	// Produces is the answer's media type when it is not JSON.
	Request, Response any
	Produces          string
	// Example is a worked request body (JSON of Request's type), in the
	// document as the request's example; TestAPIOverHTTP sends it to a
	// running Runner and checks the answer against the document.
	Example json.RawMessage
}

// Method and Path split the pattern.
func (r Route) Method() string { m, _, _ := strings.Cut(r.Pattern, " "); return m }

// Path is the pattern's path.
func (r Route) Path() string { _, p, _ := strings.Cut(r.Pattern, " "); return p }

// Media types of answers that are not JSON.
const (
	mediaSSE    = "text/event-stream"
	mediaText   = "text/plain"
	mediaNDJSON = "application/x-ndjson"
	mediaBinary = "application/octet-stream"
	mediaStream = "application/vnd.paddock.exec" // an upgrade to UpgradeExec
)

// Routes lists every route of the API.
var Routes = []Route{
	{Pattern: "GET /v1/health", Scope: ScopeRead, Summary: "The Runner: version, id, where its proxy listens.", Response: Health{}},
	{Pattern: "GET /v1/whoami", Scope: ScopeRead, Summary: "The caller as the Runner sees them.", Response: people.Person{}},
	{Pattern: "GET /v1/openapi.json", Scope: ScopeRead, Summary: "This document.", Response: map[string]any{}},
	{Pattern: "GET /v1/sessions", Scope: ScopeRead, Summary: "The caller's sessions and those shared with them.", Response: []session.Session{},
		Query: []Param{{"all_users", "string", "1: every person's (admins only)"}}},
	{Pattern: "POST /v1/sessions", Scope: ScopeOperate, Summary: "Create a session (and start it, unless no_start); prompt is claude's first message.", Request: CreateRequest{}, Response: session.Session{},
		Example: json.RawMessage(`{"name":"fix-1","prompt":"run go test ./... and fix what fails","workspace":"/home/me/src/app"}`)},
	{Pattern: "GET /v1/sessions/{ref}", Scope: ScopeRead, Summary: "One session, by name or id prefix.", Response: session.Session{}},
	{Pattern: "DELETE /v1/sessions/{ref}", Scope: ScopeOperate, Summary: "Remove a session and its box.", Response: session.Session{},
		Query: []Param{{"keep_volume", "string", "1: keep its workspace volume"}}},
	{Pattern: "POST /v1/sessions/{ref}/sleep", Scope: ScopeOperate, Summary: "Stop its box, keeping the conversation.", Response: session.Session{}},
	{Pattern: "POST /v1/sessions/{ref}/wake", Scope: ScopeOperate, Summary: "Start a sleeping session again, resuming the conversation.", Response: session.Session{}},
	{Pattern: "POST /v1/sessions/{ref}/freeze", Scope: ScopeOperate, Summary: "Freeze its box's processes in memory.", Response: session.Session{}},
	{Pattern: "POST /v1/sessions/{ref}/set", Scope: ScopeOperate, Summary: "Change a session's settings (egress, budget…).", Request: SetRequest{}, Response: session.Session{},
		Example: json.RawMessage(`{"egress":"allowlist","allow":["proxy.golang.org"],"ask":true}`)},
	{Pattern: "POST /v1/sessions/{ref}/message", Scope: ScopeDrive, Summary: "Type a message into claude's prompt and submit it; answered when claude took it, or queued while it works.", Request: MessageRequest{}, Response: MessageResult{},
		Example: json.RawMessage(`{"text":"now add a test for it"}`)},
	{Pattern: "GET /v1/sessions/{ref}/wait", Scope: ScopeRead, Summary: "Long poll: answered when claude's activity is the one asked for, the session stops, or the timeout passes.", Response: WaitResult{},
		Query: []Param{{"for", "string", "working, waiting, exited or starting (default waiting)"}, {"timeout", "string", "a Go duration, at most 5m (default 30s)"}}},
	{Pattern: "GET /v1/sessions/{ref}/turn", Scope: ScopeRead, Summary: "The last turn of the conversation: the prompt, claude's words, tool calls and results.", Response: TurnResult{}},
	{Pattern: "GET /v1/sessions/{ref}/events", Scope: ScopeRead, Summary: "Server-sent events of one session.", Response: events.Event{}, Produces: mediaSSE,
		Query: []Param{{"after", "integer", "resume after this event id (or Last-Event-ID)"}}},
	{Pattern: "GET /v1/events", Scope: ScopeRead, Summary: "Server-sent events of every session the caller sees.", Response: events.Event{}, Produces: mediaSSE,
		Query: []Param{{"after", "integer", "resume after this event id (or Last-Event-ID)"}}},
	{Pattern: "GET /v1/sessions/{id}/logs", Scope: ScopeRead, Summary: "The session's proxy and egress decisions, oldest first.", Response: []decisionlog.Entry{},
		Query: []Param{{"n", "integer", "the last n"}}},
	{Pattern: "GET /v1/sessions/{ref}/ledger", Scope: ScopeRead, Summary: "The session's ledger: requests joined to tool calls.", Response: LedgerResult{},
		Query: []Param{{"transcript", "string", "true: join the transcript read from the box"}}},
	{Pattern: "GET /v1/sessions/{ref}/diff", Scope: ScopeRead, Summary: "A clone session's change against its base, as a unified diff.", Produces: mediaText,
		Query: []Param{{"stat", "boolean", "a diffstat"}, {"name_only", "boolean", "the names of the files changed"}, {"color", "boolean", "with colours"}, {"no_untracked", "boolean", "leave out files git does not track"}}},
	{Pattern: "POST /v1/sessions/{ref}/fetch", Scope: ScopeOperate, Summary: "Fetch a clone session's branch into the host repository.", Response: FetchResult{}},
	{Pattern: "POST /v1/sessions/{ref}/merge", Scope: ScopeOperate, Summary: "Merge a clone session's branch into the owner's repository.", Request: MergeOptions{}, Response: MergeResult{}},
	{Pattern: "POST /v1/sessions/{ref}/pr", Scope: ScopeOperate, Summary: "Push the session's branch and open a pull request.", Request: PRRequest{}, Response: PRResult{}},
	{Pattern: "GET /v1/sessions/{ref}/ports", Scope: ScopeRead, Summary: "The session's published ports.", Response: []session.Port{}},
	{Pattern: "POST /v1/sessions/{ref}/ports", Scope: ScopeOperate, Summary: "Publish a box port on the host's loopback.", Request: PortRequest{}, Response: session.Session{}},
	{Pattern: "DELETE /v1/sessions/{ref}/ports/{box}", Scope: ScopeOperate, Summary: "Take a published port back.", Response: session.Session{}},
	{Pattern: "POST /v1/sessions/{ref}/share", Scope: ScopeOperate, Summary: "Give a person a role on the session (owner or admin).", Request: ShareRequest{}, Response: session.Session{}},
	{Pattern: "POST /v1/sessions/{ref}/unshare", Scope: ScopeOperate, Summary: "Take a person's role away.", Request: ShareRequest{}, Response: session.Session{}},
	{Pattern: "GET /v1/sessions/{ref}/export", Scope: ScopeOperate, Summary: "A session file: the session and its conversation.", Produces: mediaBinary},
	{Pattern: "POST /v1/sessions/import", Scope: ScopeOperate, Summary: "Make a session from a session file.", Response: ImportResult{}},
	{Pattern: "GET /v1/egress/pending", Scope: ScopeRead, Summary: "Connections waiting for a person's approval.", Response: []PendingView{}},
	{Pattern: "POST /v1/sessions/{ref}/egress/approve", Scope: ScopeDrive, Summary: "Approve or deny a waiting connection.", Request: ApproveRequest{}, Response: ApproveResult{},
		Example: json.RawMessage(`{"rule":"sum.golang.org:443","scope":"session"}`)},
	{Pattern: "GET /v1/egress/always", Scope: ScopeRead, Summary: "Standing approvals.", Response: AlwaysList{},
		Query: []Param{{"user", "string", "whose (admins)"}}},
	{Pattern: "POST /v1/egress/always/rm", Scope: ScopeOperate, Summary: "Remove a standing approval.", Request: AlwaysRemoveRequest{}, Response: AlwaysRemoveResult{}},
	{Pattern: "GET /v1/usage", Scope: ScopeRead, Summary: "Tokens and estimated cost.", Response: usage.Report{},
		Query: []Param{{"since", "string", "RFC 3339 time"}, {"session", "string", "one session"}, {"by", "string", "session, model, day or person"}}},
	{Pattern: "GET /v1/project", Scope: ScopeRead, Summary: "A workspace's project file and whether it is accepted.", Response: ProjectView{},
		Query: []Param{{"workspace", "string", "the workspace directory"}}},
	{Pattern: "POST /v1/project/allow", Scope: ScopeOperate, Summary: "Accept a workspace's project file as it is now.", Request: ProjectRequest{}, Response: ProjectView{}},
	{Pattern: "POST /v1/project/revoke", Scope: ScopeOperate, Summary: "Withdraw the acceptance.", Request: ProjectRequest{}, Response: ProjectView{}},
	{Pattern: "POST /v1/prune", Scope: ScopeOperate, Summary: "Remove what removed sessions left behind.", Response: PruneResult{},
		Query: []Param{{"volumes", "string", "1: their volumes too"}}},
	{Pattern: "GET /v1/credential", Scope: ScopeRead, Summary: "The credential in use: its kind and source, never the credential.", Response: credential.Status{}},
	{Pattern: "GET /v1/audit", Scope: ScopeRead, Summary: "The audit log (admins: everyone's; others: their own).", Response: audit.Entry{}, Produces: mediaNDJSON,
		Query: []Param{{"session", "string", "one session"}, {"user", "string", "one person"}, {"follow", "string", "1: keep the answer open for new entries"}, {"n", "integer", "the last n"}}},
	{Pattern: "POST /v1/tokens", Scope: ScopeSocket, Summary: "Make an API token for the caller; its secret is in this answer only.", Request: TokenRequest{}, Response: NewToken{}},
	{Pattern: "GET /v1/tokens", Scope: ScopeSocket, Summary: "The caller's API tokens (never their secrets).", Response: []TokenInfo{}},
	{Pattern: "DELETE /v1/tokens/{id}", Scope: ScopeSocket, Summary: "Revoke an API token.", Response: TokenInfo{}},
	// The socket only: the terminal and processes of a box, the
	// credentials, and the web page's logins.
	{Pattern: "POST /v1/sessions/{ref}/exec", Scope: ScopeSocket, Summary: "Run a process in the box (upgrades to " + UpgradeExec + ").", Request: ExecRequest{}, Produces: mediaStream},
	{Pattern: "POST /v1/sessions/{ref}/attach", Scope: ScopeSocket, Summary: "Join the session's terminal (upgrades to " + UpgradeExec + ").", Request: AttachRequest{}, Produces: mediaStream},
	{Pattern: "PUT /v1/credential", Scope: ScopeSocket, Summary: "Store the caller's own model credential.", Response: credential.Status{}},
	{Pattern: "DELETE /v1/credential", Scope: ScopeSocket, Summary: "Remove the caller's own model credential."},
	{Pattern: "POST /v1/credential/login", Scope: ScopeSocket, Summary: "Start paddock's own OAuth login."},
	{Pattern: "POST /v1/credential/login/finish", Scope: ScopeSocket, Summary: "Finish it with the pasted code.", Response: oauth.Status{}},
	{Pattern: "GET /v1/credential/login", Scope: ScopeSocket, Summary: "The login's status.", Response: oauth.Status{}},
	{Pattern: "DELETE /v1/credential/login", Scope: ScopeSocket, Summary: "Log out."},
	{Pattern: "GET /v1/secrets", Scope: ScopeSocket, Summary: "Service secrets (never their values).", Response: []service.Status{}},
	{Pattern: "PUT /v1/secrets/{name}", Scope: ScopeSocket, Summary: "Store a service secret.", Request: SecretRequest{}, Response: service.Status{}},
	{Pattern: "DELETE /v1/secrets/{name}", Scope: ScopeSocket, Summary: "Remove a service secret."},
	{Pattern: "POST /v1/web/login", Scope: ScopeSocket, Summary: "A one-time login URL of the web page."},
	{Pattern: "POST /v1/web/enroll", Scope: ScopeSocket, Summary: "A one-time link that makes a passkey on the web page for the caller (or, for an admin, anyone).", Request: EnrollRequest{}, Response: WebLogin{}},
}

// routeScope is the scope of each pattern.
var routeScope = func() map[string]Scope {
	m := make(map[string]Scope, len(Routes))
	for _, r := range Routes {
		m[r.Pattern] = r.Scope
	}
	return m
}()

// ScopeOf is the scope a token needs for the route pattern (as
// http.ServeMux reports it); ok is false for a pattern not in Routes,
// which no token may call.
func ScopeOf(pattern string) (Scope, bool) {
	s, ok := routeScope[pattern]
	return s, ok
}
