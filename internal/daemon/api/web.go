package api

import (
	"context"
	"net/http"
)

// WebLoginer is the optional Backend feature behind
//
//	POST /v1/web/login   WebLogin
//
// a fresh one-time login URL of the Runner's web page. The socket is the
// owner's, so the URL goes to the owner only; it is never logged.
type WebLoginer interface {
	WebLogin(ctx context.Context) (string, error)
}

// WebLogin answers POST /v1/web/login.
type WebLogin struct {
	// URL logs a browser in once, within web.LoginTTL.
	URL string `json:"url"`
}

func webRoute(mux *http.ServeMux, b Backend) {
	w, ok := b.(WebLoginer)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/web/login", func(rw http.ResponseWriter, r *http.Request) {
		u, err := w.WebLogin(r.Context())
		if err != nil {
			writeErr(rw, err)
			return
		}
		writeJSON(rw, 200, WebLogin{URL: u})
	})
}

// WebLogin asks the Runner for a fresh one-time login URL of its web page.
func (c *Client) WebLogin(ctx context.Context) (string, error) {
	var res WebLogin
	err := c.do(ctx, http.MethodPost, "/v1/web/login", nil, &res)
	return res.URL, err
}

// WebEnroller is the optional Backend feature behind
//
//	POST /v1/web/enroll   EnrollRequest → WebLogin
//
// a one-time link that makes a passkey for a person on the web page (a
// person for themselves; an admin for anyone) and logs them in.
type WebEnroller interface {
	WebEnroll(ctx context.Context, user string) (string, error)
}

// EnrollRequest names whom a passkey is for ("": the caller).
type EnrollRequest struct {
	User string `json:"user,omitempty"`
}

func webEnrollRoute(mux *http.ServeMux, b Backend) {
	w, ok := b.(WebEnroller)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/web/enroll", func(rw http.ResponseWriter, r *http.Request) {
		var req EnrollRequest
		if err := decode(r, &req); err != nil {
			writeErr(rw, err)
			return
		}
		u, err := w.WebEnroll(r.Context(), req.User)
		if err != nil {
			writeErr(rw, err)
			return
		}
		writeJSON(rw, 200, WebLogin{URL: u})
	})
}

// WebEnroll asks for a passkey enrolment link for user ("": the caller).
func (c *Client) WebEnroll(ctx context.Context, user string) (string, error) {
	var res WebLogin
	err := c.do(ctx, http.MethodPost, "/v1/web/enroll", EnrollRequest{User: user}, &res)
	return res.URL, err
}
