package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// The multi-user routes, each an optional Backend feature:
//
//	GET    /v1/whoami                   people.Person            Whoami
//	GET    /v1/sessions?all_users=1     every person's sessions  AllUsers
//	POST   /v1/sessions/{ref}/share     ShareRequest             Sharer
//	POST   /v1/sessions/{ref}/unshare   ShareRequest (no role)   Sharer
//	PUT    /v1/credential               CredentialRequest        UserCredentials
//	DELETE /v1/credential                                        UserCredentials
//	GET    /v1/audit?session=&user=&n=&follow=1   NDJSON of audit.Entry  Auditor
//
// Who calls is never read from a request: Identify puts the person the
// kernel names (SO_PEERCRED, ConnContext) in each request's context.

// Whoami is the optional Backend feature behind GET /v1/whoami.
type Whoami interface {
	Whoami(ctx context.Context) (people.Person, error)
}

// AllUsers is the optional Backend feature behind ?all_users=1.
type AllUsers interface {
	AllSessions(ctx context.Context) ([]session.Session, error)
}

// Sharer is the optional Backend feature behind share and unshare.
type Sharer interface {
	Share(ctx context.Context, ref, user, role string) (session.Session, error)
	Unshare(ctx context.Context, ref, user string) (session.Session, error)
}

// ShareRequest names a user and, for share, a role.
type ShareRequest struct {
	User string `json:"user"`
	Role string `json:"role,omitempty"`
}

// UserCredentials is the optional Backend feature behind PUT and DELETE
// /v1/credential: the caller's own credential.
type UserCredentials interface {
	SetCredential(ctx context.Context, kind credential.Kind, s secret.Value) (credential.Status, error)
	RemoveCredential(ctx context.Context) error
}

// CredentialRequest carries a person's own credential to the Runner.
type CredentialRequest struct {
	Credential SecretString `json:"credential"`
	Kind       string       `json:"kind,omitempty"`
}

// Auditor is the optional Backend feature behind GET /v1/audit.
type Auditor interface {
	Audit(ctx context.Context, q AuditQuery, fn func(audit.Entry) error) error
}

// AuditQuery selects audit entries; Follow keeps the answer open for new
// ones.
type AuditQuery struct {
	Session string
	User    string
	N       int
	Follow  bool
}

type peerKey struct{}

type peer struct {
	uid uint32
	err error
}

// ConnContext is the API server's http.Server.ConnContext: it asks the
// kernel who connected (SO_PEERCRED) once per connection.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uid, err := people.PeerUID(c)
	return context.WithValue(ctx, peerKey{}, peer{uid: uid, err: err})
}

// Identify resolves each request's caller from its connection's peer uid
// with who, afresh for every request (group membership may change), and
// puts them in the request's context. A caller who may not use the
// Runner gets 403 and who's reason, which names what to do.
func Identify(h http.Handler, who func(uid uint32) (people.Person, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, ok := r.Context().Value(peerKey{}).(peer)
		if !ok || pc.err != nil {
			writeErr(w, fmt.Errorf("cannot tell who is calling (no peer credentials on this connection): %w", errdefs.ErrForbidden))
			return
		}
		p, err := who(pc.uid)
		if err != nil {
			writeErr(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(people.With(r.Context(), p)))
	})
}

func peopleRoutes(mux *http.ServeMux, b Backend) {
	if w, ok := b.(Whoami); ok {
		mux.HandleFunc("GET /v1/whoami", func(rw http.ResponseWriter, r *http.Request) {
			p, err := w.Whoami(r.Context())
			if err != nil {
				writeErr(rw, err)
				return
			}
			writeJSON(rw, 200, p)
		})
	}
	if s, ok := b.(Sharer); ok {
		mux.HandleFunc("POST /v1/sessions/{ref}/share", func(rw http.ResponseWriter, r *http.Request) {
			var req ShareRequest
			if err := decode(r, &req); err != nil {
				writeErr(rw, err)
				return
			}
			out, err := s.Share(r.Context(), r.PathValue("ref"), req.User, req.Role)
			if err != nil {
				writeErr(rw, err)
				return
			}
			writeJSON(rw, 200, out)
		})
		mux.HandleFunc("POST /v1/sessions/{ref}/unshare", func(rw http.ResponseWriter, r *http.Request) {
			var req ShareRequest
			if err := decode(r, &req); err != nil {
				writeErr(rw, err)
				return
			}
			out, err := s.Unshare(r.Context(), r.PathValue("ref"), req.User)
			if err != nil {
				writeErr(rw, err)
				return
			}
			writeJSON(rw, 200, out)
		})
	}
	if uc, ok := b.(UserCredentials); ok {
		mux.HandleFunc("PUT /v1/credential", func(rw http.ResponseWriter, r *http.Request) {
			var req CredentialRequest
			if err := decode(r, &req); err != nil {
				writeErr(rw, err)
				return
			}
			sv := secret.New(req.Credential.Reveal())
			kind, ok := credential.DetectKind(sv)
			if req.Kind != "" {
				var err error
				if kind, err = credential.ParseKind(req.Kind); err != nil {
					writeErr(rw, err)
					return
				}
			} else if !ok {
				writeErr(rw, fmt.Errorf("cannot tell the kind of this credential from its prefix; give --kind oauth, api_key or auth_token: %w", errdefs.ErrInvalid))
				return
			}
			st, err := uc.SetCredential(r.Context(), kind, sv)
			if err != nil {
				writeErr(rw, err)
				return
			}
			writeJSON(rw, 200, st)
		})
		mux.HandleFunc("DELETE /v1/credential", func(rw http.ResponseWriter, r *http.Request) {
			if err := uc.RemoveCredential(r.Context()); err != nil {
				writeErr(rw, err)
				return
			}
			writeJSON(rw, 200, map[string]bool{"removed": true})
		})
	}
	if a, ok := b.(Auditor); ok {
		mux.HandleFunc("GET /v1/audit", func(rw http.ResponseWriter, r *http.Request) {
			q := AuditQuery{Session: r.URL.Query().Get("session"), User: r.URL.Query().Get("user"), Follow: r.URL.Query().Get("follow") == "1"}
			if s := r.URL.Query().Get("n"); s != "" {
				v, err := strconv.Atoi(s)
				if err != nil || v < 0 {
					writeErr(rw, fmt.Errorf("n=%q is not a count: %w", s, errdefs.ErrInvalid))
					return
				}
				q.N = v
			}
			// The status goes out with the first entry, or at the end: an
			// error before any entry is still an ordinary error answer.
			started := false
			enc := json.NewEncoder(rw)
			fl := http.NewResponseController(rw)
			err := a.Audit(r.Context(), q, func(e audit.Entry) error {
				if !started {
					rw.Header().Set("Content-Type", "application/x-ndjson")
					rw.WriteHeader(200)
					started = true
				}
				if err := enc.Encode(e); err != nil {
					return err
				}
				if q.Follow {
					return fl.Flush()
				}
				return nil
			})
			if err != nil && !started {
				writeErr(rw, err)
				return
			}
			if !started {
				rw.Header().Set("Content-Type", "application/x-ndjson")
				rw.WriteHeader(200)
			}
		})
	}
}

// Whoami calls GET /v1/whoami.
func (c *Client) Whoami(ctx context.Context) (people.Person, error) {
	var p people.Person
	return p, c.get(ctx, "/v1/whoami", &p)
}

// AllSessions calls GET /v1/sessions?all_users=1 (admins).
func (c *Client) AllSessions(ctx context.Context) ([]session.Session, error) {
	var s []session.Session
	return s, c.get(ctx, "/v1/sessions?all_users=1", &s)
}

// Share calls POST /v1/sessions/{ref}/share.
func (c *Client) Share(ctx context.Context, ref, user, role string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/share", ShareRequest{User: user, Role: role}, &s)
}

// Unshare calls POST /v1/sessions/{ref}/unshare.
func (c *Client) Unshare(ctx context.Context, ref, user string) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/unshare", ShareRequest{User: user}, &s)
}

// SetCredential calls PUT /v1/credential: the caller's own credential.
func (c *Client) SetCredential(ctx context.Context, kind string, s secret.Value) (credential.Status, error) {
	var st credential.Status
	return st, c.do(ctx, "PUT", "/v1/credential", CredentialRequest{Credential: SecretString(s.Reveal()), Kind: kind}, &st)
}

// RemoveCredential calls DELETE /v1/credential.
func (c *Client) RemoveCredential(ctx context.Context) error {
	var out map[string]bool
	return c.do(ctx, "DELETE", "/v1/credential", nil, &out)
}

// Audit calls GET /v1/audit and hands each entry to fn as it comes; with
// q.Follow it returns only when ctx ends, the Runner stops or fn fails.
func (c *Client) Audit(ctx context.Context, q AuditQuery, fn func(audit.Entry) error) error {
	v := url.Values{}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.User != "" {
		v.Set("user", q.User)
	}
	if q.N > 0 {
		v.Set("n", strconv.Itoa(q.N))
	}
	if q.Follow {
		v.Set("follow", "1")
	}
	resp, err := c.getOK(ctx, "/v1/audit?"+v.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		e, err := audit.ParseLine(sc.Bytes())
		if err != nil {
			return fmt.Errorf("the Runner sent a bad audit line: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// getOK sends a GET for path and returns the answer when it is a 200 (the
// caller closes its body); any other answer is its error, and a Runner
// that does not answer is explained.
func (c *Client) getOK(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://paddock"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.dialError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	return resp, nil
}
