package metrics

import (
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// BenchmarkRecord is the metrics' share of one forwarded request (the
// Runner records every request into them).
func BenchmarkRecord(b *testing.B) {
	m := New(nil)
	e := decisionlog.Entry{Time: time.Now(), Session: "s1", Method: "POST", Path: "/v1/messages?beta=true",
		Decision: "forwarded", Status: 200, DurationMS: 12.5, Stream: true, Model: "claude-x",
		InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, CredentialUser: "alice"}
	b.ReportAllocs()
	for b.Loop() {
		m.Record(e)
	}
}
