package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/message"
)

// MaxDiff bounds the diff the page shows; past it the page says to read
// the whole with paddock diff.
const MaxDiff = 8 << 20

// TooBig ends a diff cut at MaxDiff, on a line of its own.
const TooBig = "\n[paddock: the diff goes on past 8 MiB; paddock diff NAME prints all of it]\n"

// errTooBig stops a diff's stream at MaxDiff.
var errTooBig = errors.New("the diff is larger than the page shows")

// reviewRoutes are the review of a clone session (its diff, merge) and
// messages to its claude (review comments), where the Backend has them:
//
//	GET  /api/sessions/{ref}/diff      text/plain, as paddock diff prints it (no colour)
//	POST /api/sessions/{ref}/merge     api.MergeOptions (no identity) → api.MergeResult
//	POST /api/sessions/{ref}/message   api.MessageRequest → api.MessageResult
//
// The Backend (the access Guard) decides who may: the same checks as the
// CLI's. A merge from the page commits, when it is not a fast-forward, as
// the repository's own configured identity only: the Runner reads no
// person's home for it (paddock merge, run by the person, does).
func (s *Server) reviewRoutes(mux *http.ServeMux) {
	if cl, ok := s.b.(api.Cloner); ok {
		mux.Handle("GET /api/sessions/{ref}/diff", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cw := &cappedWriter{w: w, max: MaxDiff}
			err := cl.DiffSession(r.Context(), r.PathValue("ref"), api.DiffOptions{}, cw)
			switch {
			case cw.over: // however the Backend wrapped errTooBig
				_, _ = io.WriteString(w, TooBig)
			case err != nil && cw.n == 0:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(statusOf(err))
				_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			case err != nil: // cut short: the page sees no end marker
				_, _ = fmt.Fprintf(w, "\n[paddock: the diff was cut short: %v]\n", err)
			case cw.n == 0:
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			}
		})))
		mux.Handle("POST /api/sessions/{ref}/merge", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			var o api.MergeOptions
			if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4<<10)).Decode(&o); err != nil {
				return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
			}
			o.Identity = nil // the repository's own, or none (see above)
			return cl.MergeSession(r.Context(), r.PathValue("ref"), o)
		})))
	}
	if m, ok := s.b.(api.Messenger); ok {
		mux.Handle("POST /api/sessions/{ref}/message", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			var req api.MessageRequest
			if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 6*message.MaxBytes+1<<10)).Decode(&req); err != nil {
				return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
			}
			return m.SendMessage(r.Context(), r.PathValue("ref"), req)
		})))
	}
}

// cappedWriter passes on up to max bytes as a text/plain answer, then
// fails with errTooBig.
type cappedWriter struct {
	w    http.ResponseWriter
	n    int
	max  int
	over bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.n == 0 && len(p) > 0 {
		c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		c.w.Header().Set("Cache-Control", "no-store")
	}
	if c.n+len(p) > c.max {
		k, _ := c.w.Write(p[:c.max-c.n])
		c.n += k
		c.over = true
		return k, errTooBig
	}
	k, err := c.w.Write(p)
	c.n += k
	return k, err
}
