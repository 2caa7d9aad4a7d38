package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Tokener is the optional Backend feature behind
//
//	POST   /v1/tokens        TokenRequest → NewToken
//	GET    /v1/tokens        []TokenInfo
//	DELETE /v1/tokens/{id}   TokenInfo
//
// the caller's API tokens. These routes are the socket's only
// (ScopeSocket): a token never makes another.
type Tokener interface {
	CreateAPIToken(ctx context.Context, req TokenRequest) (NewToken, error)
	APITokens(ctx context.Context) ([]TokenInfo, error)
	RemoveAPIToken(ctx context.Context, id string) (TokenInfo, error)
}

// TokenRequest asks for a token of a scope, with a name to know it by.
type TokenRequest struct {
	Scope Scope  `json:"scope"`
	Name  string `json:"name,omitempty"`
}

// TokenInfo is what is kept of a token: never the token.
type TokenInfo struct {
	ID      string    `json:"id"`
	UID     uint32    `json:"uid"`
	Scope   Scope     `json:"scope"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	// Used is when it was last used, to the minute.
	Used time.Time `json:"used,omitzero"`
}

// NewToken is a token just made: Token is shown this once.
type NewToken struct {
	TokenInfo
	Token SecretString `json:"token"`
}

func tokenRoutes(mux *http.ServeMux, b Backend) {
	t, ok := b.(Tokener)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		var req TokenRequest
		if err := decode(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		res, err := t.CreateAPIToken(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, 200, res)
	})
	mux.HandleFunc("GET /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		res, err := t.APITokens(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		if res == nil {
			res = []TokenInfo{}
		}
		writeJSON(w, 200, res)
	})
	mux.HandleFunc("DELETE /v1/tokens/{id}", func(w http.ResponseWriter, r *http.Request) {
		res, err := t.RemoveAPIToken(r.Context(), r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// CreateAPIToken calls POST /v1/tokens.
func (c *Client) CreateAPIToken(ctx context.Context, req TokenRequest) (NewToken, error) {
	var res NewToken
	return res, c.do(ctx, "POST", "/v1/tokens", req, &res)
}

// APITokens calls GET /v1/tokens.
func (c *Client) APITokens(ctx context.Context) ([]TokenInfo, error) {
	var res []TokenInfo
	return res, c.get(ctx, "/v1/tokens", &res)
}

// RemoveAPIToken calls DELETE /v1/tokens/{id}.
func (c *Client) RemoveAPIToken(ctx context.Context, id string) (TokenInfo, error) {
	var res TokenInfo
	return res, c.do(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(id), nil, &res)
}
