package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const stream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":7,"cache_creation_input_tokens":3}}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\r\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi \"usage\""}}` + "\r\n\r\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestUsageScannerSSEAnySplit(t *testing.T) {
	for step := 1; step <= len(stream); step += 7 {
		var s UsageScanner
		for i := 0; i < len(stream); i += step {
			s.Write([]byte(stream[i:min(i+step, len(stream))]))
		}
		want := Usage{InputTokens: 25, OutputTokens: 15, CacheReadInputTokens: 7, CacheCreationInputTokens: 3}
		if s.Usage != want || s.Model != "claude-opus-5-5" {
			t.Fatalf("step %d: %+v %q", step, s.Usage, s.Model)
		}
	}
}

func TestUsageScannerSkipsHugeLines(t *testing.T) {
	var s UsageScanner
	s.Write([]byte("data: " + strings.Repeat("x", maxLine*2) + "\n"))
	s.Write([]byte(`data: {"type":"message_delta","usage":{"output_tokens":4}}` + "\n"))
	if s.Usage.OutputTokens != 4 {
		t.Fatalf("%+v", s.Usage)
	}
}

func TestUsageScannerJSON(t *testing.T) {
	s := UsageScanner{JSON: true}
	s.Write([]byte(`{"id":"m","model":"claude-sonnet-5-5","usage":{"input_tokens":3,`))
	s.Write([]byte(`"output_tokens":9}}`))
	s.Close()
	if s.Usage.InputTokens != 3 || s.Usage.OutputTokens != 9 || s.Model != "claude-sonnet-5-5" {
		t.Fatalf("%+v", s)
	}
	c := UsageScanner{JSON: true}
	c.Write([]byte(`{"input_tokens": 42}`))
	c.Close()
	if c.Usage.InputTokens != 42 {
		t.Fatalf("%+v", c)
	}
}

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, 404, NotFound, "no such route", "req_1")
	var b ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 404 || b.Type != "error" || b.Error.Type != NotFound || b.RequestID != "req_1" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %+v", rec.Code, b)
	}
}

func TestSummarize(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"text","text":"x"}]}]}`
	s := Summarize([]byte(body))
	if s.Model != "m" || !s.Stream || len(s.ToolResultIDs) != 1 || s.ToolResultIDs[0] != "toolu_1" {
		t.Fatalf("%+v", s)
	}
	if g := Summarize([]byte("not json")); g.Model != "" || g.Stream || g.ToolResultIDs != nil {
		t.Fatal("garbage summarized")
	}
}

func FuzzUsageScanner(f *testing.F) {
	f.Add([]byte(stream), 5)
	f.Add([]byte(`{"usage":{"input_tokens":1}}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, step int) {
		s := UsageScanner{JSON: step == 0}
		if step <= 0 {
			step = len(data) + 1
		}
		for i := 0; i < len(data); i += step {
			s.Write(data[i:min(i+step, len(data))])
		}
		s.Close()
		Summarize(data)
	})
}

// summarizeReference is Summarize as it was, on json.Unmarshal: the
// definition the fast scanner is held to.
func summarizeReference(body []byte) RequestSummary {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return RequestSummary{}
	}
	sum := RequestSummary{Model: req.Model, Stream: req.Stream}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		// The content's decoding is shared: what the scanner is held to
		// is finding the document's model, stream and last user content.
		sum.ToolResultIDs = toolResultIDs(m.Content)
		break
	}
	return sum
}

// repeatsMessages reports whether a top-level object has more than one key
// that json.Unmarshal would take for "messages".
func repeatsMessages(body []byte) bool {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if dec.Decode(&top) != nil {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	n, depth := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			return n > 1
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && strings.EqualFold(v, "messages") {
				n++
				// Skip the value so its strings are not taken for keys.
				var skip json.RawMessage
				if d.Decode(&skip) != nil {
					return n > 1
				}
			}
		}
	}
}

var summarizeSeeds = []string{
	`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"text","text":"x"}]}]}`,
	`{"MODEL":"a","model":null,"Stream":false,"stream":null}`,
	`{"mo\u0064el":"\u00e9t\u00e9","stream":true}`,
	`{"model":5}`, `{"stream":"true"}`, `{"messages":{}}`, `{"messages":[5]}`, `{"messages":[null,{"role":"user"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]},{"role":"user","content":"x"}]}`,
	`{"messages":[{"role":"user","role":null,"content":[{"type":"tool_result","tool_use_id":"a"}],"content":null}]}`,
	`null`, `[]`, `"x"`, `{}`, `{"model":"m"} x`, `{"model":"m",}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x01"}`,
	`{"a":"\q"}`, `{"a":"\u12"}`, `{"a":tru}`, `{"model":"\xff\xfe"}`, `{"a":[1,2,]}`, `{"ſtream":true,"Kmodel":1}`,
	`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}],"Messages":null}`,
}

func TestSummarizeMatchesReference(t *testing.T) {
	for _, s := range summarizeSeeds {
		got, want := Summarize([]byte(s)), summarizeReference([]byte(s))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", s, got, want)
		}
	}
	// Long strings (str reads shortRun bytes one by one, then searches and
	// checks 16 at a time): each byte that ends or breaks a run, or should
	// not, at every offset of the byte-by-byte part and of the words after
	// it, alone, after an escaped quote far before it (the string's end
	// found once, then passed), and in a string never closed.
	for _, special := range []string{`\"`, `\\`, `\n`, `\u00e9`, "\x00", "\x01", "\x1f", "\x20", "\x21", "\x5b", "\x5c", "\x5d", "\x7f", "\x80", "\xff", "é", `"`} {
		for pos := 0; pos < 64; pos++ {
			for _, body := range []string{
				`{"model":"` + strings.Repeat("a", pos) + special + strings.Repeat("b", 17) + `","stream":true}`,
				`{"model":"` + strings.Repeat("a", pos) + special + strings.Repeat("b", 45) + `","stream":true}`,
				`{"model":"` + strings.Repeat("c", 40) + `\"` + strings.Repeat("a", pos) + special + strings.Repeat("b", 33) + `\"x","stream":true}`,
				`{"model":"` + strings.Repeat("a", pos) + special + strings.Repeat("b", 40),
			} {
				if got, want := Summarize([]byte(body)), summarizeReference([]byte(body)); !reflect.DeepEqual(got, want) {
					t.Errorf("%q:\n got  %+v\n want %+v", body, got, want)
				}
			}
		}
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if got, want := Summarize([]byte(`{"a":`+deep+`,"model":"m"}`)), summarizeReference([]byte(`{"a":`+deep+`,"model":"m"}`)); !reflect.DeepEqual(got, want) {
		t.Errorf("deep nesting: got %+v want %+v", got, want)
	}
}

// FuzzSummarize holds the fast scanner to json.Unmarshal's answer on any
// bytes (but a repeated "messages", documented).
func FuzzSummarize(f *testing.F) {
	for _, s := range summarizeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, want := Summarize(body), summarizeReference(body)
		if !reflect.DeepEqual(got, want) && !repeatsMessages(body) {
			t.Fatalf("%q:\n got  %+v\n want %+v", body, got, want)
		}
	})
}

func BenchmarkSummarize(b *testing.B) {
	var msgs []map[string]any
	for i := 0; i < 40; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": strings.Repeat("lorem ipsum ", 60)}}})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_" + strings.Repeat("x", i%5), "name": "Bash", "input": map[string]any{"command": "ls"}}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_39", "content": "ok"}}})
	body, _ := json.Marshal(map[string]any{"model": "claude-opus-5-5", "stream": true, "max_tokens": 32000, "system": strings.Repeat("sys ", 2000), "messages": msgs})
	for _, c := range []struct {
		name string
		f    func([]byte) RequestSummary
	}{{"scanner", Summarize}, {"json.Unmarshal", summarizeReference}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				c.f(body)
			}
		})
	}
}

// jsonUsageReference is UsageScanner.Close's reading as it was, on
// json.Unmarshal: the definition scanJSONUsage is held to.
func jsonUsageReference(b []byte) (jsonUsage, bool) {
	var m struct {
		Model       string `json:"model"`
		Usage       Usage  `json:"usage"`
		InputTokens int64  `json:"input_tokens"`
		ID          any    `json:"id"`
	}
	if json.Unmarshal(b, &m) != nil {
		return jsonUsage{}, false
	}
	id, _ := m.ID.(string)
	return jsonUsage{Model: m.Model, ID: id, Usage: m.Usage, InputTokens: m.InputTokens}, true
}

var jsonUsageSeeds = []string{
	`{"id":"msg_a","id":5}`, `{"id":5,"ID":"msg_b"}`, `{"id":null}`, `{"id":"\u00e9\ud800"}`, `{"id":{"x":"y"}}`,
	`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":7,"cache_creation_input_tokens":2}}`,
	`{"input_tokens":1234}`,
	`{"usage":{"input_tokens":1},"usage":{"output_tokens":2}}`,
	`{"usage":{"input_tokens":1},"usage":null,"model":null}`,
	`{"usage":{"input_tokens":1.5}}`,
	`{"usage":{"input_tokens":1e2}}`,
	`{"usage":{"input_tokens":9223372036854775808}}`,
	`{"usage":{"input_tokens":-0}}`,
	`{"usage":{"input_tokens":"3"}}`,
	`{"usage":[1]}`,
	`{"MODEL":"a","Usage":{"INPUT_TOKENS":4}}`,
	`{"model":"\u00e9\ud800x"}`,
	"{\"model\":\"\xff\"}",
	`{"model":"a"} x`,
	`null`,
	`[]`,
	`"s"`,
	`{"model":"a",}`,
	`{"model":1}`,
	` {"input_tokens":null} `,
}

func TestJSONUsageMatchesReference(t *testing.T) {
	for _, s := range jsonUsageSeeds {
		got, gok := scanJSONUsage([]byte(s))
		want, wok := jsonUsageReference([]byte(s))
		if gok != wok || got != want {
			t.Errorf("%s:\n got  %+v %v\n want %+v %v", s, got, gok, want, wok)
		}
	}
}

// FuzzJSONUsage holds the answer scanner to json.Unmarshal on any bytes.
func FuzzJSONUsage(f *testing.F) {
	for _, s := range jsonUsageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gok := scanJSONUsage(b)
		want, wok := jsonUsageReference(b)
		if gok != wok || got != want {
			t.Fatalf("%q:\n got  %+v %v\n want %+v %v", b, got, gok, want, wok)
		}
	})
}

// toolStream is an answer with two tool_use blocks, as the API streams
// one: the input arrives in deltas after each block's start.
const toolStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_tools","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"tool_use"}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_A","name":"Bash","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}` + "\n\n" +
	"event: content_block_start\r\n" + `data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_B","name":"Read","input":{}}}` + "\r\n\r\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}` + "\n\n"

func TestUsageScannerToolUses(t *testing.T) {
	for step := 1; step <= len(toolStream); step += 11 {
		var s UsageScanner
		for i := 0; i < len(toolStream); i += step {
			s.Write([]byte(toolStream[i:min(i+step, len(toolStream))]))
		}
		if s.ToolUseIDs != nil {
			t.Fatalf("step %d: ids decoded on the stream's path: %v", step, s.ToolUseIDs)
		}
		s.Close()
		if s.MessageID != "msg_tools" || !reflect.DeepEqual(s.ToolUseIDs, []string{"toolu_A", "toolu_B"}) || s.Usage.OutputTokens != 30 {
			t.Fatalf("step %d: %q %v %+v", step, s.MessageID, s.ToolUseIDs, s.Usage)
		}
	}
	j := UsageScanner{JSON: true}
	j.Write([]byte(`{"id":"msg_j","type":"message","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"toolu_J","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":1}}`))
	j.Close()
	if j.MessageID != "msg_j" || !reflect.DeepEqual(j.ToolUseIDs, []string{"toolu_J"}) {
		t.Fatalf("json: %q %v", j.MessageID, j.ToolUseIDs)
	}
	// Many blocks: the ids stop at MaxToolUseIDs, the kept lines at maxBlockStarts.
	var many UsageScanner
	for i := range 2000 {
		many.Write([]byte(`data: {"type":"content_block_start","index":` + strconv.Itoa(i) + `,"content_block":{"type":"tool_use","id":"toolu_` + strconv.Itoa(i) + `","name":"Bash","input":{}}}` + "\n"))
	}
	if len(many.blockStarts) > maxBlockStarts {
		t.Fatalf("kept %d bytes of block starts", len(many.blockStarts))
	}
	many.Close()
	if len(many.ToolUseIDs) != MaxToolUseIDs || many.ToolUseIDs[0] != "toolu_0" {
		t.Fatalf("%d ids, first %q", len(many.ToolUseIDs), many.ToolUseIDs[0])
	}
}

// BenchmarkUsageScannerStream is the stream path's cost of a turn with
// text and tool calls (Write, per byte), and of Close after it.
func BenchmarkUsageScannerStream(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(toolStream)
	for range 200 {
		sb.WriteString("event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"some words of an answer, as they come"}}` + "\n\n")
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var s UsageScanner
		for i := 0; i < len(data); i += 4096 {
			s.Write(data[i:min(i+4096, len(data))])
		}
		s.Close()
	}
}

// BenchmarkSummarizeConversation is Summarize on the shape of body Claude
// Code sends late in a session: a megabyte of conversation, as prose
// (long plain strings) and as code (a newline or quote escaped every few
// dozen bytes, where each escape restarts the search for the string's
// end).
func BenchmarkSummarizeConversation(b *testing.B) {
	for _, c := range []struct{ name, turn string }{
		{"prose", strings.Repeat("hello world, this is text. ", 75)},
		{"code", strings.Repeat(`func main() {\n\tfmt.Println(\"hi\")\n}\n`, 50)},
	} {
		var sb strings.Builder
		sb.WriteString(`{"model":"m","stream":true,"messages":[`)
		for i := 0; sb.Len() < 1<<20; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`{"role":"user","content":"` + c.turn + `"}`)
		}
		sb.WriteString(`]}`)
		body := []byte(sb.String())
		if Summarize(body).Model != "m" {
			b.Fatal("the body does not summarize")
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				Summarize(body)
			}
		})
	}
}
