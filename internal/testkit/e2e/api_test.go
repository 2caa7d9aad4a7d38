package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// apiClient calls the API on the Runner's web listener with a token.
type apiClient struct {
	t    *testing.T
	base string
	doc  map[string]any // the OpenAPI document, to check answers against
}

func (c *apiClient) call(tok, method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ok calls a route, wants 200, and checks the answer against the route's
// schema in the OpenAPI document; it returns the answer decoded into out.
func (c *apiClient) ok(tok, pattern, path string, body, out any) {
	c.t.Helper()
	method, _, _ := strings.Cut(pattern, " ")
	code, b := c.call(tok, method, path, body)
	if code != 200 {
		c.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		c.t.Fatalf("%s: not JSON: %v", path, err)
	}
	if err := c.check(pattern, v); err != nil {
		c.t.Fatalf("%s %s answered what the document does not describe: %v\n%s", method, path, err, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatal(err)
		}
	}
}

// check validates v against the 200 answer's schema of pattern.
func (c *apiClient) check(pattern string, v any) error {
	method, path, _ := strings.Cut(pattern, " ")
	op, _ := c.doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if op == nil {
		return fmt.Errorf("%s is not in the document", pattern)
	}
	content, _ := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	if media == nil {
		return fmt.Errorf("%s has no JSON answer in the document", pattern)
	}
	return c.validate(media["schema"].(map[string]any), v, "$")
}

// validate is the part of JSON Schema the document uses: $ref, type (one
// or a list), properties, required, items, additionalProperties, enum.
func (c *apiClient) validate(s map[string]any, v any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		def, _ := c.doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		if def == nil {
			return fmt.Errorf("%s: $ref %s resolves to nothing", at, ref)
		}
		return c.validate(def, v, at)
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	if len(types) > 0 {
		matched := false
		for _, t := range types {
			matched = matched || jsonType(v, t)
		}
		if !matched {
			return fmt.Errorf("%s: %T is not %v", at, v, types)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || e == v
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range asList(s["required"]) {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%s: no %q, which is required", at, r)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, fv := range x {
			if ps, ok := props[k].(map[string]any); ok {
				if err := c.validate(ps, fv, at+"."+k); err != nil {
					return err
				}
			} else if ap, ok := s["additionalProperties"].(map[string]any); ok {
				if err := c.validate(ap, fv, at+"."+k); err != nil {
					return err
				}
			} else if props != nil {
				return fmt.Errorf("%s: %q is not in the schema", at, k)
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				if err := c.validate(items, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func asList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, x.(string))
	}
	return out
}

func jsonType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "null":
		return v == nil
	}
	return false
}

// eventLog follows GET /v1/events on the web listener with a token.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) follow(t *testing.T, url, tok string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		defer resp.Body.Close()
		_ = api.ReadEvents(bufio.NewReader(resp.Body), func(e events.Event) bool {
			l.mu.Lock()
			l.evs = append(l.evs, e)
			l.mu.Unlock()
			return true
		})
	}()
}

// wait returns the first event after seq of session (name) that match
// says is the one, within d.
func (l *eventLog) wait(t *testing.T, name string, d time.Duration, match func(events.Event) bool) events.Event {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l.mu.Lock()
		for _, e := range l.evs {
			if e.Name == name && match(e) {
				l.mu.Unlock()
				return e
			}
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var seen []string
	for _, e := range l.evs {
		seen = append(seen, fmt.Sprintf("%s/%s", e.Name, e.Type))
	}
	t.Fatalf("no such event of %s; the stream had %v", name, seen)
	return events.Event{}
}

// TestAPIOverHTTP: the API on the Runner's web listener, as a program
// calls it with API tokens made by paddock token create. An operate
// token creates a session with a prompt; the real Claude Code's turn is
// seen on the event stream (started, ended with its usage) and in the
// last turn; a read token may not send a message (403, naming the scope)
// while a drive token does, and claude's next turn answers it; every
// answer is checked against the OpenAPI document the server serves; the
// document's worked examples (create, message, set, approve) are the
// bodies sent; every read route of the document is called and answers as
// described;
// a token never reaches a socket-only route; a revoked token is refused;
// the audit log names the token a message came through.
func TestAPIOverHTTP(t *testing.T) {
	e := newEnv(t)
	login := strings.TrimSpace(e.pd("web"))
	c := &apiClient{t: t, base: login[:strings.Index(login, "/login")]}
	tok := func(scope string) string {
		out, errs, code := e.pdRun("token", "create", "--scope", scope, "--name", "e2e-"+scope)
		if code != 0 || !strings.HasPrefix(out, "pdk_at_") || !strings.Contains(errs, "shown this once") {
			t.Fatalf("token create: %d %q %q", code, out, errs)
		}
		return strings.TrimSpace(out)
	}
	read, drive, operate := tok("read"), tok("drive"), tok("operate")

	if code, b := c.call("", "GET", "/v1/sessions", nil); code != 401 || !strings.Contains(string(b), "paddock token create") {
		t.Fatalf("no token: %d %s", code, b)
	}
	code, raw := c.call(read, "GET", "/v1/openapi.json", nil)
	if code != 200 || json.Unmarshal(raw, &c.doc) != nil {
		t.Fatalf("the document: %d", code)
	}
	var evs eventLog
	evs.follow(t, c.base+"/v1/events", read)

	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	// The document's worked examples are what this test sends, changed
	// only where this machine must differ (the workspace).
	example := func(pattern string, change map[string]any) map[string]any {
		t.Helper()
		method, path, _ := strings.Cut(pattern, " ")
		op, _ := c.doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		ex, ok := op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["example"].(map[string]any)
		if !ok {
			t.Fatalf("%s has no example in the document", pattern)
		}
		for k, v := range change {
			ex[k] = v
		}
		return ex
	}
	create := example("POST /v1/sessions", map[string]any{"workspace": ws, "backend": "local"})
	name, prompt := create["name"].(string), create["prompt"].(string)
	var s struct {
		ID string `json:"id"`
	}
	if code, b := c.call(read, "POST", "/v1/sessions", map[string]any{"name": name}); code != 403 || !strings.Contains(string(b), "needs a token of scope operate") {
		t.Fatalf("create with a read token: %d %s", code, b)
	}
	c.ok(operate, "POST /v1/sessions", "/v1/sessions", create, &s)
	defer e.pdRun("rm", "-f", name)
	started := evs.wait(t, name, 60*time.Second, func(e events.Event) bool { return e.Type == events.TurnStarted })
	ended := evs.wait(t, name, 60*time.Second, func(e events.Event) bool { return e.Type == events.TurnEnded && e.Seq > started.Seq })
	if ended.Usage == nil || ended.Usage.Output == 0 || ended.Requests == 0 {
		t.Fatalf("turn.ended without its usage: %+v", ended)
	}
	evs.wait(t, name, 5*time.Second, func(e events.Event) bool { return e.Type == events.Lifecycle && e.State == "running" })

	var w api.WaitResult
	c.ok(read, "GET /v1/sessions/{ref}/wait", "/v1/sessions/"+name+"/wait?for=waiting&timeout=60s", nil, &w)
	if !w.Met {
		t.Fatalf("wait: %+v", w)
	}
	lastTurn := func(prompt, answer string) {
		t.Helper()
		var tr api.TurnResult
		c.ok(read, "GET /v1/sessions/{ref}/turn", "/v1/sessions/"+name+"/turn", nil, &tr)
		b, _ := json.Marshal(tr.Turn.Parts)
		if tr.Turn.Prompt != prompt || !strings.Contains(string(b), answer) || !tr.Done {
			t.Fatalf("the last turn: prompt %q, done %v, parts %s", tr.Turn.Prompt, tr.Done, b)
		}
	}
	lastTurn(prompt, "hi from the fake server (turn 1)")

	msg := example("POST /v1/sessions/{ref}/message", nil)
	if code, b := c.call(read, "POST", "/v1/sessions/"+name+"/message", msg); code != 403 || !strings.Contains(string(b), "scope is read") {
		t.Fatalf("a message with a read token: %d %s", code, b)
	}
	var m api.MessageResult
	c.ok(drive, "POST /v1/sessions/{ref}/message", "/v1/sessions/"+name+"/message", msg, &m)
	if !m.Accepted && !m.Queued {
		t.Fatalf("message: %+v", m)
	}
	e.waitUserWords(msg["text"].(string), 30*time.Second)
	second := evs.wait(t, name, 60*time.Second, func(e events.Event) bool { return e.Type == events.TurnEnded && e.Seq > ended.Seq })
	c.ok(read, "GET /v1/sessions/{ref}/wait", "/v1/sessions/"+name+"/wait?for=waiting&timeout=60s", nil, &w)
	lastTurn(msg["text"].(string), "hi from the fake server (turn 2)")

	// The egress examples: allowlist with ask, then a name approved for
	// the session's life before anything asks for it.
	c.ok(operate, "POST /v1/sessions/{ref}/set", "/v1/sessions/"+name+"/set", example("POST /v1/sessions/{ref}/set", nil), nil)
	var ap api.ApproveResult
	c.ok(drive, "POST /v1/sessions/{ref}/egress/approve", "/v1/sessions/"+name+"/egress/approve", example("POST /v1/sessions/{ref}/egress/approve", nil), &ap)
	if !ap.Recorded || ap.Rule != "sum.golang.org:443" {
		t.Fatalf("approve: %+v", ap)
	}
	var after struct {
		Egress string `json:"egress"`
		Ask    bool   `json:"egress_ask"`
	}
	c.ok(read, "GET /v1/sessions/{ref}", "/v1/sessions/"+name, nil, &after)
	if after.Egress != "allowlist" || !after.Ask {
		t.Fatalf("after set: %+v", after)
	}

	// Every read route of the document that answers JSON, called as the
	// document says, answers 200 with what its schema describes.
	fill := strings.NewReplacer("{ref}", name, "{id}", s.ID)
	query := map[string]string{
		"/v1/sessions/{ref}/wait": "?for=waiting&timeout=1s",
		"/v1/project":             "?workspace=" + ws,
	}
	called := 0
	for _, r := range api.Routes {
		if r.Method() != "GET" || r.Scope != api.ScopeRead || r.Produces != "" || r.Path() == "/v1/openapi.json" {
			continue
		}
		c.ok(read, r.Pattern, fill.Replace(r.Path())+query[r.Path()], nil, nil)
		called++
	}
	if called < 14 { // health, whoami, sessions, a session, wait, turn, logs, ledger, ports, egress pending and always, usage, project, credential
		t.Fatalf("only %d read routes called", called)
	}
	// Socket-only routes stay the socket's, whatever the token.
	for _, p := range []string{"/v1/sessions/" + name + "/exec", "/v1/tokens"} {
		if code, b := c.call(operate, "POST", p, map[string]any{}); code != 403 || !strings.Contains(string(b), "socket only") {
			t.Fatalf("POST %s with an operate token: %d %s", p, code, b)
		}
	}

	// Lifecycle through operate: sleep, wake, and events for each.
	c.ok(operate, "POST /v1/sessions/{ref}/sleep", "/v1/sessions/"+name+"/sleep", nil, nil)
	asleep := evs.wait(t, name, 30*time.Second, func(e events.Event) bool {
		return e.Type == events.Lifecycle && e.State == "asleep" && e.Seq > second.Seq
	})
	c.ok(operate, "POST /v1/sessions/{ref}/wake", "/v1/sessions/"+name+"/wake", nil, nil)
	evs.wait(t, name, 60*time.Second, func(e events.Event) bool {
		return e.Type == events.Lifecycle && e.State == "running" && e.Seq > asleep.Seq
	})

	// The audit log says which token the message came through.
	sock := filepath.Join(e.dir, "paddock.sock")
	var via string
	_ = api.NewClient(sock).Audit(context.Background(), api.AuditQuery{}, func(a audit.Entry) error {
		if a.Action == audit.ActionMessage && a.SessionName == name {
			via = a.Via
		}
		return nil
	})
	if !strings.HasPrefix(via, "token ") {
		t.Fatalf("the message's audit entry: via %q", via)
	}
	// Revoked: refused from the next request on.
	id := strings.TrimPrefix(via, "token ")
	if out := e.pd("token", "rm", id); !strings.Contains(out, "revoked") {
		t.Fatalf("token rm: %s", out)
	}
	if code, _ := c.call(drive, "GET", "/v1/sessions", nil); code != 401 {
		t.Fatalf("a revoked token: %d", code)
	}
	if ls := e.pd("token", "ls"); strings.Contains(ls, id) || !strings.Contains(ls, "e2e-read") {
		t.Fatalf("token ls: %s", ls)
	}
}

// TestMCP: paddock mcp, driven by the MCP Go SDK's own client over stdio:
// its tools are listed; create_session with a prompt, wait, read_turn
// shows the real Claude Code's turn through the fake upstream;
// send_message, wait, read_turn shows the next; remove leaves nothing.
func TestMCP(t *testing.T) {
	e := newEnv(t)
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	cmd := exec.Command(e.bin, "--state-dir", e.dir, "mcp")
	cmd.Dir = ws
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "create_session") || !strings.Contains(got, "read_turn") || len(names) != 9 {
		t.Fatalf("tools: %s", got)
	}
	call := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		out := strings.Join(text, "\n")
		if res.IsError {
			t.Fatalf("%s: the tool failed: %s", tool, out)
		}
		return out
	}
	const name = "mcp-1"
	if out := call("create_session", map[string]any{"prompt": "say hi", "name": name, "backend": "local"}); !strings.Contains(out, `"name": "mcp-1"`) {
		t.Fatalf("create_session: %s", out)
	}
	defer e.pdRun("rm", "-f", name)
	if out := call("wait", map[string]any{"session": name, "timeout_seconds": 90}); !strings.Contains(out, `"met": true`) {
		t.Fatalf("wait: %s", out)
	}
	if out := call("read_turn", map[string]any{"session": name}); !strings.Contains(out, "hi from the fake server (turn 1)") || !strings.Contains(out, `"prompt": "say hi"`) {
		t.Fatalf("read_turn: %s", out)
	}
	if out := call("send_message", map[string]any{"session": name, "text": "MCP-5521 one more"}); !strings.Contains(out, `"accepted": true`) && !strings.Contains(out, `"queued": true`) {
		t.Fatalf("send_message: %s", out)
	}
	e.waitUserWords("MCP-5521 one more", 30*time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; {
		call("wait", map[string]any{"session": name, "timeout_seconds": 30})
		out := call("read_turn", map[string]any{"session": name})
		if strings.Contains(out, "hi from the fake server (turn 2)") && strings.Contains(out, `"done": true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second turn never showed: %s", out)
		}
	}
	if out := call("list_sessions", nil); !strings.Contains(out, name) {
		t.Fatalf("list_sessions: %s", out)
	}
	// A tool error is the tool's answer, with the Runner's reason.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_turn", Arguments: map[string]any{"session": "no-such"}})
	if err != nil || !res.IsError {
		t.Fatalf("read_turn of no session: %+v %v", res, err)
	}
	call("remove", map[string]any{"session": name})
	if out := call("list_sessions", nil); strings.Contains(out, name) {
		t.Fatalf("after remove: %s", out)
	}
}
