package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// ActivityWaiter is the optional Backend feature behind
//
//	GET /v1/sessions/{ref}/wait?for=STATE&timeout=DURATION   WaitResult
//
// a long poll: the answer comes when the session's claude is in STATE
// (working, waiting, exited, starting), when the session stops running,
// or after DURATION (default 30s, at most MaxWaitPoll), whichever is
// first. Met says whether STATE holds; a client that wants to wait
// longer asks again.
type ActivityWaiter interface {
	WaitActivity(ctx context.Context, ref string, want activity.State) (session.Session, bool, error)
}

// MaxWaitPoll bounds one wait request.
const MaxWaitPoll = 5 * time.Minute

// WaitResult answers a wait.
type WaitResult struct {
	Session session.Session `json:"session"`
	Met     bool            `json:"met"`
}

func waitRoute(mux *http.ServeMux, b Backend) {
	w, ok := b.(ActivityWaiter)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/sessions/{ref}/wait", func(rw http.ResponseWriter, r *http.Request) {
		want := activity.State(r.URL.Query().Get("for"))
		if want == "" {
			want = activity.Waiting
		}
		d := 30 * time.Second
		if v := r.URL.Query().Get("timeout"); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d <= 0 || d > MaxWaitPoll {
				writeErr(rw, fmt.Errorf("timeout=%q is not a duration in (0, %v]: %w", v, MaxWaitPoll, errdefs.ErrInvalid))
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		s, met, err := w.WaitActivity(ctx, r.PathValue("ref"), want)
		if err != nil {
			writeErr(rw, err)
			return
		}
		writeJSON(rw, 200, WaitResult{Session: s, Met: met})
	})
}

// WaitActivity calls GET /v1/sessions/{ref}/wait once: it returns when
// the session's claude is in want, the session stops running, or after
// poll (at most MaxWaitPoll).
func (c *Client) WaitActivity(ctx context.Context, ref string, want activity.State, poll time.Duration) (WaitResult, error) {
	var res WaitResult
	q := url.Values{"for": {string(want)}, "timeout": {poll.String()}}
	return res, c.get(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/wait?"+q.Encode(), &res)
}
