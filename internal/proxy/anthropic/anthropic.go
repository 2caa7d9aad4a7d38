// Package anthropic holds the small parts of the Messages API wire format
// that paddock reads or writes itself: the error body, the usage carried by
// responses (JSON and SSE), and a summary of a request body. It never
// rewrites a message; the proxy streams bytes through untouched.
package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Error types of the Messages API, with the status each goes with.
const (
	InvalidRequest  = "invalid_request_error" // 400
	Authentication  = "authentication_error"  // 401
	Permission      = "permission_error"      // 403
	NotFound        = "not_found_error"       // 404
	RequestTooLarge = "request_too_large"     // 413
	RateLimit       = "rate_limit_error"      // 429
	APIError        = "api_error"             // 500, 502, 503
	Overloaded      = "overloaded_error"      // 529
)

// ErrorBody is the JSON shape of every API error.
type ErrorBody struct {
	Type  string      `json:"type"` // always "error"
	Error ErrorDetail `json:"error"`
	// RequestID is paddock's id for the request, to find its log line.
	RequestID string `json:"request_id,omitempty"`
}

// ErrorDetail is the inner object of ErrorBody.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// WriteError answers with an API error. msg must not contain a secret;
// callers pass fixed text or values already known to be safe.
func WriteError(w http.ResponseWriter, status int, typ, msg, requestID string) {
	b, _ := json.Marshal(ErrorBody{Type: "error", Error: ErrorDetail{Type: typ, Message: msg}, RequestID: requestID})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Usage is the token accounting the API reports.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// merge folds a later usage report into u. message_delta events carry
// cumulative counts, so a non-zero later value replaces the earlier one.
func (u *Usage) merge(o Usage) {
	if o.InputTokens != 0 {
		u.InputTokens = o.InputTokens
	}
	if o.OutputTokens != 0 {
		u.OutputTokens = o.OutputTokens
	}
	if o.CacheCreationInputTokens != 0 {
		u.CacheCreationInputTokens = o.CacheCreationInputTokens
	}
	if o.CacheReadInputTokens != 0 {
		u.CacheReadInputTokens = o.CacheReadInputTokens
	}
}

// maxLine bounds the SSE line the scanner keeps; longer lines (big text
// deltas) are skipped, since usage never travels in them.
const maxLine = 64 << 10

// UsageScanner reads usage and the model from a response as it streams
// past, without changing or holding it. Feed it with Write; it accepts SSE
// (text/event-stream) or, when JSON is set, one JSON message body.
type UsageScanner struct {
	JSON bool

	Usage Usage
	Model string
	// MessageID is the answer's message id; ToolUseIDs are the ids of its
	// tool_use blocks, in order, at most MaxToolUseIDs. Both are complete
	// only after Close: the stream path only sets lines aside for them.
	MessageID  string
	ToolUseIDs []string

	line    []byte
	skip    bool // the current line grew past maxLine
	jsonBuf bytes.Buffer
	// blockStarts holds the content_block_start lines of tool_use blocks,
	// newline-separated, at most maxBlockStarts bytes, for Close to decode.
	blockStarts []byte
}

// MaxToolUseIDs bounds the tool_use ids one answer is noted with.
const MaxToolUseIDs = 128

// maxBlockStarts bounds the tool_use block starts kept of one stream (a
// start line is about 150 bytes: its input comes in later deltas).
const maxBlockStarts = 64 << 10

// Write implements io.Writer; it never fails.
func (s *UsageScanner) Write(p []byte) (int, error) {
	n := len(p)
	if s.JSON {
		if s.jsonBuf.Len()+len(p) <= 4<<20 {
			s.jsonBuf.Write(p)
		}
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			return n, nil
		}
		s.add(p[:i])
		if !s.skip {
			s.line2(bytes.TrimSuffix(s.line, []byte("\r")))
		}
		s.line, s.skip = s.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (s *UsageScanner) add(p []byte) {
	if s.skip {
		return
	}
	if len(s.line)+len(p) > maxLine {
		s.skip, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

var (
	dataPrefix        = []byte("data:")
	contentBlockStart = []byte(`"content_block_start"`)
	toolUseType       = []byte(`"tool_use"`)
)

func (s *UsageScanner) line2(l []byte) {
	if !bytes.HasPrefix(l, dataPrefix) {
		return
	}
	if bytes.Contains(l, contentBlockStart) && bytes.Contains(l, toolUseType) {
		// Set aside, decoded by Close after the answer has gone out.
		if len(s.blockStarts)+len(l)+1 <= maxBlockStarts {
			s.blockStarts = append(append(s.blockStarts, l[len(dataPrefix):]...), '\n')
		}
		return
	}
	if !bytes.Contains(l, []byte(`"usage"`)) && !bytes.Contains(l, []byte(`"message_start"`)) {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string `json:"id"`
			Model string `json:"model"`
			Usage Usage  `json:"usage"`
		} `json:"message"`
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(l[len(dataPrefix):]), &ev) != nil {
		return
	}
	if ev.Message != nil {
		if ev.Message.Model != "" {
			s.Model = ev.Message.Model
		}
		if ev.Message.ID != "" {
			s.MessageID = ev.Message.ID
		}
		s.Usage.merge(ev.Message.Usage)
	}
	if ev.Usage != nil {
		s.Usage.merge(*ev.Usage)
	}
}

// Close finishes the answer: a JSON body is read, and the tool_use
// blocks a stream started are decoded. It runs once the answer has been
// sent, so none of that is on the stream's path.
func (s *UsageScanner) Close() {
	if !s.JSON {
		s.closeStream()
		return
	}
	if s.jsonBuf.Len() == 0 {
		return
	}
	b := s.jsonBuf.Bytes()
	if m, ok := scanJSONUsage(b); ok {
		s.Model = m.Model
		s.MessageID = m.ID
		s.Usage.merge(m.Usage)
		if m.InputTokens != 0 { // count_tokens answers {"input_tokens": N}
			s.Usage.InputTokens = m.InputTokens
		}
		if bytes.Contains(b, toolUseType) { // else no block to decode
			var msg struct {
				Content []contentBlock `json:"content"`
			}
			if json.Unmarshal(b, &msg) == nil {
				for _, c := range msg.Content {
					s.addToolUse(c)
				}
			}
		}
	}
	s.jsonBuf.Reset()
}

// contentBlock is what the scanner reads of a content block.
type contentBlock struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (s *UsageScanner) addToolUse(c contentBlock) {
	if c.Type == "tool_use" && c.ID != "" && len(s.ToolUseIDs) < MaxToolUseIDs {
		s.ToolUseIDs = append(s.ToolUseIDs, c.ID)
	}
}

// closeStream decodes the tool_use block starts set aside.
func (s *UsageScanner) closeStream() {
	rest := s.blockStarts
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		line := rest[:i]
		rest = rest[i+1:]
		var ev struct {
			Type         string       `json:"type"`
			ContentBlock contentBlock `json:"content_block"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Type == "content_block_start" {
			s.addToolUse(ev.ContentBlock)
		}
	}
	s.blockStarts = nil
}

// RequestSummary is what paddock notes of a request body.
type RequestSummary struct {
	Model  string
	Stream bool
	// ToolResultIDs are the tool_use_id of every tool_result block in the
	// last user message, so a request joins the Claude Code transcript.
	ToolResultIDs []string
}
