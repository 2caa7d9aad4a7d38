package api

import (
	"context"
	"net/http"
	"net/url"
)

// PullRequester is the optional Backend feature behind
//
//	POST /v1/sessions/{ref}/pr   PRRequest → PRResult
//
// paddock pr: the session's branch pushed with its owner's service
// credential, from the host, and a pull request opened; the box is given
// nothing.
type PullRequester interface {
	OpenPullRequest(ctx context.Context, ref string, req PRRequest) (PRResult, error)
}

// PRRequest says what pull request to open. Title defaults to the
// branch's last commit's subject, Base to the repository's default
// branch; Secret names the grant's secret when the session has several.
type PRRequest struct {
	Title  string `json:"title,omitempty"`
	Body   string `json:"body,omitempty"`
	Base   string `json:"base,omitempty"`
	Draft  bool   `json:"draft,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// PRResult is the pull request opened.
type PRResult struct {
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	Commit string `json:"commit"`
	Number int    `json:"number"`
	URL    string `json:"url"`
}

func prRoute(mux *http.ServeMux, b Backend) {
	p, ok := b.(PullRequester)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/sessions/{ref}/pr", func(w http.ResponseWriter, r *http.Request) {
		var req PRRequest
		if err := decodeLimit(r, &req, 1<<20); err != nil {
			writeErr(w, err)
			return
		}
		res, err := p.OpenPullRequest(r.Context(), r.PathValue("ref"), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// OpenPullRequest calls POST /v1/sessions/{ref}/pr.
func (c *Client) OpenPullRequest(ctx context.Context, ref string, req PRRequest) (PRResult, error) {
	var res PRResult
	return res, c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(ref)+"/pr", req, &res)
}
