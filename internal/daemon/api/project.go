package api

import (
	"context"
	"net/http"
	"net/url"
)

// ProjectView is a workspace's project file (.paddock.toml) as the Runner
// sees it: whether there is one, whether its owner accepted it as it is,
// and what changed since they did.
type ProjectView struct {
	Workspace string `json:"workspace"`
	Exists    bool   `json:"exists"`
	// Status is "allowed", "new" or "changed" (project.Status).
	Status string `json:"status,omitempty"`
	// Diff is what changed since the last acceptance (the whole file
	// when new); Sum the hash of the file as read, what an allow names.
	Diff string `json:"diff,omitempty"`
	Sum  string `json:"sum,omitempty"`
}

// ProjectRequest names a workspace (absolute) and, for an allow, the sum
// of the file the person read (ProjectView.Sum): a file changed since is
// not accepted.
type ProjectRequest struct {
	Workspace string `json:"workspace"`
	Sum       string `json:"sum,omitempty"`
}

// Projects is the optional Backend feature behind /v1/project (paddock
// project).
type Projects interface {
	Project(ctx context.Context, workspace string) (ProjectView, error)
	AllowProject(ctx context.Context, req ProjectRequest) (ProjectView, error)
	RevokeProject(ctx context.Context, req ProjectRequest) (ProjectView, error)
}

// projectRoutes adds the Projects routes when b has them.
func projectRoutes(b Backend, one func(pattern string, f func(r *http.Request) (any, error))) {
	p, ok := b.(Projects)
	if !ok {
		return
	}
	one("GET /v1/project", func(r *http.Request) (any, error) { return p.Project(r.Context(), r.URL.Query().Get("workspace")) })
	one("POST /v1/project/allow", func(r *http.Request) (any, error) {
		var req ProjectRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return p.AllowProject(r.Context(), req)
	})
	one("POST /v1/project/revoke", func(r *http.Request) (any, error) {
		var req ProjectRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return p.RevokeProject(r.Context(), req)
	})
}

// Project calls GET /v1/project.
func (c *Client) Project(ctx context.Context, workspace string) (ProjectView, error) {
	var v ProjectView
	return v, c.do(ctx, "GET", "/v1/project?workspace="+url.QueryEscape(workspace), nil, &v)
}

// AllowProject calls POST /v1/project/allow.
func (c *Client) AllowProject(ctx context.Context, req ProjectRequest) (ProjectView, error) {
	var v ProjectView
	return v, c.do(ctx, "POST", "/v1/project/allow", req, &v)
}

// RevokeProject calls POST /v1/project/revoke.
func (c *Client) RevokeProject(ctx context.Context, req ProjectRequest) (ProjectView, error) {
	var v ProjectView
	return v, c.do(ctx, "POST", "/v1/project/revoke", req, &v)
}
