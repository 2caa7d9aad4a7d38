package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
)

// Cloner is the optional Backend feature of clone sessions
// (session.Clone) behind
//
//	GET  /v1/sessions/{ref}/diff?stat=1&name_only=1&color=1&no_untracked=1
//	                                 text/plain: the change against its base
//	POST /v1/sessions/{ref}/fetch    FetchResult
//	POST /v1/sessions/{ref}/merge    MergeOptions → MergeResult
//
// through which a clone session's work is seen and brought back.
type Cloner interface {
	// DiffSession writes to w the session's change against its base, as
	// git diff prints it: what it committed and what it has not yet,
	// then the files it made that git does not track.
	DiffSession(ctx context.Context, ref string, o DiffOptions, w io.Writer) error
	// FetchSession brings the session's branch into its host repository
	// as refs/remotes/paddock/<session>/<branch>, as the repository's
	// owner, running nothing of the box's or the repository's.
	FetchSession(ctx context.Context, ref string) (FetchResult, error)
	// MergeSession fetches the session's branch, then merges it into a
	// branch of the host repository (o.Into, or the one checked out), as
	// the repository's owner, running nothing of the repository's: a
	// fast-forward, a merge commit or a squash. A dirty working tree or a
	// conflict is errdefs.ErrConflict and changes nothing; the result
	// then names the conflicting files.
	MergeSession(ctx context.Context, ref string, o MergeOptions) (MergeResult, error)
}

// MergeOptions say how paddock merge merges.
type MergeOptions struct {
	// Into is the branch merged into; "" is the one checked out.
	Into string `json:"into,omitempty"`
	// Squash makes one commit of the session's work.
	Squash bool `json:"squash,omitempty"`
	// Identity commits a merge (not a fast-forward) when the repository's
	// config names no user: the person's own git identity.
	Identity *gitident.Identity `json:"identity,omitempty"`
}

// MergeResult says what a merge did.
type MergeResult struct {
	Fetch FetchResult `json:"fetch"`
	// Into is the branch; Old and New its commit before and after.
	Into string `json:"into"`
	Old  string `json:"old"`
	New  string `json:"new"`
	// Kind is "up to date", "fast-forward", "merge" or "squash".
	Kind string `json:"kind"`
	// WorkTree says the branch is checked out and its files were updated.
	WorkTree bool `json:"work_tree,omitempty"`
	// Files is how many files the merge changed on the branch.
	Files int `json:"files"`
	// HostRun are the changed files the host's tools run or read.
	HostRun []HostRunPath `json:"host_run,omitempty"`
}

// HostRunPath is a changed file the owner's machine may run, and why.
type HostRunPath struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// DiffOptions shape paddock diff's output.
type DiffOptions struct {
	Stat     bool // a diffstat only (git diff --stat)
	NameOnly bool // file names only
	Color    bool // colour, for a terminal
	// NoUntracked leaves out the files git does not track: the search
	// for them is most of a diff's cost in a large tree.
	NoUntracked bool
}

// FetchResult says what a fetch brought into the host repository.
type FetchResult struct {
	// Ref is the host repository's ref the session's branch now is;
	// Commit its commit, Old what it pointed at before ("" if new).
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	Old    string `json:"old,omitempty"`
	// Ahead is how many commits the branch has beyond its base.
	Ahead int `json:"ahead"`
	// Bytes is the size of the bundle that came from the box.
	Bytes int64 `json:"bytes"`
	// Refused lists what the box offered and the fetch did not take, why.
	Refused []string `json:"refused,omitempty"`
	// Uncommitted says the box has changes not committed, which a fetch
	// does not bring.
	Uncommitted bool `json:"uncommitted,omitempty"`
}

func cloneRoutes(mux *http.ServeMux, b Backend) {
	c, ok := b.(Cloner)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/sessions/{ref}/diff", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var o DiffOptions
		for key, b := range map[string]*bool{"stat": &o.Stat, "name_only": &o.NameOnly, "color": &o.Color, "no_untracked": &o.NoUntracked} {
			if v := q.Get(key); v != "" {
				var err error
				if *b, err = strconv.ParseBool(v); err != nil {
					writeErr(w, fmt.Errorf("%s=%q is not true or false: %w", key, v, errdefs.ErrInvalid))
					return
				}
			}
		}
		// The diff streams: an error once it began ends the body early,
		// which the client reads as a cut answer.
		sw := &startedWriter{w: w}
		if err := c.DiffSession(r.Context(), r.PathValue("ref"), o, sw); err != nil && !sw.started {
			writeErr(w, err)
		}
	})
	mux.HandleFunc("POST /v1/sessions/{ref}/fetch", func(w http.ResponseWriter, r *http.Request) {
		res, err := c.FetchSession(r.Context(), r.PathValue("ref"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
	mux.HandleFunc("POST /v1/sessions/{ref}/merge", func(w http.ResponseWriter, r *http.Request) {
		var o MergeOptions
		if err := decode(r, &o); err != nil {
			writeErr(w, err)
			return
		}
		res, err := c.MergeSession(r.Context(), r.PathValue("ref"), o)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// startedWriter writes a text/plain 200 before its first byte.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		s.w.WriteHeader(http.StatusOK)
	}
	n, err := s.w.Write(p)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return n, err
}

// DiffSession calls GET /v1/sessions/{ref}/diff and copies the diff to w.
func (c *Client) DiffSession(ctx context.Context, ref string, o DiffOptions, w io.Writer) error {
	q := url.Values{}
	for key, b := range map[string]bool{"stat": o.Stat, "name_only": o.NameOnly, "color": o.Color, "no_untracked": o.NoUntracked} {
		if b {
			q.Set(key, "1")
		}
	}
	resp, err := c.getOK(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/diff?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("the diff from the Runner was cut short: %w", err)
	}
	return nil
}

// FetchSession calls POST /v1/sessions/{ref}/fetch.
func (c *Client) FetchSession(ctx context.Context, ref string) (FetchResult, error) {
	var res FetchResult
	return res, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/fetch", nil, &res)
}

// MergeSession calls POST /v1/sessions/{ref}/merge.
func (c *Client) MergeSession(ctx context.Context, ref string, o MergeOptions) (MergeResult, error) {
	var res MergeResult
	return res, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/merge", o, &res)
}
