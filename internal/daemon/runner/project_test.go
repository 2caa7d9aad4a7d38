package runner

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/project"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestProjectFile: a workspace's project file is used only as its owner
// accepted it: a new one, and a changed one, refuse the create with the
// diff and nothing made; an allow of a file changed since it was shown is
// refused. An accepted file gives the session its environment (claude's
// and exec's), its ports (published) and its model, and its setup command
// runs once, in the workspace, before claude, its output kept. A file
// with a secret, and a setup that fails, each refuse with the reason and
// leave no session; --no-project ignores the file.
func TestProjectFile(t *testing.T) {
	backends := testBackends(t)
	dir := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	cfg.Proxy.Listen = "off"
	cfg.Web.Listen = "off"
	logs := &testenv.Buffer{}
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Backends: map[string]sandbox.Backend{"local": backends["local"]}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ctx := context.Background()
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, ".paddock.toml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(ws, ".paddock.toml"), sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner)
	}
	noSession := func(name string) {
		t.Helper()
		s, err := r.Session(ctx, name)
		if !errors.Is(err, errdefs.ErrNotFound) && s.Observed != session.Removed {
			t.Fatalf("session %s is left: %s %v", name, s.Observed, err)
		}
	}
	allow := func() {
		t.Helper()
		v, err := r.Project(ctx, ws)
		if err != nil || !v.Exists {
			t.Fatalf("show: %+v %v", v, err)
		}
		if _, err := r.AllowProject(ctx, api.ProjectRequest{Workspace: ws, Sum: v.Sum}); err != nil {
			t.Fatal(err)
		}
	}
	write(`model = "sonnet"
env = { GREETING = "hello from the project" }
ports = [5173]
[setup]
command = "echo setting up; id -un > .setup-ran"
`)
	_, err = r.CreateSession(ctx, api.CreateRequest{Name: "p1", Backend: "local", Workspace: ws})
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "is new") || !strings.Contains(err.Error(), "paddock project allow "+ws) ||
		!strings.Contains(err.Error(), "+command = \"echo setting up; id -un > .setup-ran\"") {
		t.Fatalf("a new project file: %v", err)
	}
	noSession("p1")
	v, _ := r.Project(ctx, ws)
	if v.Status != "new" {
		t.Fatalf("show: %+v", v)
	}
	// An allow names what was shown: a file changed since is refused.
	write(strings.Replace(`model = "sonnet"`, "sonnet", "opus", 1) + "\n")
	if _, err := r.AllowProject(ctx, api.ProjectRequest{Workspace: ws, Sum: v.Sum}); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "changed since it was shown") {
		t.Fatalf("allow of a changed file: %v", err)
	}
	write(`model = "sonnet"
env = { GREETING = "hello from the project" }
ports = [5173]
[setup]
command = "echo setting up; id -un > .setup-ran"
`)
	allow()
	s, err := r.CreateSession(ctx, api.CreateRequest{Name: "p1", Backend: "local", Workspace: ws})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	defer r.RemoveSession(ctx, s.ID, false)
	if s.Model != "sonnet" || s.Project == nil || s.Project.SetupResult == nil || s.Project.SetupResult.Exit != 0 || !strings.Contains(s.Project.SetupResult.Output, "setting up") {
		t.Fatalf("the session: model %q, project %+v", s.Model, s.Project)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".setup-ran")); err != nil || strings.TrimSpace(string(b)) != sandbox.BoxUser {
		t.Fatalf("the setup in the workspace, as the box user: %q %v", b, err)
	}
	var out strings.Builder
	p, err := r.Exec(ctx, s.ID, channel.ExecOptions{Argv: []string{"sh", "-c", "echo $GREETING"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	p.Wait()
	if strings.TrimSpace(out.String()) != "hello from the project" {
		t.Fatalf("the project's environment in exec: %q", out.String())
	}
	if ps, _ := r.Ports(ctx, "p1"); len(ps) != 1 || ps[0].Box != 5173 || !ps[0].Open {
		t.Fatalf("the project's ports: %+v", ps)
	}
	// The box cannot write the file (host code).
	out.Reset()
	p, _ = r.Exec(ctx, s.ID, channel.ExecOptions{Argv: []string{"sh", "-c", "echo 'model = \"opus\"' > /workspace/.paddock.toml && echo written"}, Stdout: &out, Stderr: &out})
	p.CloseStdin()
	if code, _ := p.Wait(); code == 0 {
		t.Fatalf("the box wrote the project file: %s", out.String())
	}

	// Changed on the host: refused with the diff.
	write(`model = "opus"
env = { GREETING = "hello from the project" }
ports = [5173]
[setup]
command = "echo setting up; id -un > .setup-ran"
`)
	_, err = r.CreateSession(ctx, api.CreateRequest{Name: "p2", Backend: "local", Workspace: ws})
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "changed since you allowed it") ||
		!strings.Contains(err.Error(), "-model = \"sonnet\"") || !strings.Contains(err.Error(), "+model = \"opus\"") {
		t.Fatalf("a changed project file: %v", err)
	}
	noSession("p2")
	// --no-project ignores it.
	s2, err := r.CreateSession(ctx, api.CreateRequest{Name: "p2", Backend: "local", Workspace: ws, NoProject: true, NoStart: true})
	if err != nil || s2.Model != "" || s2.Project != nil || len(s2.Env) != 0 {
		t.Fatalf("--no-project: %+v %v", s2, err)
	}
	r.RemoveSession(ctx, s2.ID, false)

	// A secret in env: refused with the reason, nothing made.
	write("env = { GITHUB_TOKEN = \"x\" }\n")
	_, err = r.CreateSession(ctx, api.CreateRequest{Name: "p3", Backend: "local", Workspace: ws})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "GITHUB_TOKEN") || !strings.Contains(err.Error(), "--no-project") {
		t.Fatalf("a secret in env: %v", err)
	}
	noSession("p3")
	// An unknown key: named, with the keys its table takes.
	write("[image]\npkgs = [\"golang\"]\n")
	_, err = r.CreateSession(ctx, api.CreateRequest{Name: "p3", Backend: "local", Workspace: ws})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "unknown key image.pkgs") || !strings.Contains(err.Error(), "takes packages, dockerfile") {
		t.Fatalf("an unknown key: %v", err)
	}
	noSession("p3")

	// A setup that fails: its output in the error, no session left.
	write("[setup]\ncommand = \"echo the build broke >&2; exit 3\"\n")
	allow()
	began := time.Now()
	_, err = r.CreateSession(ctx, api.CreateRequest{Name: "p4", Backend: "local", Workspace: ws})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "exit 3") || !strings.Contains(err.Error(), "the build broke") {
		t.Fatalf("a failing setup: %v", err)
	}
	noSession("p4")
	t.Logf("a failed setup refused in %s", time.Since(began).Round(time.Millisecond))

	// An [image] on a local box: not built (the box has the host's
	// programs), said in the log; the session is made all the same.
	write("[image]\npackages = [\"golang\"]\n")
	allow()
	s5, err := r.CreateSession(ctx, api.CreateRequest{Name: "p5", Backend: "local", Workspace: ws, NoStart: true})
	if err != nil || s5.Project == nil || s5.Project.Image != "" {
		t.Fatalf("an [image] on a local box: %+v %v", s5.Project, err)
	}
	if !strings.Contains(logs.String(), "the project file's [image] is not built") {
		t.Errorf("the log does not say the [image] was not built:\n%s", logs.String())
	}
	// Kubernetes pulls its image from a registry: refused, with the build
	// that makes it; another Claude Code than the pin is refused too.
	plan := &createPlan{workspace: ws, projectImage: project.Image{Packages: []string{"golang"}}}
	if _, err := r.ensureProjectImage(ctx, plan, "kubernetes"); !errors.Is(err, errdefs.ErrUnavailable) ||
		!strings.Contains(err.Error(), "paddock image build --packages golang --push REPO") || !strings.Contains(err.Error(), "kubernetes.image") {
		t.Errorf("an [image] on kubernetes: %v", err)
	}
	plan.claudeVersion = "2.0.1"
	if _, err := r.ensureProjectImage(ctx, plan, "docker"); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "drop --claude-version") {
		t.Errorf("an [image] with another Claude Code: %v", err)
	}
}
