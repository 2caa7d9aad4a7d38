package fakeapi

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Step is one tool call of a scripted turn: a tool's name as Claude Code
// offers it (Read, Edit, Bash, …) and its input.
type Step struct {
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

// StepsKeyword in a user text starts the turn SetSteps scripted.
const StepsKeyword = "STEPSTEST"

// StepsDone is the text that ends a scripted turn.
const StepsDone = "The steps ran. Done."

// SetSteps scripts the tool calls of a turn: a request whose latest user
// words hold StepsKeyword gets steps[k] as its tool_use, k being the number
// of results it carries of the tool calls this server gave for those
// words; after the last, StepsDone. Counted by id, not by position: the
// CLI merges consecutive messages, and a turn's new words can come after
// the tool results in one user message (the API wants tool results
// first), beside those of the turn before. The words of a scripted turn
// must differ from those of earlier scripted turns of the conversation.
// Safe while serving; it forgets the calls given so far.
func (s *Server) SetSteps(steps []Step) {
	s.mu.Lock()
	s.steps = append([]Step(nil), steps...)
	s.given = map[string]string{}
	s.mu.Unlock()
}

// nextStep returns the scripted tool call this request gets, if any, and
// whether the request belongs to a scripted turn at all, with the words
// of that turn.
func (s *Server) nextStep(req *msgRequest) (Step, int, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steps) == 0 {
		return Step{}, 0, "", false
	}
	words, found := "", false
	var results []string
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		bs := blocks(m.Content)
		for j := len(bs) - 1; j >= 0; j-- {
			b := bs[j]
			switch {
			case b.Type == "tool_result":
				results = append(results, b.ToolUseID)
			case !found && m.Role == "user" && b.Type == "text" && !isReminder(b.Text):
				words, found = b.Text, true
			}
		}
	}
	if !found || !strings.Contains(words, StepsKeyword) {
		return Step{}, 0, "", false // the latest words are not the script's
	}
	k := 0
	for _, id := range results {
		if s.given[id] == words {
			k++
		}
	}
	st, k, _ := stepOr(s.steps, k)
	return st, k, words, true
}

// give records a tool call given for a scripted turn's words and returns
// its id, unique on this server (the CLI does not run a tool_use id twice).
func (s *Server) give(k int, words string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gaveN++
	id := fmt.Sprintf("toolu_fake_step_%02d_%d", k, s.gaveN)
	if s.given == nil {
		s.given = map[string]string{}
	}
	s.given[id] = words
	return id
}

func stepOr(steps []Step, k int) (Step, int, bool) {
	if k < len(steps) {
		return steps[k], k, true
	}
	return Step{}, k, true
}

// stepEvents streams one tool_use block.
func stepEvents(id string, st Step) []event {
	input, _ := json.Marshal(st.Input)
	ev := []event{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": id, "name": st.Name, "input": map[string]any{}}}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for _, p := range split(string(input), 2) {
		ev = append(ev, event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}}})
	}
	return append(ev,
		event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		event{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 30}}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
}
