package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/box/sandbox/kubernetes"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/project"
)

// A project file's [image] (Debian packages, or a Dockerfile in the
// workspace) makes the box image of a docker session: image.Ensure finds
// the image of that recipe, this Claude Code and this guest, or builds it
// (minutes the first time; the Runner's log shows the steps), and the
// session's box is made from it, by id, which its record keeps
// (ProjectUse.Image). The Dockerfile is read inside the workspace,
// following no symlink, and must be the one its owner accepted with the
// project file. A local box shares the host's /usr and has no image: the
// [image] is left to the host (logged). The kubernetes backend pulls its
// image from a registry: with kubernetes.project_registry the Runner
// builds the image as for docker and pushes it there, and the pod names
// it by digest; without, a project file with [image] is refused there.

// projectImageRecipe is the recipe of the project file's image for the
// workspace ws, or the zero Recipe when it asks for none.
func projectImageRecipe(im project.Image, ws string, accepted []byte) image.Recipe {
	r := image.Recipe{Packages: im.Packages}
	if im.Dockerfile != "" {
		r.Dockerfile = filepath.Join(ws, filepath.FromSlash(im.Dockerfile))
		r.Within = ws
		r.AcceptedDockerfile = accepted
		if r.AcceptedDockerfile == nil {
			r.AcceptedDockerfile = []byte{}
		}
	}
	return r
}

// ensureProjectImage returns the id of the box image p's project file
// asks for on backend, "" when it asks for none or the backend has no
// images to make.
func (r *Runner) ensureProjectImage(ctx context.Context, p *createPlan, backend string) (string, error) {
	recipe := projectImageRecipe(p.projectImage, p.workspace, p.projectDockerfile)
	if recipe.IsZero() {
		return "", nil
	}
	repo := "" // kubernetes: where the image is pushed for the cluster to pull
	switch backend {
	case docker.Name:
	case local.Name:
		r.log.Warn("a local box shares the host's /usr: the project file's [image] is not built, the host's programs are what the box has",
			"workspace", p.workspace, "packages", strings.Join(recipe.Packages, ","), "dockerfile", p.projectImage.Dockerfile)
		return "", nil
	case kubernetes.Name:
		if repo = r.opts.Config.Kubernetes.ProjectRegistry; repo == "" {
			return "", fmt.Errorf("%s asks for an image ([image]), and the kubernetes backend pulls its image from a registry: set kubernetes.project_registry to a repository the cluster pulls from (the Runner builds the image and pushes it there), or build it with `paddock image build %s--push REPO`, set kubernetes.image to the name it prints and run with --no-project: %w",
				filepath.Join(p.workspace, project.FileName), imageBuildFlags(p.projectImage, p.workspace), errdefs.ErrUnavailable)
		}
		if err := image.CheckRepo(repo); err != nil {
			return "", fmt.Errorf("kubernetes.project_registry: %w", err)
		}
	default:
		return "", fmt.Errorf("%s asks for an image ([image]), which the %s backend cannot make: %w", filepath.Join(p.workspace, project.FileName), backend, errdefs.ErrUnavailable)
	}
	if p.claudeVersion != "" && p.claudeVersion != claudecode.PinnedVersion {
		return "", fmt.Errorf("a project's image carries the pinned Claude Code (%s), not %s: drop --claude-version, or run with --no-project: %w",
			claudecode.PinnedVersion, p.claudeVersion, errdefs.ErrInvalid)
	}
	guest, err := r.guestBinary(ctx)
	if err != nil {
		return "", err
	}
	opts := []client.Opt{client.FromEnv}
	if h := r.opts.Config.Docker.Host; h != "" {
		opts = append(opts, client.WithHost(h))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return "", fmt.Errorf("docker: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer cli.Close()
	// One build at a time: two sessions of one repository started
	// together make its image once, and a Runner's builds do not share
	// its two cores.
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	progress := &logLines{log: func(line string) { r.log.Info("project image: "+line, "workspace", p.workspace) }}
	defer progress.Close()
	tmp := filepath.Join(r.opts.StateDir, "docker")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", err
	}
	bases := r.opts.Config.Docker.BaseCache
	if bases == "" {
		bases = filepath.Join(r.opts.StateDir, "docker", "bases")
	}
	id, built, err := image.Ensure(ctx, cli, recipe, image.EnsureOptions{
		ClaudeVersion: claudecode.PinnedVersion,
		InstallClaude: r.claudeBinary,
		GuestBin:      guest,
		TempDir:       tmp,
		BaseCache:     bases,
		Progress:      progress,
	})
	if err != nil {
		return "", fmt.Errorf("the image %s asks for: %w", filepath.Join(p.workspace, project.FileName), err)
	}
	if repo != "" {
		if id, err = r.pushProjectImage(ctx, cli, id, repo, progress); err != nil {
			return "", fmt.Errorf("the image %s asks for: %w", filepath.Join(p.workspace, project.FileName), err)
		}
	}
	r.log.Info("project image ready", "workspace", p.workspace, "image", id, "built", built)
	return id, nil
}

// pushProjectImage pushes the project image id to repo, tagged
// <recipe>-claude-<version> (as paddock image build --push tags it), with
// the login docker login stored for the Runner's user ($DOCKER_CONFIG, or
// $HOME/.docker; with neither, anonymously), and returns repo@sha256:<digest>: what the cluster pulls.
// A push of what the registry has already sends nothing.
func (r *Runner) pushProjectImage(ctx context.Context, cli *client.Client, id, repo string, progress io.Writer) (string, error) {
	ins, err := cli.ImageInspect(ctx, id)
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", id, err)
	}
	recipe := ""
	if ins.Config != nil {
		recipe = ins.Config.Labels[image.LabelRecipe]
	}
	if len(recipe) < 12 {
		return "", fmt.Errorf("the image %s has no %s label to name its push by: %w", id, image.LabelRecipe, errdefs.ErrConflict)
	}
	dir := envValue(r.opts.Env, "DOCKER_CONFIG")
	if home := envValue(r.opts.Env, "HOME"); dir == "" && home != "" {
		dir = filepath.Join(home, ".docker")
	}
	var auth secret.Value // none stored: an anonymous push
	if dir != "" {
		if auth, err = image.RegistryAuth(dir, repo); err != nil {
			return "", err
		}
	}
	return image.Push(ctx, cli, id, repo, recipe[:12]+"-claude-"+claudecode.PinnedVersion, auth, progress)
}

// envValue is the value of name in env (KEY=VALUE), or "".
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// imageBuildFlags are the flags of paddock image build that make im.
func imageBuildFlags(im project.Image, ws string) string {
	var b strings.Builder
	if len(im.Packages) > 0 {
		fmt.Fprintf(&b, "--packages %s ", strings.Join(im.Packages, ","))
	}
	if im.Dockerfile != "" {
		fmt.Fprintf(&b, "--dockerfile %s ", filepath.Join(ws, filepath.FromSlash(im.Dockerfile)))
	}
	return b.String()
}

// logLines is a writer that hands each line written to log (a build's
// output, as it comes).
type logLines struct {
	mu  sync.Mutex
	buf []byte
	log func(string)
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexAny(l.buf, "\r\n")
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" {
			l.log(line)
		}
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}

// Close hands on what is left of a last line.
func (l *logLines) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if line := strings.TrimSpace(string(l.buf)); line != "" {
		l.log(line)
	}
	l.buf = nil
	return nil
}
