package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/usage"
)

// UsageReader is the optional Backend feature behind
//
//	GET /v1/usage?session=REF&since=RFC3339&by=KEY&all_users=1   usage.Report
//
// the credential proxy's forwarded requests, their tokens and estimated
// cost (the Runner's [prices]), summed by session (default), user, model,
// day or hour: of one session, or of every session the caller sees
// (all_users: every person's, for admins).
type UsageReader interface {
	Usage(ctx context.Context, q UsageQuery) (usage.Report, error)
}

// UsageQuery says what a usage report covers.
type UsageQuery struct {
	// Session is a session's name or id; "" is every session the caller
	// sees (with AllUsers, every person's: admins only).
	Session  string
	AllUsers bool
	// Since leaves out the requests before it; zero keeps them all.
	Since time.Time
	// By is what the rows are summed by; "" is by session.
	By usage.Key
}

// ParseUsageQuery reads a usage route's query string.
func ParseUsageQuery(v url.Values) (UsageQuery, error) {
	q := UsageQuery{Session: v.Get("session"), AllUsers: v.Get("all_users") == "1", By: usage.BySession}
	if s := v.Get("by"); s != "" {
		k, err := usage.ParseKey(s)
		if err != nil {
			return q, fmt.Errorf("by: %v: %w", err, errdefs.ErrInvalid)
		}
		q.By = k
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, fmt.Errorf("since=%q is not an RFC 3339 time: %w", s, errdefs.ErrInvalid)
		}
		q.Since = t
	}
	return q, nil
}

func (q UsageQuery) values() url.Values {
	v := url.Values{}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.AllUsers {
		v.Set("all_users", "1")
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.By != "" {
		v.Set("by", string(q.By))
	}
	return v
}

func usageRoute(mux *http.ServeMux, b Backend) {
	u, ok := b.(UsageReader)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseUsageQuery(r.URL.Query())
		if err != nil {
			writeErr(w, err)
			return
		}
		rep, err := u.Usage(r.Context(), q)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, rep)
	})
}

// Usage calls GET /v1/usage.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (usage.Report, error) {
	var rep usage.Report
	return rep, c.get(ctx, "/v1/usage?"+q.values().Encode(), &rep)
}
