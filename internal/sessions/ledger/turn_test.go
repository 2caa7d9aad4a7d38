package ledger

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// turnTranscript is a conversation as Claude Code writes it: an earlier
// turn, a meta line of its own, the last prompt, a tool call and its
// result, a subagent's line, the answer, and a line that is not JSON.
const turnTranscript = `{"type":"user","message":{"role":"user","content":"first prompt"}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"first answer"}]}}
{"type":"user","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>Caveat</local-command-caveat>"}}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"run the tests, key sk-ant-api03-abcdefghijkl"}]}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Running them."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"go test ./..."}}]}}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok  example 0.01s"}]}]}}
{"type":"assistant","isSidechain":true,"message":{"role":"assistant","content":[{"type":"text","text":"a subagent's words"}]}}
not json
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"All tests pass."}]}}
{"type":"system","subtype":"turn_duration","durationMs":635,"timestamp":"2026-12-06T20:41:07.026Z"}
`

func TestLastTurn(t *testing.T) {
	tr, err := LastTurn(strings.NewReader(turnTranscript))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tr.Prompt, "run the tests, key ") || strings.Contains(tr.Prompt, "abcdefghijkl") {
		t.Fatalf("prompt %q", tr.Prompt)
	}
	want := []TurnPart{
		{Type: "text", Text: "Running them."},
		{Type: "tool_use", Tool: "Bash", ID: "toolu_1"},
		{Type: "tool_result", ID: "toolu_1", Text: "ok  example 0.01s"},
		{Type: "text", Text: "All tests pass."},
	}
	if len(tr.Parts) != len(want) {
		t.Fatalf("parts %+v", tr.Parts)
	}
	for i, w := range want {
		g := tr.Parts[i]
		if g.Type != w.Type || g.Text != w.Text || g.Tool != w.Tool || g.ID != w.ID {
			t.Fatalf("part %d: %+v, want %+v", i, g, w)
		}
	}
	if string(tr.Parts[1].Input) != `{"command":"go test ./..."}` {
		t.Fatalf("tool input %s", tr.Parts[1].Input)
	}
	if !tr.Ended || tr.EndedAt.Format(time.RFC3339Nano) != "2026-12-06T20:41:07.026Z" {
		t.Fatalf("the turn's end: %v %v", tr.Ended, tr.EndedAt)
	}
	if tr.Lines != 10 || tr.Skipped != 1 {
		t.Fatalf("lines %d skipped %d", tr.Lines, tr.Skipped)
	}
	// No prompt yet: an empty turn, not an error.
	if tr, err := LastTurn(strings.NewReader("")); err != nil || tr.Prompt != "" || tr.Parts == nil || len(tr.Parts) != 0 {
		t.Fatalf("empty transcript: %+v %v", tr, err)
	}
}

// A long text is cut at a character boundary, after redaction; a turn of
// many parts keeps its last MaxTurnParts.
func TestLastTurnBounds(t *testing.T) {
	long := strings.Repeat("é", MaxTurnText) // two bytes each
	var b bytes.Buffer
	b.WriteString(`{"type":"user","message":{"content":"go"}}` + "\n")
	for i := 0; i < MaxTurnParts+3; i++ {
		b.WriteString(`{"type":"assistant","message":{"content":[{"type":"text","text":"` + long + `"}]}}` + "\n")
	}
	tr, err := LastTurn(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Parts) != MaxTurnParts || tr.Dropped != 3 {
		t.Fatalf("%d parts, %d dropped", len(tr.Parts), tr.Dropped)
	}
	p := tr.Parts[0]
	if !p.Cut || len(p.Text) > MaxTurnText || !utf8.ValidString(p.Text) || len(p.Text) < MaxTurnText-1 {
		t.Fatalf("cut text: %d bytes, cut %v, valid %v", len(p.Text), p.Cut, utf8.ValidString(p.Text))
	}
}

// FuzzLastTurn: any bytes; no error from a reader that cannot fail, the
// bounds hold, valid UTF-8 out, nothing credential-shaped kept.
func FuzzLastTurn(f *testing.F) {
	f.Add([]byte(turnTranscript))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}}`))
	f.Add([]byte("\xff\n{\n}\n[]\nnull\n"))
	f.Add([]byte(`{"type":"assistant","message":{"content":"pdk_st_0123456789abcdef"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := LastTurn(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Skipped > tr.Lines || len(tr.Parts) > MaxTurnParts || len(tr.Prompt) > MaxTurnText {
			t.Fatalf("bounds: %+v", tr)
		}
		if credentialShaped.MatchString(tr.Prompt) {
			t.Fatalf("prompt keeps a credential: %q", tr.Prompt)
		}
		for _, p := range tr.Parts {
			if len(p.Text) > MaxTurnText || len(p.Input) > MaxInput || credentialShaped.MatchString(p.Text) || credentialShaped.Match(p.Input) {
				t.Fatalf("part: %+v", p)
			}
		}
	})
}
