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
// of tool results since those words; after the last, StepsDone. Safe while
// serving.
func (s *Server) SetSteps(steps []Step) {
	s.mu.Lock()
	s.steps = append([]Step(nil), steps...)
	s.mu.Unlock()
}

// nextStep returns the scripted tool call this request gets, if any, and
// whether the request belongs to a scripted turn at all.
func (s *Server) nextStep(req *msgRequest) (Step, int, bool) {
	s.mu.Lock()
	steps := s.steps
	s.mu.Unlock()
	if len(steps) == 0 {
		return Step{}, 0, false
	}
	// Walk back to the latest words, counting the tool results after them
	// (the CLI may send new words in one message after the last turn's
	// tool results).
	results := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		bs := blocks(m.Content)
		for j := len(bs) - 1; j >= 0; j-- {
			b := bs[j]
			switch {
			case b.Type == "tool_result":
				results++
			case m.Role == "user" && b.Type == "text" && !isReminder(b.Text):
				if !strings.Contains(b.Text, StepsKeyword) {
					return Step{}, 0, false // the latest words are not the script's
				}
				return stepOr(steps, results)
			}
		}
	}
	return Step{}, 0, false
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

// stepID names step k of a scripted turn answered at a conversation of
// n messages: unique within a conversation, as the API's ids are (the CLI
// does not run a tool_use id twice).
func stepID(k, n int) string { return fmt.Sprintf("toolu_fake_step_%02d_m%d", k, n) }
