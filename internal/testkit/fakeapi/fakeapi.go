// Package fakeapi is a fake Anthropic Messages API for tests and benchmarks:
// the far side paddock cannot reach from its test machines. It speaks the
// API faithfully enough for the real Claude Code CLI: streaming SSE text,
// a scripted Bash tool_use turn, non-streaming messages, count_tokens,
// models, and 401 in the API's error shape for a wrong credential. Every
// request is recorded for tests to assert on.
//
// Scripting: a user text containing "TOOLTEST" in a request that offers a
// tool named Bash, whose last message carries no tool_result, gets a Bash
// tool_use; the command is what follows "TOOLTEST:" up to the end of the
// line, or DefaultToolCommand. Every other request gets a text answer,
// "hi from the fake server (turn N)", N being the number of user messages
// that carry text, so a resumed conversation is visible on screen. A test
// may also script a turn of several tool calls of any tool (SetSteps).
package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultToolCommand is run by the scripted tool turn when the prompt names none.
const DefaultToolCommand = "echo hello > /tmp/tool-proof.txt"

// Request is one recorded request.
type Request struct {
	Time     time.Time
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	// CredentialHeader is "x-api-key", "authorization" or "" (none);
	// Credential is the value with any "Bearer " removed. Both hold fake
	// test credentials only.
	CredentialHeader string
	Credential       string
	Body             []byte
	Model            string
	Stream           bool
	Tools            []string
	Messages         int
	LastToolResult   bool
	Status           int
	// Fault is the fault injected into this request, if any.
	Fault Fault
	// Ended is when the server finished with the request: its answer
	// written, or (for a stall) the client gone.
	Ended time.Time
	// Usage is what the answer to a POST /v1/messages reported, final
	// counts (zero for any other request, a fault, or an early answer).
	Usage Usage
}

// Usage is a message's token usage as the API reports it.
type Usage struct {
	InputTokens, OutputTokens, CacheReadTokens, CacheCreationTokens int64
}

func (u Usage) json() map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": u.CacheCreationTokens, "cache_read_input_tokens": u.CacheReadTokens}
}

// startUsage is message_start's usage of a fault's or an early answer.
var startUsage = Usage{InputTokens: 25, OutputTokens: 1}

// usageOf is what the answer to a request of n messages reports: 25 input
// tokens, out output tokens, and cache tokens of every kind (a cache write
// of 64, reads growing with the conversation) so that each kind is seen.
func usageOf(n int, out int64) Usage {
	return Usage{InputTokens: 25, OutputTokens: out, CacheCreationTokens: 64, CacheReadTokens: 128 * int64(max(n-1, 0))}
}

// outputOf is the output tokens the message_delta of events reports.
func outputOf(events []event) int64 {
	for _, ev := range events {
		if u, ok := ev.data["usage"].(map[string]any); ok && ev.name == "message_delta" {
			if n, ok := u["output_tokens"].(int); ok {
				return int64(n)
			}
		}
	}
	return 1
}

// Server is an http.Handler. Set fields before serving.
type Server struct {
	// API answers GET requests to the API host's own routes (the ones
	// Claude Code calls directly: /api/oauth/usage, …), path → JSON body,
	// with the same credential check as /v1/*. Set it before serving.
	API map[string]string
	// Credentials lists the accepted credential values; empty accepts any
	// non-empty credential. Checked on /v1/* only, like the real API.
	Credentials []string
	// Validate, if set, is asked about a credential not in Credentials:
	// an OAuth server's access tokens (fakeoauth.Server.Validate). An
	// expired one gets the API's 401 "OAuth token has expired".
	Validate func(credential string) (known, expired bool)
	// EventDelay is slept between SSE events (benchmarks of event delay).
	// Set it before serving, or with SetPace while serving.
	EventDelay time.Duration
	// TextDeltas is the number of text_delta events in a streamed answer
	// (default 2). Set it before serving, or with SetPace while serving.
	TextDeltas int
	// AnswerEarly sends the response before reading the request body
	// (the golang/go#40747 shape), then discards the body.
	AnswerEarly bool

	mu      sync.Mutex
	reqs    []Request
	n       int
	started int
	faults  []pendingFault
	steps   []Step            // SetSteps
	given   map[string]string // tool_use id → the scripted words it was given for
	gaveN   int               // tool calls given, for their ids
}

// Fault is a way the upstream fails a POST /v1/messages, as the real one
// can: after authentication, on a request that is otherwise good.
type Fault string

const (
	// FaultStatus500 answers 500 with the API's api_error body.
	FaultStatus500 Fault = "500"
	// FaultOverloaded answers 529 with the API's overloaded_error body.
	FaultOverloaded Fault = "529"
	// FaultReset closes the connection without a byte of answer.
	FaultReset Fault = "reset"
	// FaultSlowHeaders waits the fault's delay (or until the client goes
	// away) before answering normally.
	FaultSlowHeaders Fault = "slow-headers"
	// FaultStall begins a stream — headers, message_start, one
	// text_delta — then sends nothing more until the client goes away.
	FaultStall Fault = "stall"
)

type pendingFault struct {
	f     Fault
	delay time.Duration
}

// InjectFault makes the next n POST /v1/messages requests that pass
// authentication fail with f; delay is FaultSlowHeaders' wait. Faults
// queue in order. Safe to call while serving.
func (s *Server) InjectFault(f Fault, n int, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		s.faults = append(s.faults, pendingFault{f, delay})
	}
}

// takeFault pops the next injected fault, if any.
func (s *Server) takeFault() (pendingFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return pendingFault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

// fail applies fault f to a request; it returns the status answered (0
// for none) and whether the request is finished.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, rec *Request, f pendingFault) (int, bool) {
	rec.Fault = f.f
	switch f.f {
	case FaultStatus500:
		return writeError(w, 500, "api_error", "Internal server error"), true
	case FaultOverloaded:
		return writeError(w, 529, "overloaded_error", "Overloaded"), true
	case FaultReset:
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // an RST, not a FIN
			}
			c.Close()
		}
		return 0, true
	case FaultSlowHeaders:
		select {
		case <-time.After(f.delay):
			return 0, false
		case <-r.Context().Done():
			return 0, true
		}
	case FaultStall:
		s.stream(w, rec.Model, startUsage, textEvents("stalled", 1)[:3])
		<-r.Context().Done()
		return 200, true
	}
	return 0, false
}

// New returns a server that accepts the given credentials.
func New(credentials ...string) *Server { return &Server{Credentials: credentials} }

// Requests returns a copy of the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// Started returns how many requests have arrived, finished or not. A
// request is recorded (Requests) only once the server is done with it.
func (s *Server) Started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// WaitFor waits until at least n requests were recorded, or d passes.
func (s *Server) WaitFor(n int, d time.Duration) []Request {
	deadline := time.Now().Add(d)
	for {
		r := s.Requests()
		if len(r) >= n || time.Now().After(deadline) {
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) add(r Request) {
	r.Ended = time.Now()
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.n++
	s.mu.Unlock()
}

func (s *Server) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
	rec := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		rec.CredentialHeader, rec.Credential = "x-api-key", k
	} else if a := r.Header.Get("Authorization"); a != "" {
		rec.CredentialHeader, rec.Credential = "authorization", strings.TrimPrefix(a, "Bearer ")
	}
	w.Header().Set("Request-Id", fmt.Sprintf("req_fake_%d", s.nextID()))
	if s.AnswerEarly && r.Method == http.MethodPost && r.URL.Path == "/v1/messages" {
		// Full duplex lets this server read the body after it has begun
		// to answer, so its own connection stays reusable.
		_ = http.NewResponseController(w).EnableFullDuplex()
		rec.Status = 200
		s.add(rec)
		s.stream(w, "claude-fake", startUsage, textEvents("hi early", s.textDeltas()))
		_, _ = io.Copy(io.Discard, r.Body)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec.Body = body
	summarize(&rec)
	if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" && s.authorized(&rec) {
		if f, ok := s.takeFault(); ok {
			if status, done := s.fail(w, r, &rec, f); done {
				rec.Status = status
				s.add(rec)
				return
			}
		}
	}
	rec.Status = s.handle(w, r, &rec)
	s.add(rec)
}

// SetPace sets EventDelay and TextDeltas; safe while serving.
func (s *Server) SetPace(delay time.Duration, deltas int) {
	s.mu.Lock()
	s.EventDelay, s.TextDeltas = delay, deltas
	s.mu.Unlock()
}

func (s *Server) pace() (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.EventDelay, s.TextDeltas
}

func (s *Server) textDeltas() int {
	if _, n := s.pace(); n > 0 {
		return n
	}
	return 2
}

func (s *Server) authorized(rec *Request) bool {
	if rec.Credential == "" {
		return false
	}
	if len(s.Credentials) == 0 && s.Validate == nil {
		return true
	}
	for _, c := range s.Credentials {
		if c == rec.Credential {
			return true
		}
	}
	return false
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, rec *Request) int {
	if r.Method == http.MethodHead && r.URL.Path == "/api/hello" {
		w.WriteHeader(200)
		return 200
	}
	answer, isAPI := s.API[r.URL.Path]
	if !strings.HasPrefix(r.URL.Path, "/v1/") && (!isAPI || r.Method != http.MethodGet) {
		return writeError(w, 404, "not_found_error", "Not found")
	}
	known, expired := s.authorized(rec), false
	if !known && s.Validate != nil {
		known, expired = s.Validate(rec.Credential)
	}
	if expired {
		return writeError(w, 401, "authentication_error", "OAuth token has expired. Please obtain a new token or refresh your existing token.")
	}
	if !known {
		msg := "invalid x-api-key"
		if rec.CredentialHeader == "authorization" {
			msg = "Invalid bearer token"
		}
		return writeError(w, 401, "authentication_error", msg)
	}
	if isAPI {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, answer)
		return 200
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		return s.messages(w, rec)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		return writeJSON(w, 200, map[string]any{"input_tokens": 10 + len(rec.Body)/4})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		models := []map[string]any{}
		for _, id := range []string{"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-4-5"} {
			models = append(models, map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2026-01-01T00:00:00Z"})
		}
		return writeJSON(w, 200, map[string]any{"data": models, "has_more": false, "first_id": "claude-opus-5-5", "last_id": "claude-haiku-4-5"})
	}
	return writeError(w, 404, "not_found_error", "Not found")
}

func (s *Server) messages(w http.ResponseWriter, rec *Request) int {
	var req msgRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil || req.Model == "" {
		return writeError(w, 400, "invalid_request_error", "model: Field required")
	}
	model := req.Model
	var events []event
	var full map[string]any
	if st, k, words, scripted := s.nextStep(&req); scripted {
		if st.Name != "" {
			id := s.give(k, words)
			events = stepEvents(id, st)
			full = message(model, []any{map[string]any{"type": "tool_use", "id": id, "name": st.Name, "input": st.Input}}, "tool_use")
		} else {
			events = textEvents(StepsDone, s.textDeltas())
			full = message(model, []any{map[string]any{"type": "text", "text": StepsDone}}, "end_turn")
		}
	} else if cmd, ok := wantsTool(&req, rec); ok {
		events = toolEvents(cmd)
		full = message(model, []any{map[string]any{"type": "tool_use", "id": "toolu_fake_01", "name": "Bash",
			"input": map[string]any{"command": cmd, "description": "Run the scripted test command"}}}, "tool_use")
	} else {
		text := answerText(&req, rec)
		events = textEvents(text, s.textDeltas())
		full = message(model, []any{map[string]any{"type": "text", "text": text}}, "end_turn")
	}
	if !req.Stream {
		rec.Usage = usageOf(rec.Messages, 12)
		full["usage"] = rec.Usage.json()
		return writeJSON(w, 200, full)
	}
	rec.Usage = usageOf(rec.Messages, outputOf(events))
	s.stream(w, model, rec.Usage, events)
	return 200
}

type event struct {
	name string
	data map[string]any
}

// stream answers with message_start (u's usage but 1 output token, as
// the API does) and then body, whose message_delta says the output.
func (s *Server) stream(w http.ResponseWriter, model string, u Usage, body []event) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	all := append([]event{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake_01", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": Usage{InputTokens: u.InputTokens, OutputTokens: 1, CacheReadTokens: u.CacheReadTokens, CacheCreationTokens: u.CacheCreationTokens}.json(),
	}}}}, body...)
	var buf bytes.Buffer
	delay, _ := s.pace()
	for i, ev := range all {
		if i > 0 && delay > 0 {
			time.Sleep(delay)
		}
		buf.Reset()
		b, _ := json.Marshal(ev.data)
		fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", ev.name, b)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func textEvents(text string, deltas int) []event {
	ev := []event{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for _, part := range split(text, deltas) {
		ev = append(ev, event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": part}}})
	}
	return append(ev,
		event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		event{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 12}}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
}

func toolEvents(cmd string) []event {
	input, _ := json.Marshal(map[string]any{"command": cmd, "description": "Run the scripted test command"})
	parts := split(string(input), 2)
	ev := []event{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_fake_01", "name": "Bash", "input": map[string]any{}}}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for _, p := range parts {
		ev = append(ev, event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}}})
	}
	return append(ev,
		event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		event{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 30}}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
}

// split cuts s into n pieces at character boundaries (the last may be longer).
func split(s string, n int) []string {
	r := []rune(s)
	if n < 1 {
		n = 1
	}
	if len(r) < n {
		return []string{s}
	}
	out := make([]string, 0, n)
	size := len(r) / n
	for i := 0; i < n-1; i++ {
		out = append(out, string(r[i*size:(i+1)*size]))
	}
	return append(out, string(r[(n-1)*size:]))
}

func message(model string, content []any, stop string) map[string]any {
	return map[string]any{"id": "msg_fake_01", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 25, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status
}

func writeError(w http.ResponseWriter, status int, typ, msg string) int {
	return writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

type msgRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type block struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	ToolUseID string `json:"tool_use_id"`
}

func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func summarize(rec *Request) {
	var req msgRequest
	if json.Unmarshal(rec.Body, &req) != nil {
		return
	}
	rec.Model, rec.Stream, rec.Messages = req.Model, req.Stream, len(req.Messages)
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	// The last message answers a tool when it carries a tool_result and
	// no new words of the user (Claude Code may merge both into one
	// message, e.g. after --resume).
	if n := len(req.Messages); n > 0 {
		result, words := false, false
		for _, b := range blocks(req.Messages[n-1].Content) {
			switch {
			case b.Type == "tool_result":
				result = true
			case b.Type == "text" && !isReminder(b.Text):
				words = true
			}
		}
		rec.LastToolResult = result && !words
	}
}

func wantsTool(req *msgRequest, rec *Request) (string, bool) {
	hasBash := false
	for _, t := range rec.Tools {
		hasBash = hasBash || t == "Bash"
	}
	if !hasBash || rec.LastToolResult {
		return "", false
	}
	// Only the latest user message decides, so an old TOOLTEST in the
	// history does not repeat the tool turn.
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role != "user" {
			continue
		}
		for _, b := range blocks(req.Messages[i].Content) {
			if b.Type != "text" {
				continue
			}
			if i := strings.Index(b.Text, "TOOLTEST"); i >= 0 {
				rest := b.Text[i+len("TOOLTEST"):]
				if cmd, ok := strings.CutPrefix(rest, ":"); ok {
					cmd, _, _ = strings.Cut(cmd, "\n")
					if cmd = strings.TrimSpace(cmd); cmd != "" {
						return cmd, true
					}
				}
				return DefaultToolCommand, true
			}
		}
		// The CLI may put its own text (reminders) in the same message;
		// keep looking only within the latest user turn.
		return "", false
	}
	return "", false
}

func isReminder(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "<system-reminder>")
}

func answerText(req *msgRequest, rec *Request) string {
	if rec.LastToolResult {
		return "The tool ran. Done."
	}
	turns := 0
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "text" && !isReminder(b.Text) {
				turns++
				break
			}
		}
	}
	return fmt.Sprintf("hi from the fake server (turn %d)", turns)
}

// UserWords is what the person said in the request's last user message
// (Claude Code may put a system message after it): its text blocks but
// Claude Code's own reminders, joined by newlines; "" for a request that
// is not a Messages call or has no such words.
func (r Request) UserWords() string {
	var req msgRequest
	if json.Unmarshal(r.Body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role != "user" {
			continue
		}
		var words []string
		for _, b := range blocks(req.Messages[i].Content) {
			if b.Type == "text" && !isReminder(b.Text) {
				words = append(words, b.Text)
			}
		}
		return strings.Join(words, "\n")
	}
	return ""
}
