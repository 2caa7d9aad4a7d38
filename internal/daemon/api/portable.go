package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Porter is the optional Backend feature behind
//
//	GET  /v1/sessions/{ref}/export   a session file (application/gzip)
//	POST /v1/sessions/import?name=N&backend=B&workspace=W&no_start=1
//	     &keep_egress=1&keep_credential_mode=1&keep_limits=1&source=FILE
//	                                 body: a session file; ImportResult
//
// that moves a session, its conversation and history, to another Runner
// or backend (package portable, docs/PORTABLE.md).
type Porter interface {
	// ExportSession returns the session's file, whole: an error comes
	// before any byte of it.
	ExportSession(ctx context.Context, ref string) ([]byte, error)
	// ImportSession reads a session file (at most portable.DefaultLimits)
	// and makes a session of it, owned by the caller. A file it refuses
	// leaves nothing behind.
	ImportSession(ctx context.Context, req ImportRequest, file io.Reader) (ImportResult, error)
}

// ImportRequest says how an imported session is made; the rest comes
// from the file.
type ImportRequest struct {
	// Name, if set, replaces the name in the file.
	Name string `json:"name,omitempty"`
	// Backend, if set, replaces the Runner's default backend.
	Backend string `json:"backend,omitempty"`
	// Workspace is a host directory to bind at /workspace (the file
	// carries no workspace: a host path means nothing on another host).
	Workspace string `json:"workspace,omitempty"`
	// NoStart makes the session and its volume without starting claude.
	NoStart bool `json:"no_start,omitempty"`
	// An import never weakens anything of its own accord: what the file
	// asks for beyond the importing Runner's defaults is taken only when
	// the importer says so. KeepEgress takes the file's egress posture,
	// allow rules, ask mode, policies and approvals (recorded as
	// imported); KeepCredentialMode its credential mode direct; KeepLimits
	// its limits and budgets where they are looser than the defaults.
	KeepEgress         bool `json:"keep_egress,omitempty"`
	KeepCredentialMode bool `json:"keep_credential_mode,omitempty"`
	KeepLimits         bool `json:"keep_limits,omitempty"`
	// Source names the file (its base name), for the record of the
	// approvals an import carries over.
	Source string `json:"source,omitempty"`
}

// ImportResult is the session an import made.
type ImportResult struct {
	Session session.Session `json:"session"`
	// Conversation is the Claude Code conversation it resumes.
	Conversation string `json:"conversation,omitempty"`
	// Files is how many files of Claude Code's state came in.
	Files int `json:"files"`
	// Decisions is how many decision log entries came in.
	Decisions int `json:"decisions"`
	// Notes say what the import left out or changed, in words.
	Notes []string `json:"notes,omitempty"`
	// Adopted lists every setting taken from the file, in words; Declined
	// each one it asked for and the import did not take (it would have
	// weakened the session), with the flag that takes it.
	Adopted  []string `json:"adopted,omitempty"`
	Declined []string `json:"declined,omitempty"`
}

// maxImportBody bounds an import's body; portable.Read's own cap on the
// compressed stream (a little lower) refuses a larger file first, in words.
var maxImportBody = portable.DefaultLimits.MaxCompressed + 1<<20

func portableRoutes(mux *http.ServeMux, b Backend) {
	p, ok := b.(Porter)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/sessions/{ref}/export", func(w http.ResponseWriter, r *http.Request) {
		file, err := p.ExportSession(r.Context(), r.PathValue("ref"))
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(file)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(file)
	})
	mux.HandleFunc("POST /v1/sessions/import", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		req := ImportRequest{Name: q.Get("name"), Backend: q.Get("backend"), Workspace: q.Get("workspace"), Source: q.Get("source")}
		for key, b := range map[string]*bool{"no_start": &req.NoStart, "keep_egress": &req.KeepEgress,
			"keep_credential_mode": &req.KeepCredentialMode, "keep_limits": &req.KeepLimits} {
			if v := q.Get(key); v != "" {
				var err error
				if *b, err = strconv.ParseBool(v); err != nil {
					writeErr(w, fmt.Errorf("%s=%q is not true or false: %w", key, v, errdefs.ErrInvalid))
					return
				}
			}
		}
		res, err := p.ImportSession(r.Context(), req, http.MaxBytesReader(w, r.Body, maxImportBody))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// ExportSession calls GET /v1/sessions/{ref}/export and writes the file
// to w; nothing is written to w unless the Runner made the file.
func (c *Client) ExportSession(ctx context.Context, ref string, w io.Writer) error {
	resp, err := c.getOK(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/export")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Whole before written: a cut answer never leaves half a file.
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, portable.DefaultLimits.MaxCompressed+1))
	switch {
	case err != nil:
		return fmt.Errorf("read the session file from the Runner: %w", err)
	case n > portable.DefaultLimits.MaxCompressed:
		return fmt.Errorf("the Runner sent more than %d bytes: %w", portable.DefaultLimits.MaxCompressed, errdefs.ErrInvalid)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return fmt.Errorf("the session file from the Runner was cut short (%d of %d bytes); export again", n, resp.ContentLength)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// ImportSession calls POST /v1/sessions/import with file as the body.
func (c *Client) ImportSession(ctx context.Context, req ImportRequest, file io.Reader) (ImportResult, error) {
	q := url.Values{}
	if req.Name != "" {
		q.Set("name", req.Name)
	}
	if req.Backend != "" {
		q.Set("backend", req.Backend)
	}
	if req.Workspace != "" {
		q.Set("workspace", req.Workspace)
	}
	for key, b := range map[string]bool{"no_start": req.NoStart, "keep_egress": req.KeepEgress,
		"keep_credential_mode": req.KeepCredentialMode, "keep_limits": req.KeepLimits} {
		if b {
			q.Set(key, "1")
		}
	}
	if req.Source != "" {
		q.Set("source", req.Source)
	}
	u := "http://paddock/v1/sessions/import"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, file)
	if err != nil {
		return ImportResult{}, err
	}
	hr.Header.Set("Content-Type", "application/gzip")
	var res ImportResult
	return res, c.roundTrip(hr, &res)
}
