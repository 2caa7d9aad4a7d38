package fakeapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, cred, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if cred != "" {
		req.Header.Set("X-Api-Key", cred)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestAuthAndShapes(t *testing.T) {
	s := New("good")
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp := post(t, srv.URL+"/v1/messages", "bad", `{"model":"m"}`)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 401 || e.Type != "error" || e.Error.Type != "authentication_error" {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	resp = post(t, srv.URL+"/v1/messages", "good", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if m["type"] != "message" || m["stop_reason"] != "end_turn" {
		t.Fatalf("%v", m)
	}
	resp = post(t, srv.URL+"/v1/messages/count_tokens", "good", `{"model":"m"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"input_tokens"`) {
		t.Fatal(string(b))
	}
	recs := s.Requests()
	if len(recs) != 3 || recs[0].Credential != "bad" || recs[1].Model != "m" {
		t.Fatalf("%+v", recs)
	}
}

func TestStreamedToolTurn(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"text","text":"TOOLTEST: touch /tmp/x"}]}]}`
	resp := post(t, srv.URL+"/v1/messages", "any", body)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatal(ct)
	}
	var events []string
	var partial strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "input_json_delta") {
			var x struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				}
			}
			json.Unmarshal([]byte(d), &x)
			partial.WriteString(x.Delta.PartialJSON)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(events, " ") != want {
		t.Fatalf("events %v", events)
	}
	var input struct{ Command string }
	if err := json.Unmarshal([]byte(partial.String()), &input); err != nil || input.Command != "touch /tmp/x" {
		t.Fatalf("tool input %q %v", partial.String(), err)
	}
	// With the tool_result in the last message, the answer is text.
	body2 := `{"model":"m","stream":false,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"TOOLTEST"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_fake_01"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_fake_01","content":"ok"}]}]}`
	r2 := post(t, srv.URL+"/v1/messages", "any", body2)
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if !strings.Contains(string(b), "The tool ran. Done.") {
		t.Fatal(string(b))
	}
}

// TestFaults: each injected fault fails exactly the next good Messages
// request in its own way, after authentication, and then the server is
// healthy again.
func TestFaults(t *testing.T) {
	s := New("good")
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	// A bad credential does not use up a fault.
	s.InjectFault(FaultStatus500, 1, 0)
	if resp := post(t, srv.URL+"/v1/messages", "bad", body); resp.StatusCode != 401 {
		t.Fatalf("bad credential: %d", resp.StatusCode)
	}
	resp := post(t, srv.URL+"/v1/messages", "good", body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"api_error"`) {
		t.Fatalf("500: %d %s", resp.StatusCode, b)
	}
	s.InjectFault(FaultOverloaded, 1, 0)
	resp = post(t, srv.URL+"/v1/messages", "good", body)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(b), `"overloaded_error"`) {
		t.Fatalf("529: %d %s", resp.StatusCode, b)
	}

	s.InjectFault(FaultReset, 1, 0)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", "good")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("reset: answered %d", resp.StatusCode)
	}

	s.InjectFault(FaultSlowHeaders, 1, 300*time.Millisecond)
	start := time.Now()
	resp = post(t, srv.URL+"/v1/messages", "good", body)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if time.Since(start) < 300*time.Millisecond || !strings.Contains(string(b), "message_stop") {
		t.Fatalf("slow headers: after %v: %s", time.Since(start), b)
	}

	s.InjectFault(FaultStall, 1, 0)
	resp = post(t, srv.URL+"/v1/messages", "good", body)
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	for !strings.Contains(got.String(), "text_delta") {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stall: %v after %q", err, got.String())
		}
		got.WriteString(l)
	}
	stalled := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(stalled) }()
	select {
	case <-stalled:
		t.Fatal("a stalled stream ended")
	case <-time.After(200 * time.Millisecond):
	}
	resp.Body.Close()
	<-stalled
	// The stalled handler records its request when it sees the client
	// go, which the server notices on its own time: wait for it, so the
	// record's order is the requests' order.
	s.WaitFor(6, 5*time.Second)

	// Healthy again; the record says which requests were faulted.
	resp = post(t, srv.URL+"/v1/messages", "good", body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the faults: %d", resp.StatusCode)
	}
	var faults []Fault
	for _, r := range s.WaitFor(7, 5*time.Second) { // recorded once each handler returns
		faults = append(faults, r.Fault)
	}
	want := []Fault{"", FaultStatus500, FaultOverloaded, FaultReset, FaultSlowHeaders, FaultStall, ""}
	if len(faults) != len(want) {
		t.Fatalf("faults %q, want %q", faults, want)
	}
	for i := range want {
		if faults[i] != want[i] {
			t.Fatalf("faults %q, want %q", faults, want)
		}
	}
}

// TestSteps: a scripted turn gives its tool calls one by one, each after
// the last one's result, then ends; other turns are not scripted. The
// results are counted by the ids given, wherever the CLI puts them: it
// merges consecutive messages, so a second scripted turn's words can come
// after both turns' results in one user message (as Claude Code 2.1.328
// sent it, which made TestAskModeWithClaude run its command again).
func TestSteps(t *testing.T) {
	s := New()
	s.SetSteps([]Step{{Name: "Read", Input: map[string]any{"file_path": "/w/f"}}, {Name: "Bash", Input: map[string]any{"command": "true"}}})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ask := func(messages string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":9,"tools":[{"name":"Bash"}],"messages":`+messages+`}`))
		req.Header.Set("x-api-key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	idOf := func(answer string) string {
		t.Helper()
		var m struct {
			Content []struct{ Type, ID string }
		}
		json.Unmarshal([]byte(answer), &m)
		if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || !strings.HasPrefix(m.Content[0].ID, "toolu_fake_step_") {
			t.Fatalf("not a step's tool call: %s", answer)
		}
		return m.Content[0].ID
	}
	use := func(id string) string {
		return `{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"x","input":{}}]}`
	}
	result := func(id string) string {
		return `{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}`
	}
	user := `{"role":"user","content":"STEPSTEST go"}`
	got := ask(`[` + user + `]`)
	if !strings.Contains(got, `"name":"Read"`) {
		t.Fatalf("first step: %s", got)
	}
	id0 := idOf(got)
	if got := ask(`[` + user + `,` + use(id0) + `,{"role":"user","content":[` + result("toolu_made_up") + `]}]`); !strings.Contains(got, `"name":"Read"`) {
		t.Fatalf("a result of a call this server did not give counted: %s", got)
	}
	got = ask(`[` + user + `,` + use(id0) + `,{"role":"user","content":[` + result(id0) + `]}]`)
	if !strings.Contains(got, `"name":"Bash"`) {
		t.Fatalf("second step: %s", got)
	}
	id1 := idOf(got)
	if id1 == id0 {
		t.Fatalf("two calls with one id %s", id0)
	}
	if got := ask(`[` + user + `,` + use(id0) + `,{"role":"user","content":[` + result(id0) + `]},` + use(id1) + `,{"role":"user","content":[` + result(id1) + `]}]`); !strings.Contains(got, StepsDone) {
		t.Fatalf("end: %s", got)
	}
	if got := ask(`[` + user + `,{"role":"assistant","content":"done"},{"role":"user","content":"say hi"}]`); !strings.Contains(got, "hi from the fake server") {
		t.Fatalf("a later turn: %s", got)
	}

	// One step a turn, two turns, merged as the CLI sends them.
	s.SetSteps([]Step{{Name: "Bash", Input: map[string]any{"command": "true"}}})
	one := `{"type":"text","text":"STEPSTEST one"}`
	a := idOf(ask(`[{"role":"user","content":[` + one + `]}]`))
	if got := ask(`[{"role":"user","content":[` + one + `]},` + use(a) + `,{"role":"user","content":[` + result(a) + `]}]`); !strings.Contains(got, StepsDone) {
		t.Fatalf("turn one's end: %s", got)
	}
	two := `{"type":"text","text":"STEPSTEST two"}`
	b := idOf(ask(`[{"role":"user","content":[` + one + `]},{"role":"assistant","content":[{"type":"text","text":"` + StepsDone + `"},{"type":"tool_use","id":"` + a + `","name":"x","input":{}}]},{"role":"user","content":[` + result(a) + `,` + two + `]}]`))
	merged := `[{"role":"user","content":[` + one + `]},{"role":"assistant","content":[{"type":"text","text":"` + StepsDone + `"},{"type":"tool_use","id":"` + a + `","name":"x","input":{}},{"type":"tool_use","id":"` + b + `","name":"x","input":{}}]},{"role":"user","content":[` + result(a) + `,` + result(b) + `,` + two + `]}]`
	if got := ask(merged); !strings.Contains(got, StepsDone) {
		t.Fatalf("turn two, its result before its words in one merged message, runs its step again: %s", got)
	}
}
