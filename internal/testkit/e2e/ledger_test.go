package e2e

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// TestLedgerJoinsTranscript: the real Claude Code runs two Bash calls in
// one turn, the first a curl that the egress proxy refuses. `paddock
// ledger --with-transcript` then joins every tool result in the decision
// log to the request whose answer asked for it, names the command from
// the transcript the real CLI wrote, and gives the curl's egress decision
// to the call that made it.
func TestLedgerJoinsTranscript(t *testing.T) {
	e := newEnv(t)
	curl := "curl -sS --max-time 20 https://ledger.example.org/ ; echo curl-done"
	uname := "uname -s && echo ledger-second"
	e.fake.SetSteps([]fakeapi.Step{
		{Name: "Bash", Input: map[string]any{"command": curl, "description": "reach a host"}},
		{Name: "Bash", Input: map[string]any{"command": uname, "description": "the system"}},
	})
	defer e.fake.SetSteps(nil)
	const name = "ledger"
	e.pd("run", "-d", "--name", name, "--backend", "local", "--egress", "anthropic")
	defer e.pdRun("rm", "-f", name)
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, fakeapi.StepsKeyword+" run two commands")
	e.waitScreen(name, fakeapi.StepsDone, 90*time.Second)

	// The tool results the log holds.
	var results []string
	for _, l := range strings.Split(strings.TrimSpace(e.pd("logs", name, "--json")), "\n") {
		var en decisionlog.Entry
		if err := json.Unmarshal([]byte(l), &en); err != nil {
			t.Fatalf("logs line %q: %v", l, err)
		}
		results = append(results, en.ToolResultIDs...)
	}
	if len(results) < 2 {
		t.Fatalf("the log holds %d tool results, want the two calls'", len(results))
	}

	// Claude Code appends to its transcript a moment after it draws: the
	// ledger is read again until every result has its call's command, for
	// up to 15 s; the checks below then hold whatever it read last.
	var out string
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var errs string
		var code int
		out, errs, code = e.pdRun("ledger", name, "--with-transcript", "--format", "jsonl")
		if code != 0 || errs != "" {
			t.Fatalf("ledger: exit %d: %s", code, errs)
		}
		if allJoined(out) || time.Now().After(end) {
			break
		}
	}
	var recs []ledger.Record
	byID := map[string]*ledger.Record{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ledger.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("ledger line %q: %v", l, err)
		}
		if r.V != ledger.Version || r.Seq != len(recs)+1 {
			t.Fatalf("record %d: v %d seq %d", len(recs)+1, r.V, r.Seq)
		}
		recs = append(recs, r)
	}
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
	}
	// Every tool result is joined: to the request whose answer asked for
	// the call (which names it back), with the tool and its command.
	commands := map[string]string{}
	joined := 0
	for _, r := range recs {
		for _, tr := range r.ToolResults {
			joined++
			asker := byID[tr.AskedBy]
			if asker == nil || tr.Name != "Bash" || tr.Command == "" {
				t.Fatalf("result %s in %s: not joined (%+v)\n%s", tr.ID, r.RequestID, tr, out)
			}
			// It names back the request that carried the result first
			// (Claude Code may send the same results again, e.g. in a
			// side request): this one, or one before it that carries it.
			found := false
			for _, u := range asker.ToolUses {
				if u.ID != tr.ID || u.Command != tr.Command || byID[u.ResultIn] == nil || byID[u.ResultIn].Seq > r.Seq {
					continue
				}
				for _, again := range byID[u.ResultIn].ToolResults {
					found = found || again.ID == tr.ID
				}
			}
			if !found {
				t.Fatalf("%s asked for %s, but does not say so: %+v", asker.RequestID, tr.ID, asker.ToolUses)
			}
			commands[tr.ID] = tr.Command
		}
	}
	if joined != len(results) {
		t.Fatalf("%d tool results joined of the log's %d", joined, len(results))
	}
	var got []string
	for _, c := range commands {
		got = append(got, c)
	}
	if !strings.Contains(strings.Join(got, "\n"), curl) || !strings.Contains(strings.Join(got, "\n"), uname) {
		t.Fatalf("the commands named: %q", got)
	}
	// The curl's CONNECT, refused, is the curl call's.
	var curlEgress *ledger.Record
	for i, r := range recs {
		if r.Kind == ledger.KindEgress && r.Host == "ledger.example.org" {
			curlEgress = &recs[i]
		}
	}
	if curlEgress == nil || curlEgress.Decision == "allowed" || len(curlEgress.DuringToolUses) == 0 ||
		curlEgress.DuringToolUses[0].Command != curl || curlEgress.DuringToolUses[0].AskedBy == "" {
		t.Fatalf("the curl's egress record: %+v\n%s", curlEgress, out)
	}

	// CSV: the same records, a header first.
	out, errs, code := e.pdRun("ledger", name, "--with-transcript", "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(rows) != len(recs)+1 || strings.Join(rows[0], ",") != strings.Join(ledger.CSVHeader, ",") {
		t.Fatalf("csv: exit %d %v, %d rows for %d records: %s", code, err, len(rows), len(recs), errs)
	}
	if !strings.Contains(out, "Bash: "+uname) {
		t.Fatalf("csv names no command:\n%s", out)
	}
}

// allJoined reports whether every tool result in a ledger's JSONL has its
// call's name and command (from the transcript).
func allJoined(out string) bool {
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ledger.Record
		if json.Unmarshal([]byte(l), &r) != nil {
			return false
		}
		for _, tr := range r.ToolResults {
			if tr.Name == "" || tr.Command == "" {
				return false
			}
		}
	}
	return true
}
