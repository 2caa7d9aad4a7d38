package ledger

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// req is a forwarded request of the credential proxy.
func req(id string, ms int, upstream string, results, uses []string) decisionlog.Entry {
	return decisionlog.Entry{Time: at(ms), Session: "s1", RequestID: id, Method: "POST", Path: "/v1/messages",
		Decision: "forwarded", Status: 200, DurationMS: 100, UpstreamRequestID: upstream,
		ToolResultIDs: results, ToolUseIDs: uses}
}

func egress(id string, ms int, host string) decisionlog.Entry {
	return decisionlog.Entry{Time: at(ms), Kind: "egress", Session: "s1", RequestID: id, Method: "CONNECT",
		Decision: "allowed", Host: host, Port: 443}
}

// joined is what a test looks at of a record: the ids of its joins.
type joined struct {
	Seq       int
	RequestID string
	Results   []string // id<asked_by
	Uses      []string // id>result_in
	During    []string // id
}

func view(rs []Record) []joined {
	var out []joined
	for _, r := range rs {
		j := joined{Seq: r.Seq, RequestID: r.RequestID}
		for _, t := range r.ToolResults {
			j.Results = append(j.Results, t.ID+"<"+t.AskedBy)
		}
		for _, t := range r.ToolUses {
			j.Uses = append(j.Uses, t.ID+">"+t.ResultIn)
		}
		for _, t := range r.DuringToolUses {
			j.During = append(j.During, t.ID)
		}
		out = append(out, j)
	}
	return out
}

func TestJoin(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []decisionlog.Entry
		want    []joined
	}{{
		name: "one call, its network access, its result",
		entries: []decisionlog.Entry{
			req("r1", 0, "up1", nil, []string{"A"}),
			egress("e1", 1000, "example.org"),
			req("r2", 2000, "up2", []string{"A"}, nil),
			egress("e2", 3000, "example.org"),
		},
		want: []joined{
			{Seq: 1, RequestID: "r1", Uses: []string{"A>r2"}},
			{Seq: 2, RequestID: "e1", During: []string{"A"}},
			{Seq: 3, RequestID: "r2", Results: []string{"A<r1"}},
			{Seq: 4, RequestID: "e2"},
		},
	}, {
		name: "egress lines come in the file after later requests: sorted by time",
		entries: []decisionlog.Entry{
			req("r1", 0, "", nil, []string{"A", "B"}),
			req("r2", 5000, "", []string{"A", "B"}, nil),
			egress("e1", 1000, "a.example"),
			egress("e0", 500, "b.example"),
		},
		want: []joined{
			{Seq: 1, RequestID: "r1", Uses: []string{"A>r2", "B>r2"}},
			{Seq: 2, RequestID: "e0", During: []string{"A", "B"}},
			{Seq: 3, RequestID: "e1", During: []string{"A", "B"}},
			{Seq: 4, RequestID: "r2", Results: []string{"A<r1", "B<r1"}},
		},
	}, {
		name: "a subagent's call inside a Task call: the innermost first",
		entries: []decisionlog.Entry{
			req("r1", 0, "", nil, []string{"task"}),
			req("r2", 1000, "", nil, []string{"sub"}),
			egress("e1", 1500, "x.example"),
			req("r3", 2000, "", []string{"sub"}, nil),
			egress("e2", 2500, "x.example"),
			req("r4", 3000, "", []string{"task"}, nil),
		},
		want: []joined{
			{Seq: 1, RequestID: "r1", Uses: []string{"task>r4"}},
			{Seq: 2, RequestID: "r2", Uses: []string{"sub>r3"}},
			{Seq: 3, RequestID: "e1", During: []string{"sub", "task"}},
			{Seq: 4, RequestID: "r3", Results: []string{"sub<r2"}},
			{Seq: 5, RequestID: "e2", During: []string{"task"}},
			{Seq: 6, RequestID: "r4", Results: []string{"task<r1"}},
		},
	}, {
		name: "a result whose call is before the log; a call whose result never came",
		entries: []decisionlog.Entry{
			req("r1", 0, "", []string{"old"}, []string{"A"}),
			egress("e1", 9000, "late.example"),
		},
		want: []joined{
			{Seq: 1, RequestID: "r1", Results: []string{"old<"}, Uses: []string{"A>"}},
			{Seq: 2, RequestID: "e1", During: []string{"A"}},
		},
	}, {
		name: "a refused request, then its retry: the forwarded one carried the result",
		entries: []decisionlog.Entry{
			req("r1", 0, "", nil, []string{"A"}),
			func() decisionlog.Entry {
				e := req("r2", 1000, "", []string{"A"}, nil)
				e.Decision, e.Status = "refused", 429
				return e
			}(),
			req("r3", 2000, "", []string{"A"}, nil),
		},
		want: []joined{
			{Seq: 1, RequestID: "r1", Uses: []string{"A>r3"}},
			{Seq: 2, RequestID: "r2", Results: []string{"A<r1"}},
			{Seq: 3, RequestID: "r3", Results: []string{"A<r1"}},
		},
	}, {
		name:    "an empty log",
		entries: nil,
		want:    nil,
	}} {
		t.Run(c.name, func(t *testing.T) {
			in := append([]decisionlog.Entry(nil), c.entries...)
			got := view(Join(in, nil))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
			if !reflect.DeepEqual(in, c.entries) {
				t.Fatal("Join changed its input")
			}
		})
	}
}

func readTranscript(t *testing.T, name string) *Transcript {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ParseTranscript(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestJoinTranscript(t *testing.T) {
	tr := readTranscript(t, "transcript.jsonl")
	if tr.Skipped != 0 || len(tr.ToolUses) != 3 {
		t.Fatalf("skipped %d %v, %d calls", tr.Skipped, tr.Problems, len(tr.ToolUses))
	}
	// The log of a Runner from before tool_use_ids were recorded: the
	// calls each answer asked for come from the transcript by upstream id.
	log := []decisionlog.Entry{
		req("r1", 0, "req_up_1", nil, nil),
		egress("e1", 1000, "example.org"),
		req("r2", 2000, "req_up_2", []string{"toolu_A"}, nil),
		req("r3", 4000, "req_up_3", []string{"toolu_B", "toolu_C"}, nil),
	}
	rs := Join(log, tr)
	if got, want := view(rs), []joined{
		{Seq: 1, RequestID: "r1", Uses: []string{"toolu_A>r2"}},
		{Seq: 2, RequestID: "e1", During: []string{"toolu_A"}},
		{Seq: 3, RequestID: "r2", Results: []string{"toolu_A<r1"}, Uses: []string{"toolu_B>r3", "toolu_C>r3"}},
		{Seq: 4, RequestID: "r3", Results: []string{"toolu_B<r2", "toolu_C<r2"}},
	}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	a := rs[1].DuringToolUses[0]
	if a.Name != "Bash" || a.Command != "curl -s https://example.org/ | head -1" || !json.Valid(a.Input) {
		t.Fatalf("the egress's call: %+v", a)
	}
	if rs[0].MessageID != "msg_1" || rs[2].MessageID != "msg_2" {
		t.Fatalf("message ids: %q %q", rs[0].MessageID, rs[2].MessageID)
	}
	c := rs[3].ToolResults[1]
	if c.Name != "Bash" || c.Command != "false" || !c.IsError {
		t.Fatalf("the failed call: %+v", c)
	}
	if b := rs[3].ToolResults[0]; b.Name != "Read" || b.Command != "" || string(b.Input) != `{"file_path":"/workspace/a.txt"}` {
		t.Fatalf("the Read call: %+v", b)
	}
	// The log's own ids win over the transcript's.
	log[0].ToolUseIDs = []string{"toolu_X"}
	if got := Join(log, tr)[0].ToolUses; len(got) != 1 || got[0].ID != "toolu_X" || got[0].Name != "" {
		t.Fatalf("%+v", got)
	}
}

func TestParseTranscriptBadLines(t *testing.T) {
	tr := readTranscript(t, "broken.jsonl")
	// The good call between the bad lines is read, the rest noted.
	if u := tr.ToolUses["toolu_Z"]; u == nil || u.Command != "echo survived" || u.UpstreamRequestID != "req_up_9" {
		t.Fatalf("toolu_Z: %+v", u)
	}
	if u := tr.ToolUses["toolu_Y"]; u == nil || u.Command != "" || u.Name != "Bash" {
		t.Fatalf("toolu_Y (a command that is not a string): %+v", u)
	}
	if tr.Skipped != 5 || len(tr.Problems) != 5 || tr.Lines != 9 {
		t.Fatalf("lines %d, skipped %d: %q", tr.Lines, tr.Skipped, tr.Problems)
	}
	if tr.Problems[0] != "line 1: not JSON (at byte 2)" || tr.Problems[1] != "line 2: JSON, but not a transcript line (a value of an unexpected type)" {
		t.Fatalf("%q", tr.Problems)
	}
}

func TestParseTranscriptBounds(t *testing.T) {
	var b bytes.Buffer
	big := strings.Repeat("x", MaxInput+10)
	b.WriteString(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"big","name":"Bash","input":{"command":"` + big + `"}}]}}` + "\n")
	b.WriteString(`{"type":"user","message":{"content":"` + strings.Repeat("y", MaxLine) + `"}}` + "\n")
	b.WriteString(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"after","name":"Bash","input":{"command":"ls"}}]}}`) // no newline at the end
	tr, err := ParseTranscript(&b)
	if err != nil {
		t.Fatal(err)
	}
	u := tr.ToolUses["big"]
	if u == nil || u.Input != nil || u.InputBytes <= MaxInput || len(u.Command) > MaxInput || !strings.HasSuffix(u.Command, "…") {
		t.Fatalf("big: input %d bytes kept, size %d, command %d bytes", len(u.Input), u.InputBytes, len(u.Command))
	}
	if tr.Skipped != 1 || !strings.Contains(tr.Problems[0], "longer than") || tr.ToolUses["after"] == nil {
		t.Fatalf("skipped %d %q, after: %v", tr.Skipped, tr.Problems, tr.ToolUses["after"])
	}
}

type failReader struct{ r *strings.Reader }

func (f failReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil {
		return n, os.ErrDeadlineExceeded
	}
	return n, nil
}

func TestParseTranscriptReadError(t *testing.T) {
	tr, err := ParseTranscript(failReader{strings.NewReader(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Bash"}]}}` + "\n")})
	if err == nil || !strings.Contains(err.Error(), "read the transcript") || tr == nil || tr.ToolUses["a"] == nil {
		t.Fatalf("%v %+v", err, tr)
	}
}

func TestWrite(t *testing.T) {
	tr := readTranscript(t, "transcript.jsonl")
	rs := Join([]decisionlog.Entry{
		req("r1", 0, "req_up_1", nil, []string{"toolu_A"}),
		egress("e1", 1000, "example.org"),
		req("r2", 2000, "req_up_2", []string{"toolu_A"}, nil),
	}, tr)

	var j bytes.Buffer
	if err := Write(&j, FormatJSONL, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(j.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), j.String())
	}
	var back Record
	if err := json.Unmarshal([]byte(lines[1]), &back); err != nil || back.V != Version || back.Kind != KindEgress ||
		back.DuringToolUses[0].Command != "curl -s https://example.org/ | head -1" || back.DuringToolUses[0].AskedBy != "r1" {
		t.Fatalf("%v %+v", err, back)
	}
	if !strings.Contains(lines[1], `| head -1`) {
		t.Fatalf("the command is escaped: %s", lines[1])
	}

	var c bytes.Buffer
	if err := Write(&c, FormatCSV, rs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(rows) != 4 || !reflect.DeepEqual(rows[0], CSVHeader) {
		t.Fatalf("%v %q", err, rows)
	}
	col := map[string]int{}
	for i, h := range CSVHeader {
		col[h] = i
	}
	if g := rows[2][col["during_tool_uses"]]; g != "Bash: curl -s https://example.org/ | head -1" {
		t.Fatalf("during_tool_uses: %q", g)
	}
	if g := rows[3][col["tool_result_ids"]]; g != "toolu_A" {
		t.Fatalf("tool_result_ids: %q", g)
	}
	if err := Write(&c, "xml", rs); err == nil || !strings.Contains(err.Error(), "use jsonl or csv") {
		t.Fatalf("%v", err)
	}
}

func TestCSVFormulaGuard(t *testing.T) {
	for in, want := range map[string]string{"=cmd()": "'=cmd()", "+1": "'+1", "-x": "'-x", "@a": "'@a", "\tx": "'\tx", "ls": "ls", "": ""} {
		if got := text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCredentialsRedacted: a command an agent typed with a token in it
// does not carry the token into the ledger.
func TestCredentialsRedacted(t *testing.T) {
	line := `{"type":"assistant","requestId":"r","message":{"id":"m","content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"curl -H 'x-api-key: pdk_st_AbCdEf0123456789-_xyz' -H 'Authorization: Bearer sk-ant-oat01-SECRETSECRET' https://x/"}}]}}`
	tr, err := ParseTranscript(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	u := tr.ToolUses["a"]
	for _, s := range []string{u.Command, string(u.Input)} {
		if strings.Contains(s, "pdk_st_A") || strings.Contains(s, "SECRET") || strings.Count(s, "[redacted]") != 2 {
			t.Fatalf("not redacted: %s", s)
		}
	}
	if !json.Valid(u.Input) {
		t.Fatalf("the redacted input is not JSON: %s", u.Input)
	}
}
