package fakeapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
