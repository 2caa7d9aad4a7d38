package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// TurnReader is the optional Backend feature behind
//
//	GET /v1/sessions/{ref}/turn   TurnResult
//
// the last turn of a running session's conversation, read from claude's
// transcript in its box: the prompt and what claude said and did.
type TurnReader interface {
	LastTurn(ctx context.Context, ref string) (TurnResult, error)
}

// TurnResult is a session's last turn.
type TurnResult struct {
	Session session.Session `json:"session"`
	Turn    ledger.Turn     `json:"turn"`
	// Done is false while claude still works on it (the session's
	// activity is working): more parts are to come.
	Done bool `json:"done"`
}

func turnRoute(mux *http.ServeMux, b Backend) {
	t, ok := b.(TurnReader)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/sessions/{ref}/turn", func(w http.ResponseWriter, r *http.Request) {
		res, err := t.LastTurn(r.Context(), r.PathValue("ref"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// LastTurn calls GET /v1/sessions/{ref}/turn.
func (c *Client) LastTurn(ctx context.Context, ref string) (TurnResult, error) {
	var res TurnResult
	return res, c.get(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/turn", &res)
}
