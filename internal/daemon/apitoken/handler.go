package apitoken

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/faillimit"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// Bounds on failed token checks from one address: at most maxFailures
// within failWindow, then every request from it is refused (429) until
// the window passes.
const (
	maxFailures = 20
	failWindow  = time.Minute
	maxTracked  = 10_000
)

// Handler serves the API of mux on a network listener: every request
// must carry "Authorization: Bearer <token>" of a token in s, and the
// route must be one of api.Routes whose scope the token's allows
// (api.ScopeOf); it is then made as the token's person (who: checked on
// every request), with Via "token ID" for the audit log. Everything else
// is refused with the reason, before mux sees it. A long answer (events,
// a followed audit log) ends within api.Recheck of the token's revocation
// or its person's removal.
func (s *Store) Handler(mux *http.ServeMux, who func(uint32) (people.Person, error)) http.Handler {
	lim := faillimit.New(maxFailures, failWindow, maxTracked)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ip := remoteIP(r)
		if lim.Blocked(ip, time.Now()) {
			refuse(w, fmt.Errorf("too many requests with a wrong API token from %s; wait a minute: %w", ip, errdefs.ErrLimit))
			return
		}
		v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			refuse(w, fmt.Errorf("the API here needs an API token (Authorization: Bearer pdk_at_…); make one on the Runner's host with: paddock token create --scope read: %w", errdefs.ErrUnauthorized))
			return
		}
		info, err := s.Check(secret.New(strings.TrimSpace(v)))
		if err != nil {
			lim.Fail(ip, time.Now())
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock", error="invalid_token"`)
			refuse(w, err)
			return
		}
		_, pattern := mux.Handler(r)
		need, known := api.ScopeOf(pattern)
		if !known && pattern != "/" && pattern != "" {
			// A route served but not in api.Routes has no scope: no token
			// reaches it (TestRoutesListed keeps there being none).
			refuse(w, fmt.Errorf("%s is not open to API tokens: %w", pattern, errdefs.ErrForbidden))
			return
		}
		if known && !info.Scope.Allows(need) {
			what := "the Runner's socket only"
			if need != api.ScopeSocket {
				what = "a token of scope " + string(need)
			}
			refuse(w, fmt.Errorf("this API token's scope is %s, and %s needs %s: %w", info.Scope, pattern, what, errdefs.ErrForbidden))
			return
		}
		p, err := who(info.UID)
		if err != nil {
			refuse(w, fmt.Errorf("the API token's owner may no longer use this Runner: %w", errdefs.ErrForbidden))
			return
		}
		p.Via = "token " + info.ID
		// A long answer ends when the token is revoked or its person
		// leaves the group.
		tok := secret.New(strings.TrimSpace(v))
		ctx, cancel := api.WhileAllowed(r.Context(), s.recheck(), func() bool {
			if _, err := s.Check(tok); err != nil {
				return false
			}
			_, err := who(info.UID)
			return err == nil
		})
		defer cancel()
		mux.ServeHTTP(w, r.WithContext(people.With(ctx, p)))
	})
}

func refuse(w http.ResponseWriter, err error) {
	st := http.StatusInternalServerError
	kind := "internal"
	switch {
	case errdefs.Is(err, errdefs.ErrUnauthorized):
		st, kind = http.StatusUnauthorized, "unauthorized"
	case errdefs.Is(err, errdefs.ErrForbidden):
		st, kind = http.StatusForbidden, "forbidden"
	case errdefs.Is(err, errdefs.ErrLimit):
		st, kind = http.StatusTooManyRequests, "limit"
		w.Header().Set("Retry-After", "60")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "kind": kind})
}

func remoteIP(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}
