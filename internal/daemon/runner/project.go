package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/project"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// A workspace's project file (.paddock.toml) is host-side configuration a
// box can write, so a session uses it only as its owner accepted it
// (paddock project allow, kept in <state-dir>/projects): a create on a
// workspace whose file is new or changed since is refused with the diff.
// What the file asks for fills what the request leaves out (model,
// effort, egress) and adds what only it says (environment, ports, image,
// setup command); paddock run --no-project ignores it.

// ProjectsDir is where, in the state directory, the Runner keeps the
// project files its people accepted.
const ProjectsDir = "projects"

// projectWorkspace checks a workspace named for a project command: an
// absolute path that could be a session's workspace, whose owner is the
// caller (or the caller an admin).
func (r *Runner) projectWorkspace(ctx context.Context, ws string) (string, error) {
	if !filepath.IsAbs(ws) {
		return "", fmt.Errorf("workspace %q is not an absolute path: %w", ws, errdefs.ErrInvalid)
	}
	ws = filepath.Clean(ws)
	_, own, err := wsmount.Check(ws)
	if err != nil {
		return "", err
	}
	if p := r.caller(ctx); p.UID != uint32(own.UID) && !r.usesOwnersCredential(p) {
		return "", fmt.Errorf("%s is uid %d's; only they (or an admin) may accept its project file: %w", ws, own.UID, errdefs.ErrForbidden)
	}
	return ws, nil
}

// Project shows a workspace's project file: whether there is one, and
// what changed since it was accepted.
func (r *Runner) Project(ctx context.Context, workspace string) (api.ProjectView, error) {
	ws, err := r.projectWorkspace(ctx, workspace)
	if err != nil {
		return api.ProjectView{}, err
	}
	f, err := project.Load(ws)
	if err != nil || f == nil {
		return api.ProjectView{Workspace: ws}, err
	}
	d, err := r.projects.Check(ws, f)
	if err != nil {
		return api.ProjectView{}, err
	}
	return api.ProjectView{Workspace: ws, Exists: true, Status: string(d.Status), Diff: d.Diff, Sum: f.Sum}, nil
}

// AllowProject accepts a workspace's project file as the caller read it
// (req.Sum): a file that changed since is refused, to be read again.
func (r *Runner) AllowProject(ctx context.Context, req api.ProjectRequest) (api.ProjectView, error) {
	ws, err := r.projectWorkspace(ctx, req.Workspace)
	if err != nil {
		return api.ProjectView{}, err
	}
	f, err := project.Load(ws)
	if err != nil {
		return api.ProjectView{}, err
	}
	if f == nil {
		return api.ProjectView{}, fmt.Errorf("%s has no %s to accept: %w", ws, project.FileName, errdefs.ErrNotFound)
	}
	if !strings.EqualFold(req.Sum, f.Sum) {
		return api.ProjectView{}, fmt.Errorf("%s changed since it was shown to you; read it again (paddock project show): %w", filepath.Join(ws, project.FileName), errdefs.ErrConflict)
	}
	if err := r.projects.Allow(ws, f.Sum, f); err != nil {
		return api.ProjectView{}, err
	}
	return api.ProjectView{Workspace: ws, Exists: true, Status: string(project.Allowed), Sum: f.Sum}, nil
}

// RevokeProject forgets a workspace's accepted project file: the next
// session on it asks again.
func (r *Runner) RevokeProject(ctx context.Context, req api.ProjectRequest) (api.ProjectView, error) {
	ws, err := r.projectWorkspace(ctx, req.Workspace)
	if err != nil {
		return api.ProjectView{}, err
	}
	if err := r.projects.Revoke(ws); err != nil {
		return api.ProjectView{}, err
	}
	return r.Project(ctx, ws)
}

// loadProject is the create's look at the workspace's project file: the
// file and its owner's decision, or why it cannot be used. Nothing for a
// request without a workspace or with --no-project.
func (r *Runner) loadProject(req api.CreateRequest, ws string) (*project.File, project.Decision, error) {
	if req.NoProject || ws == "" {
		return nil, project.Decision{}, nil
	}
	f, err := project.Load(ws)
	if err != nil || f == nil {
		return nil, project.Decision{}, err
	}
	d, err := r.projects.Check(ws, f)
	return f, d, err
}

// applyProject lays the project file under the request: what the request
// leaves out the file fills (model, effort, the egress posture and its
// rules), and what only the file says goes to the plan (environment,
// ports, image, setup). A file that is not accepted as it is refuses the
// create, with its diff.
func (p *createPlan) applyProject(req *api.CreateRequest, f createFacts) error {
	if f.projectErr != nil {
		return fmt.Errorf("%s of %s: %w (paddock run --no-project ignores it)", project.FileName, f.workspace, f.projectErr)
	}
	pf := f.project
	if pf == nil {
		return nil
	}
	if err := f.projectDecision.Err(f.workspace); err != nil {
		return err
	}
	req.Model = cmpOr(req.Model, pf.Model)
	req.Effort = cmpOr(req.Effort, pf.Effort)
	p.model, p.effort = req.Model, req.Effort
	if e := pf.Egress; e.Mode != "" && req.Egress == "" && len(req.Allow) == 0 && len(req.Deny) == 0 && !req.Ask && req.EgressPolicy == "" {
		req.Egress, req.Allow, req.Deny, req.Ask = e.Mode, slices.Clone(e.Allow), slices.Clone(e.Deny), e.Ask
		p.egress, p.ask = req.Egress, req.Ask
	}
	keys := make([]string, 0, len(pf.Env))
	for k := range pf.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.env = append(p.env, k+"="+pf.Env[k])
	}
	for _, port := range pf.Ports {
		p.ports = append(p.ports, session.Port{Box: port})
	}
	p.project = &session.ProjectUse{Sum: pf.Sum}
	if pf.Setup.Command != "" {
		p.project.Setup, p.project.SetupAllow = pf.Setup.Command, slices.Clone(pf.Setup.Allow)
		p.project.SetupTimeoutS = int(pf.Setup.Timeout.Seconds())
	}
	p.projectImage, p.projectDockerfile = pf.Image, pf.DockerfileText
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
