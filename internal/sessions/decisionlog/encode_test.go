package decisionlog

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func checkAppendEntry(t *testing.T, e *Entry) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, ok := appendEntry(nil, e)
	if ok != (werr == nil) || ok && !bytes.Equal(got, want) {
		t.Fatalf("entry %+v:\n got  %s (%v)\n want %s (%v)", e, got, ok, want, werr)
	}
}

func TestAppendEntryMatchesMarshal(t *testing.T) {
	full := Entry{Time: time.Date(2026, 11, 29, 18, 0, 0, 123456789, time.UTC), Kind: "egress", Host: "example.com", Port: 443,
		Addr: "1.2.3.4:443", Rule: "allow", Session: "s1", RequestID: "req_1", Method: "POST", Path: "/v1/messages?beta=true",
		Decision: "forwarded", Reason: "client went away", Status: 200, BytesIn: 90, BytesOut: 170, DurationMS: 0.123,
		Model: "claude-x", Stream: true, InputTokens: 3, OutputTokens: 1, CacheReadTokens: 7, CacheCreationTokens: 2,
		ToolResultIDs: []string{"toolu_1", "toolu_<2>"}, UpstreamRequestID: "req_up", CredentialUser: "ann",
		MessageID: "msg_1", ToolUseIDs: []string{"toolu_3", "toolu_\u00e9"},
		Service: "gh", Repo: "o/r", RefUpdates: []string{"0000..1111 refs/heads/paddock/s1"}}
	for _, e := range []Entry{
		{},
		full,
		{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), Path: "/a\"b\\c\n\t\x01<&>\u2028é\xff", DurationMS: 1e-7},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{DurationMS: math.NaN()},
		{DurationMS: math.Inf(-1)},
		{DurationMS: 1e21, Status: -1, BytesIn: math.MinInt64},
		{DurationMS: -0.0000015, ToolResultIDs: []string{}},
		{Reason: strings.Repeat("x", 100000)},
	} {
		checkAppendEntry(t, &e)
	}
}

// FuzzAppendEntry holds appendEntry to json.Marshal on any values.
func FuzzAppendEntry(f *testing.F) {
	f.Add(int64(1795976400123456789), "forwarded", "/v1/messages", "claude-x", "toolu_1", 200, int64(90), 0.123, true, int64(3))
	f.Add(int64(-62135596800000000), "a\"b<c>", "\x00\xff", "", "", -1, int64(-5), 1e-9, false, int64(0))
	f.Fuzz(func(t *testing.T, unixNano int64, s1, s2, s3, s4 string, status int, n int64, d float64, stream bool, tok int64) {
		e := Entry{Time: time.Unix(0, unixNano).UTC(), Kind: s4, Host: s3, Port: status, Addr: s2, Rule: s1,
			Session: s1, RequestID: s2, Method: s3, Path: s2, Decision: Decision(s1), Reason: s4, Status: status,
			BytesIn: n, BytesOut: -n, DurationMS: d, Model: s3, Stream: stream, InputTokens: tok,
			OutputTokens: n, CacheReadTokens: tok, CacheCreationTokens: -tok, UpstreamRequestID: s4, CredentialUser: s1}
		if s4 != "" {
			e.ToolResultIDs = []string{s4, s1}
			e.ToolUseIDs = []string{s1}
			e.MessageID = s2
			e.Service, e.Repo, e.RefUpdates = s3, s4, []string{s2}
		}
		checkAppendEntry(t, &e)
		e.Time = time.Unix(0, unixNano).In(time.FixedZone("z", status%100000))
		checkAppendEntry(t, &e)
	})
}

// FuzzValidSession holds the hand-written session id check to the
// regular expression it replaced.
func FuzzValidSession(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	for _, s := range []string{"", "a", "-a", "a-", "s.1_x-Y", "../x", "a/b", "a\n", strings.Repeat("a", 128), strings.Repeat("a", 129), "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validSession(s), re.MatchString(s); got != want {
			t.Fatalf("validSession(%q) = %v, the expression says %v", s, got, want)
		}
	})
}
