package decisionlog

import (
	"encoding/json"
	"testing"
)

// TestDecisionWords: a decision's word is part of the log's format (stored
// logs are read back by it, and metrics are labelled with it), so each
// constant keeps its word, and an entry carries it as a plain string.
func TestDecisionWords(t *testing.T) {
	for d, word := range map[Decision]string{
		Forwarded: "forwarded", Refused: "refused", Local: "local",
		Allowed: "allowed", Denied: "denied", Errored: "error", Closed: "closed", Cut: "cut",
		Terminated: "terminated", Changed: "changed",
	} {
		if string(d) != word {
			t.Errorf("%q, want %q", d, word)
		}
		b, err := json.Marshal(Entry{Decision: d})
		var back struct{ Decision string }
		if err != nil || json.Unmarshal(b, &back) != nil || back.Decision != word {
			t.Errorf("%s: %s", word, b)
		}
	}
}
