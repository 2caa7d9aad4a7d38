package api

import (
	"context"
	"net/http"

	"github.com/paddockhq/paddock/internal/credentials/oauth"
)

// Loginer is the optional Backend feature behind paddock credential login
// (the owner's login, refreshed by the Runner; admins only):
//
//	POST   /v1/credential/login          LoginStart: the URL to open
//	POST   /v1/credential/login/finish   LoginFinish{code} → oauth.Status
//	GET    /v1/credential/login          oauth.Status
//	DELETE /v1/credential/login          log out
type Loginer interface {
	StartLogin(ctx context.Context) (string, error)
	FinishLogin(ctx context.Context, pasted string) (oauth.Status, error)
	LoginStatus(ctx context.Context) (oauth.Status, error)
	Logout(ctx context.Context) error
}

// LoginStart answers POST /v1/credential/login.
type LoginStart struct {
	URL string `json:"url"`
}

// LoginFinish carries what the login page showed ("CODE#STATE"): a
// single-use code, worthless without the verifier the Runner keeps.
type LoginFinish struct {
	Code SecretString `json:"code"`
}

func loginRoutes(mux *http.ServeMux, b Backend) {
	l, ok := b.(Loginer)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/credential/login", func(w http.ResponseWriter, r *http.Request) {
		u, err := l.StartLogin(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, LoginStart{URL: u})
	})
	mux.HandleFunc("POST /v1/credential/login/finish", func(w http.ResponseWriter, r *http.Request) {
		var req LoginFinish
		if err := decode(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		st, err := l.FinishLogin(r.Context(), req.Code.Reveal())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, st)
	})
	mux.HandleFunc("GET /v1/credential/login", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.LoginStatus(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, st)
	})
	mux.HandleFunc("DELETE /v1/credential/login", func(w http.ResponseWriter, r *http.Request) {
		if err := l.Logout(r.Context()); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]bool{"logged_out": true})
	})
}

// StartLogin calls POST /v1/credential/login.
func (c *Client) StartLogin(ctx context.Context) (string, error) {
	var res LoginStart
	return res.URL, c.do(ctx, http.MethodPost, "/v1/credential/login", nil, &res)
}

// FinishLogin calls POST /v1/credential/login/finish.
func (c *Client) FinishLogin(ctx context.Context, pasted string) (oauth.Status, error) {
	var st oauth.Status
	return st, c.do(ctx, http.MethodPost, "/v1/credential/login/finish", LoginFinish{Code: SecretString(pasted)}, &st)
}

// LoginStatus calls GET /v1/credential/login.
func (c *Client) LoginStatus(ctx context.Context) (oauth.Status, error) {
	var st oauth.Status
	return st, c.get(ctx, "/v1/credential/login", &st)
}

// Logout calls DELETE /v1/credential/login.
func (c *Client) Logout(ctx context.Context) error {
	var out map[string]bool
	return c.do(ctx, http.MethodDelete, "/v1/credential/login", nil, &out)
}
