package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// OpenPullRequest pushes a session's branch with its owner's service
// credential and opens a pull request: the owner's (and admins') alone,
// as a merge is. Each, and each refusal of one to a person who may see
// the session, is audited.
func (g *Guard) OpenPullRequest(ctx context.Context, ref string, req api.PRRequest) (api.PRResult, error) {
	p, ok := g.inner.(api.PullRequester)
	if !ok {
		return api.PRResult{}, fmt.Errorf("this Runner opens no pull requests: %w", errdefs.ErrUnavailable)
	}
	var res api.PRResult
	_, err := g.act(ctx, ref, session.OpPR, audit.ActionPR, func(e *audit.Entry) {
		if res.URL != "" {
			e.Detail = fmt.Sprintf("%s %s %s #%d", res.Repo, res.Branch, res.Commit, res.Number)
		}
	}, func(id string) (session.Session, error) {
		var err error
		res, err = p.OpenPullRequest(ctx, id, req)
		return session.Session{ID: id}, err
	})
	return res, err
}

var _ api.PullRequester = (*Guard)(nil)
