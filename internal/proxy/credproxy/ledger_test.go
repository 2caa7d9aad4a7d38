package credproxy

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/credentials/credential"
)

// TestAnswerIDsRecorded: the decision log notes the answer's message id
// and the ids of the tool_use blocks it asked for (what the ledger joins
// a request to its turn with), from a stream and from a JSON answer, and
// the client gets the answer byte for byte.
func TestAnswerIDsRecorded(t *testing.T) {
	stream := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_led","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":4,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_L1","name":"Bash","input":{}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_L2","name":"Read","input":{}}}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}` + "\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	jsonAnswer := `{"id":"msg_json","type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_J","name":"Bash","input":{"command":"pwd"}}],"usage":{"input_tokens":2,"output_tokens":3}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Request-Id", "req_up")
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonAnswer)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	for i, c := range []struct {
		body, answer, msg string
		ids               []string
	}{
		{`{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"go"}]}`, stream, "msg_led", []string{"toolu_L1", "toolu_L2"}},
		{`{"model":"claude-x","messages":[{"role":"user","content":"go"}]}`, jsonAnswer, "msg_json", []string{"toolu_J"}},
	} {
		resp := h.do("POST", "/v1/messages", c.body, h.authed())
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != c.answer {
			t.Fatalf("%d: the answer changed on its way:\n%s", i, got)
		}
		e := waitEntries(t, h, i+1)[i]
		if e.MessageID != c.msg || !reflect.DeepEqual(e.ToolUseIDs, c.ids) || e.UpstreamRequestID != "req_up" {
			t.Fatalf("%d: message %q, tool uses %v, upstream %q", i, e.MessageID, e.ToolUseIDs, e.UpstreamRequestID)
		}
	}
}
