package api

import (
	"context"
	"net/http"
	"net/url"
)

// The egress routes, an optional Backend feature (EgressSteering):
//
//	GET  /v1/egress/pending                   []PendingView     connections waiting for approval
//	POST /v1/sessions/{ref}/egress/approve    ApproveRequest    → ApproveResult
//
// A session's posture, rules, ask mode and attached policies change
// through POST /v1/sessions/{ref}/set (SetRequest).

// EgressSteering is the optional Backend feature behind the egress routes.
type EgressSteering interface {
	EgressPending(ctx context.Context) ([]PendingView, error)
	ApproveEgress(ctx context.Context, ref string, req ApproveRequest) (ApproveResult, error)
}

func egressRoutes(mux *http.ServeMux, b Backend) {
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
