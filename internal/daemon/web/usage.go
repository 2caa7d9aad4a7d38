package web

import (
	"net/http"

	"github.com/paddockhq/paddock/internal/daemon/api"
)

// usageRoutes serves GET /api/usage (the query of the socket API's
// GET /v1/usage: session, since, by, all_users) when the Backend reports
// usage: the page's usage table and its tokens-per-hour chart. The
// Backend (the access.Guard) decides which sessions the person sees.
func (s *Server) usageRoutes(mux *http.ServeMux) {
	u, ok := s.b.(api.UsageReader)
	if !ok {
		return
	}
	mux.Handle("GET /api/usage", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		q, err := api.ParseUsageQuery(r.URL.Query())
		if err != nil {
			return nil, err
		}
		return u.Usage(r.Context(), q)
	})))
}
