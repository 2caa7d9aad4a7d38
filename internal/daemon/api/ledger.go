package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
)

// Ledgerer is the optional Backend feature behind
//
//	GET /v1/sessions/{ref}/ledger[?transcript=1]   LedgerResult
//
// a session's ledger (see package ledger): every proxied request and
// egress decision in its decision log, in time order, joined by id to the
// tool calls they have to do with; with transcript=1 also to Claude
// Code's transcript, read from the running box, for each call's tool and
// input.
type Ledgerer interface {
	Ledger(ctx context.Context, ref string, o LedgerOptions) (LedgerResult, error)
}

// LedgerOptions says what a ledger is joined with.
type LedgerOptions struct {
	// WithTranscript joins the transcript too; the session must be
	// running (its transcript is read through its box).
	WithTranscript bool `json:"with_transcript,omitempty"`
}

// LedgerResult is a session's ledger.
type LedgerResult struct {
	Records []ledger.Record `json:"records"`
	// Transcript says how the transcript read (nil without one).
	Transcript *TranscriptRead `json:"transcript,omitempty"`
}

// TranscriptRead describes the transcript a ledger was joined with.
type TranscriptRead struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
	// Cut is true when only the transcript's last Bytes were read (it was
	// larger): calls before that part have no tool or input.
	Cut   bool `json:"cut,omitempty"`
	Lines int  `json:"lines"`
	// Skipped lines could not be read; Problems says why, for the first.
	Skipped  int      `json:"skipped,omitempty"`
	Problems []string `json:"problems,omitempty"`
	Calls    int      `json:"calls"`
}

func ledgerRoute(mux *http.ServeMux, b Backend) {
	l, ok := b.(Ledgerer)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/sessions/{ref}/ledger", func(w http.ResponseWriter, r *http.Request) {
		var o LedgerOptions
		if v := r.URL.Query().Get("transcript"); v != "" {
			var err error
			if o.WithTranscript, err = strconv.ParseBool(v); err != nil {
				writeErr(w, fmt.Errorf("transcript=%q is not true or false: %w", v, errdefs.ErrInvalid))
				return
			}
		}
		res, err := l.Ledger(r.Context(), r.PathValue("ref"), o)
		if err != nil {
			writeErr(w, err)
			return
		}
		if res.Records == nil {
			res.Records = []ledger.Record{}
		}
		writeJSON(w, 200, res)
	})
}

// Ledger calls GET /v1/sessions/{ref}/ledger.
func (c *Client) Ledger(ctx context.Context, ref string, o LedgerOptions) (LedgerResult, error) {
	var res LedgerResult
	q := url.Values{}
	if o.WithTranscript {
		q.Set("transcript", "1")
	}
	path := "/v1/sessions/" + url.PathEscape(ref) + "/ledger"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return res, c.get(ctx, path, &res)
}
