package anthropic

import (
	"encoding/json"
	"net/http/httptest"
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
