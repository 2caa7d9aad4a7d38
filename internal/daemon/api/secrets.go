package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/service"
)

// Secrets is the optional Backend feature behind
//
//	GET    /v1/secrets          → []service.Status
//	PUT    /v1/secrets/{name}   SecretRequest → service.Status
//	DELETE /v1/secrets/{name}
//
// the caller's own service credentials (paddock secret): each person
// sees and changes only theirs, and no answer ever holds a value.
type Secrets interface {
	ListSecrets(ctx context.Context) ([]service.Status, error)
	SetSecret(ctx context.Context, s service.Secret) (service.Status, error)
	RemoveSecret(ctx context.Context, name string) error
}

// SecretRequest stores a service credential.
type SecretRequest struct {
	Kind       string       `json:"kind"`
	Host       string       `json:"host,omitempty"`
	HeaderName string       `json:"header_name,omitempty"`
	PathPrefix string       `json:"path_prefix,omitempty"`
	Value      SecretString `json:"value"`
}

func secretRoutes(mux *http.ServeMux, b Backend) {
	sb, ok := b.(Secrets)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/secrets", func(w http.ResponseWriter, r *http.Request) {
		l, err := sb.ListSecrets(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		if l == nil {
			l = []service.Status{}
		}
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("PUT /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req SecretRequest
		if err := decodeLimit(r, &req, 64<<10); err != nil {
			writeErr(w, err)
			return
		}
		kind, err := service.ParseKind(req.Kind)
		if err != nil {
			writeErr(w, err)
			return
		}
		st, err := sb.SetSecret(r.Context(), service.Secret{Name: r.PathValue("name"), Kind: kind, Host: req.Host,
			HeaderName: req.HeaderName, PathPrefix: req.PathPrefix, Value: secret.New(req.Value.Reveal())})
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, st)
	})
	mux.HandleFunc("DELETE /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := sb.RemoveSecret(r.Context(), r.PathValue("name")); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]bool{"removed": true})
	})
}

// ListSecrets calls GET /v1/secrets.
func (c *Client) ListSecrets(ctx context.Context) ([]service.Status, error) {
	var l []service.Status
	return l, c.get(ctx, "/v1/secrets", &l)
}

// SetSecret calls PUT /v1/secrets/{name}.
func (c *Client) SetSecret(ctx context.Context, name string, req SecretRequest) (service.Status, error) {
	var st service.Status
	return st, c.do(ctx, http.MethodPut, "/v1/secrets/"+url.PathEscape(name), req, &st)
}

// RemoveSecret calls DELETE /v1/secrets/{name}.
func (c *Client) RemoveSecret(ctx context.Context, name string) error {
	var out map[string]bool
	return c.do(ctx, http.MethodDelete, "/v1/secrets/"+url.PathEscape(name), nil, &out)
}
