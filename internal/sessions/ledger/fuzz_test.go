package ledger

import (
	"bytes"
	"os"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// FuzzParseTranscript feeds any bytes to the transcript parser: it must
// not fail (the reader never does), must keep within its bounds, and what
// it keeps must join and write.
func FuzzParseTranscript(f *testing.F) {
	for _, name := range []string{"transcript.jsonl", "broken.jsonl"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"assistant","requestId":"r","message":{"id":"m","content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"ls"}}]}}`))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","is_error":true}]}}` + "\n\n\r\n"))
	f.Add([]byte("\xff\n{\n}\n[]\nnull\n"))
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"k","name":"Bash","input":{"command":"echo pdk_st_0123456789abcdef sk-ant-api03-xxxxxxxxxx"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTranscript(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("error on a reader that cannot fail: %v", err)
		}
		if tr.Skipped > tr.Lines || len(tr.Problems) > maxProblems || len(tr.ToolUses) > MaxToolUses {
			t.Fatalf("bounds: %d lines %d skipped %d problems %d calls", tr.Lines, tr.Skipped, len(tr.Problems), len(tr.ToolUses))
		}
		var ids []string
		for id, u := range tr.ToolUses {
			if len(u.Input) > MaxInput || len(u.Command) > MaxInput {
				t.Fatalf("call %q keeps %d bytes of input", id, len(u.Input))
			}
			if credentialShaped.MatchString(u.Command) || credentialShaped.Match(u.Input) {
				t.Fatalf("call %q keeps a credential-shaped string: %q %q", id, u.Command, u.Input)
			}
			ids = append(ids, id)
		}
		rs := Join([]decisionlog.Entry{{Session: "s", RequestID: "r1", ToolUseIDs: ids}, {Session: "s", RequestID: "r2", ToolResultIDs: ids}}, tr)
		var out bytes.Buffer
		for _, format := range []string{FormatJSONL, FormatCSV} {
			if err := Write(&out, format, rs); err != nil {
				t.Fatalf("%s: %v", format, err)
			}
		}
	})
}
