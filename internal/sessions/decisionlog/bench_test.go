package decisionlog

import (
	"testing"
	"time"
)

// BenchmarkRecord is the per-session log's share of one proxied request:
// the entry checked, encoded and appended to its file.
func BenchmarkRecord(b *testing.B) {
	d, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	e := Entry{Time: time.Now(), Session: "sess-0123456789ab", RequestID: "req_abc_1", Method: "POST", Path: "/v1/messages?beta=true",
		Decision: "forwarded", Status: 200, DurationMS: 12.5, Stream: true, Model: "claude-x", BytesIn: 1000, BytesOut: 5000,
		InputTokens: 100, OutputTokens: 20, CredentialUser: "alice", MessageID: "msg_01", ToolUseIDs: []string{"toolu_1"}}
	b.ReportAllocs()
	for b.Loop() {
		d.Record(e)
	}
}
