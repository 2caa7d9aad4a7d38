package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
)

// projects is the Runner's project files, if it reads them.
func (g *Guard) projects() (api.Projects, error) {
	p, ok := g.inner.(api.Projects)
	if !ok {
		return nil, fmt.Errorf("this Runner reads no project files: %w", errdefs.ErrUnavailable)
	}
	return p, nil
}

// Project shows a workspace's project file to whoever may accept it (the
// Runner checks: the workspace's owner, or an admin).
func (g *Guard) Project(ctx context.Context, workspace string) (api.ProjectView, error) {
	pr, err := g.projects()
	if err != nil {
		return api.ProjectView{}, err
	}
	if _, err := caller(ctx); err != nil {
		return api.ProjectView{}, err
	}
	return pr.Project(ctx, workspace)
}

// AllowProject accepts a workspace's project file as it is; recorded in
// the audit log, with the file's hash.
func (g *Guard) AllowProject(ctx context.Context, req api.ProjectRequest) (api.ProjectView, error) {
	return g.projectChange(ctx, req, audit.ActionProjectAllow, func(pr api.Projects) (api.ProjectView, error) { return pr.AllowProject(ctx, req) })
}

// RevokeProject forgets the acceptance of a workspace's project file.
func (g *Guard) RevokeProject(ctx context.Context, req api.ProjectRequest) (api.ProjectView, error) {
	return g.projectChange(ctx, req, audit.ActionProjectRevoke, func(pr api.Projects) (api.ProjectView, error) { return pr.RevokeProject(ctx, req) })
}

func (g *Guard) projectChange(ctx context.Context, req api.ProjectRequest, action string, f func(api.Projects) (api.ProjectView, error)) (api.ProjectView, error) {
	pr, err := g.projects()
	if err != nil {
		return api.ProjectView{}, err
	}
	p, err := caller(ctx)
	if err != nil {
		return api.ProjectView{}, err
	}
	v, err := f(pr)
	g.record(p, action, nil, err, func(e *audit.Entry) { e.Target = req.Workspace; e.Detail = "sha256 " + req.Sum })
	return v, err
}
