// Package ledger turns a session's decision log into its ledger: one
// record per proxied API request and per egress decision, in time order,
// each joined to the tool calls it has to do with. It is pure: the
// Runner reads the log and the transcript, this package joins them.
//
// The joins, all by id, none by guess:
//
//   - a request carries the results of tool calls (the log's
//     tool_result_ids): each is named with the request whose answer asked
//     for it (asked_by);
//   - a request's answer asks for tool calls (the log's tool_use_ids, or
//     failing those, the transcript's calls of the same upstream request
//     id): each is named with the request that carried its result
//     (result_in);
//   - an egress decision made while tool calls ran lists them
//     (during_tool_uses). A call runs from the arrival of the request
//     whose answer asked for it (Claude Code may start a tool before the
//     answer ends) to the arrival of the request carrying its result, or
//     to the end of the log if none did.
//
// With a transcript (ParseTranscript) every call is also given its tool's
// name and input (for Bash, the command line). The record format is
// versioned (Version) and documented in docs/LEDGER.md.
package ledger

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// Version is the record format's version, in every record's "v". A field
// added keeps it; a field removed or changed in meaning raises it.
const Version = 1

// Record kinds.
const (
	KindRequest = "request" // a request to the credential proxy
	KindEgress  = "egress"  // a connection through the egress proxy
	KindService = "service" // a request made with a service credential's grant
)

// Record is one line of the ledger.
type Record struct {
	V    int       `json:"v"`
	Seq  int       `json:"seq"` // 1, 2, … in time order
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Session is the session's id, RequestID paddock's id of the request
	// or connection (as in `paddock logs`).
	Session    string               `json:"session"`
	RequestID  string               `json:"request_id"`
	Method     string               `json:"method,omitempty"`
	Decision   decisionlog.Decision `json:"decision"`
	Reason     string               `json:"reason,omitempty"`
	Status     int                  `json:"status"`
	DurationMS float64              `json:"duration_ms"`
	BytesIn    int64                `json:"bytes_in"`
	BytesOut   int64                `json:"bytes_out"`

	// Requests only.
	Path                string    `json:"path,omitempty"`
	Model               string    `json:"model,omitempty"`
	InputTokens         int64     `json:"input_tokens,omitempty"`
	OutputTokens        int64     `json:"output_tokens,omitempty"`
	CacheReadTokens     int64     `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64     `json:"cache_creation_tokens,omitempty"`
	UpstreamRequestID   string    `json:"upstream_request_id,omitempty"`
	MessageID           string    `json:"message_id,omitempty"`
	ToolResults         []ToolRef `json:"tool_results,omitempty"`
	ToolUses            []ToolRef `json:"tool_uses,omitempty"`

	// Service requests only: the grant's secret and repository, and a
	// push's ref updates (old..new ref); Path is the request's.
	Service    string   `json:"service,omitempty"`
	Repo       string   `json:"repo,omitempty"`
	RefUpdates []string `json:"ref_updates,omitempty"`

	// Egress (and service) only.
	Host           string    `json:"host,omitempty"`
	Port           int       `json:"port,omitempty"`
	Addr           string    `json:"addr,omitempty"`
	Rule           string    `json:"rule,omitempty"`
	DuringToolUses []ToolRef `json:"during_tool_uses,omitempty"`
}

// ToolRef is one tool call as a record refers to it. Name, Command, Input
// and IsError come from the transcript and are empty without one.
type ToolRef struct {
	ID      string          `json:"id"`
	Name    string          `json:"name,omitempty"`
	Command string          `json:"command,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	// InputBytes is the input's size when Input is left out for it.
	InputBytes int  `json:"input_bytes,omitempty"`
	IsError    bool `json:"is_error,omitempty"`
	Subagent   bool `json:"subagent,omitempty"`
	// AskedBy is the request whose answer asked for the call, ResultIn
	// the one that carried its result ("" where the log has none).
	AskedBy  string `json:"asked_by,omitempty"`
	ResultIn string `json:"result_in,omitempty"`
}

// call is what Join knows of one tool call.
type call struct {
	id       string
	askedBy  int // index into the sorted entries, -1 if unknown
	resultIn int // likewise
}

// Join builds the ledger of entries (one session's decision log, in any
// order). t may be nil: the joins by id still hold, without the tools'
// names and inputs. entries is not modified.
func Join(entries []decisionlog.Entry, t *Transcript) []Record {
	es := append([]decisionlog.Entry(nil), entries...)
	// Egress lines are written when a connection ends, so the file is not
	// in time order; equal times keep the file's order.
	sort.SliceStable(es, func(i, j int) bool { return es[i].Time.Before(es[j].Time) })

	calls := map[string]*call{}
	var order []*call // in the order first seen
	get := func(id string) *call {
		c := calls[id]
		if c == nil {
			c = &call{id: id, askedBy: -1, resultIn: -1}
			calls[id] = c
			order = append(order, c)
		}
		return c
	}
	uses := make([][]string, len(es)) // the calls each request's answer asked for
	for i := range es {
		e := &es[i]
		if e.Kind != "" {
			continue
		}
		uses[i] = e.ToolUseIDs
		if len(uses[i]) == 0 && t != nil && e.UpstreamRequestID != "" {
			uses[i] = t.ByRequest[e.UpstreamRequestID]
		}
		for _, id := range uses[i] {
			if c := get(id); c.askedBy < 0 {
				c.askedBy = i
			}
		}
		for _, id := range e.ToolResultIDs {
			c := get(id)
			// The first forwarded request that carried it; a refused one
			// (a budget, a limit) counts only if none went out.
			if c.resultIn < 0 || es[c.resultIn].Decision != decisionlog.Forwarded && e.Decision == decisionlog.Forwarded {
				c.resultIn = i
			}
		}
	}

	ref := func(c *call) ToolRef {
		r := ToolRef{ID: c.id}
		if c.askedBy >= 0 {
			r.AskedBy = es[c.askedBy].RequestID
		}
		if c.resultIn >= 0 {
			r.ResultIn = es[c.resultIn].RequestID
		}
		if t != nil {
			if u := t.ToolUses[c.id]; u != nil {
				r.Name, r.Command, r.Input, r.IsError, r.Subagent = u.Name, u.Command, u.Input, u.IsError, u.Sidechain
				if u.Input == nil {
					r.InputBytes = u.InputBytes
				}
			}
		}
		return r
	}

	during := runningAt(es, order)
	out := make([]Record, len(es))
	for i := range es {
		e := &es[i]
		r := Record{V: Version, Seq: i + 1, Time: e.Time, Kind: KindRequest, Session: e.Session, RequestID: e.RequestID,
			Method: e.Method, Decision: e.Decision, Reason: e.Reason, Status: e.Status, DurationMS: e.DurationMS,
			BytesIn: e.BytesIn, BytesOut: e.BytesOut}
		if e.Kind != "" {
			r.Kind = KindEgress
			if e.Kind != "egress" {
				r.Kind = e.Kind // a kind this version does not know: kept as logged
			}
			r.Host, r.Port, r.Addr, r.Rule = e.Host, e.Port, e.Addr, e.Rule
			if e.Kind == KindService {
				r.Path, r.Service, r.Repo, r.RefUpdates = e.Path, e.Service, e.Repo, e.RefUpdates
			}
			for _, c := range during[i] {
				r.DuringToolUses = append(r.DuringToolUses, ref(c))
			}
			out[i] = r
			continue
		}
		r.Path, r.Model = e.Path, e.Model
		r.InputTokens, r.OutputTokens = e.InputTokens, e.OutputTokens
		r.CacheReadTokens, r.CacheCreationTokens = e.CacheReadTokens, e.CacheCreationTokens
		r.UpstreamRequestID, r.MessageID = e.UpstreamRequestID, e.MessageID
		if r.MessageID == "" && t != nil && e.UpstreamRequestID != "" {
			r.MessageID = t.MessageOf[e.UpstreamRequestID]
		}
		for _, id := range e.ToolResultIDs {
			r.ToolResults = append(r.ToolResults, ref(calls[id]))
		}
		for _, id := range uses[i] {
			r.ToolUses = append(r.ToolUses, ref(calls[id]))
		}
		out[i] = r
	}
	return out
}

// runningAt gives, for each egress entry of es (sorted by time), the
// tool calls running when it began, the latest asked for first (the
// innermost: a subagent's call before the Task call that started it).
func runningAt(es []decisionlog.Entry, calls []*call) map[int][]*call {
	type span struct {
		c          *call
		start, end time.Time
		open       bool // no result came: runs to the end of the log
	}
	var spans []span
	for _, c := range calls {
		if c.askedBy < 0 {
			continue // a result whose call is before the log: no start known
		}
		s := span{c: c, start: es[c.askedBy].Time, open: c.resultIn < 0}
		if !s.open {
			s.end = es[c.resultIn].Time
		}
		spans = append(spans, s)
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })

	out := map[int][]*call{}
	var active []span
	next := 0
	for i := range es {
		if es[i].Kind == "" {
			continue
		}
		at := es[i].Time
		for next < len(spans) && !spans[next].start.After(at) {
			active = append(active, spans[next])
			next++
		}
		kept := active[:0]
		for _, s := range active {
			if s.open || !s.end.Before(at) {
				kept = append(kept, s)
			}
		}
		active = kept
		run := append([]span(nil), active...)
		sort.SliceStable(run, func(a, b int) bool { return run[a].start.After(run[b].start) })
		for _, s := range run {
			out[i] = append(out[i], s.c)
		}
	}
	return out
}
