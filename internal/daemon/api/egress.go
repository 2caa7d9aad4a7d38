package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/internal/sessions/session"
)

// The egress routes, an optional Backend feature (EgressSteering):
//
//	GET  /v1/egress/pending                   []PendingView     connections waiting for approval
//	POST /v1/sessions/{ref}/egress/approve    ApproveRequest    → ApproveResult
//	GET  /v1/egress/always[?user=NAME]        AlwaysList        a person's standing approvals
//	POST /v1/egress/always/rm                 AlwaysRemoveRequest → AlwaysRemoveResult
//
// A session's posture, rules, ask mode and attached policies change
// through POST /v1/sessions/{ref}/set (SetRequest).

// EgressSteering is the optional Backend feature behind the egress routes.
type EgressSteering interface {
	EgressPending(ctx context.Context) ([]PendingView, error)
	ApproveEgress(ctx context.Context, ref string, req ApproveRequest) (ApproveResult, error)
}

// EgressStanding is the optional Backend feature behind the standing
// approvals' routes: a person's "always" approvals (egress approve
// --always), which every ask-mode session of theirs uses. User "" is the
// caller.
type EgressStanding interface {
	EgressAlways(ctx context.Context, user string) (AlwaysList, error)
	RemoveEgressAlways(ctx context.Context, req AlwaysRemoveRequest) (AlwaysRemoveResult, error)
}

// AlwaysList is a person's standing approvals.
type AlwaysList struct {
	User      string             `json:"user"`
	Approvals []session.Approval `json:"approvals"`
}

// AlwaysRemoveRequest takes a rule (HOST[:PORT] or *.DOMAIN[:PORT], as
// approved) off a person's standing list; User "" is the caller.
type AlwaysRemoveRequest struct {
	Rule string `json:"rule"`
	User string `json:"user,omitempty"`
}

// AlwaysRemoveResult says what a removal did.
type AlwaysRemoveResult struct {
	User string `json:"user"`
	Rule string `json:"rule"`
	// Sessions: the person's running sessions whose policy was set again
	// without it (the copy recorded in the session where it was approved
	// goes too; one approved for a session alone stays).
	Sessions int `json:"sessions"`
	Cut      int `json:"cut"` // open tunnels it alone allowed, cut
}

func egressRoutes(mux *http.ServeMux, b Backend) {
	if st, ok := b.(EgressStanding); ok {
		mux.HandleFunc("GET /v1/egress/always", func(w http.ResponseWriter, r *http.Request) {
			l, err := st.EgressAlways(r.Context(), r.URL.Query().Get("user"))
			if err != nil {
				writeErr(w, err)
				return
			}
			if l.Approvals == nil {
				l.Approvals = []session.Approval{}
			}
			writeJSON(w, 200, l)
		})
		mux.HandleFunc("POST /v1/egress/always/rm", func(w http.ResponseWriter, r *http.Request) {
			var req AlwaysRemoveRequest
			if err := decodeLimit(r, &req, 4<<10); err != nil {
				writeErr(w, err)
				return
			}
			res, err := st.RemoveEgressAlways(r.Context(), req)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, 200, res)
		})
	}
	es, ok := b.(EgressSteering)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/egress/pending", func(w http.ResponseWriter, r *http.Request) {
		ps, err := es.EgressPending(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		if ps == nil {
			ps = []PendingView{}
		}
		writeJSON(w, 200, ps)
	})
	mux.HandleFunc("POST /v1/sessions/{ref}/egress/approve", func(w http.ResponseWriter, r *http.Request) {
		var req ApproveRequest
		if err := decodeLimit(r, &req, 4<<10); err != nil {
			writeErr(w, err)
			return
		}
		res, err := es.ApproveEgress(r.Context(), r.PathValue("ref"), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// EgressPending calls GET /v1/egress/pending.
func (c *Client) EgressPending(ctx context.Context) ([]PendingView, error) {
	var out []PendingView
	return out, c.do(ctx, "GET", "/v1/egress/pending", nil, &out)
}

// ApproveEgress calls POST /v1/sessions/{ref}/egress/approve.
func (c *Client) ApproveEgress(ctx context.Context, ref string, req ApproveRequest) (ApproveResult, error) {
	var out ApproveResult
	return out, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/egress/approve", req, &out)
}

// EgressAlways calls GET /v1/egress/always; user "" is the caller.
func (c *Client) EgressAlways(ctx context.Context, user string) (AlwaysList, error) {
	p := "/v1/egress/always"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	var out AlwaysList
	return out, c.do(ctx, "GET", p, nil, &out)
}

// RemoveEgressAlways calls POST /v1/egress/always/rm.
func (c *Client) RemoveEgressAlways(ctx context.Context, req AlwaysRemoveRequest) (AlwaysRemoveResult, error) {
	var out AlwaysRemoveResult
	return out, c.do(ctx, "POST", "/v1/egress/always/rm", req, &out)
}
