package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/box/sandbox/kubernetes"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// backend returns the named backend, making it on first use from the
// configuration. A failure is not remembered: the next call tries again
// (dockerd may have started meanwhile).
func (r *Runner) backend(ctx context.Context, name string) (sandbox.Backend, error) {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	if b := r.backends[name]; b != nil {
		return b, nil
	}
	if r.opts.Backends != nil {
		return nil, fmt.Errorf("backend %q is not available in this Runner: %w", name, errdefs.ErrUnavailable)
	}
	var b sandbox.Backend
	var err error
	switch name {
	case local.Name:
		b, err = r.newLocal(ctx)
	case docker.Name:
		c := r.opts.Config.Docker
		// An image must carry the pinned Claude Code (unless its tag names
		// another) and this paddock as its guest.
		b, err = docker.New(ctx, docker.Config{Host: c.Host, Image: c.Image, Dir: filepath.Join(r.opts.StateDir, "docker"), Owner: r.id,
			ClaudeVersion: claudecode.PinnedVersion, PaddockVersion: version.String()})
	case kubernetes.Name:
		b, err = r.newKubernetes(ctx)
	default:
		err = fmt.Errorf("no backend %q (local, docker or kubernetes): %w", name, errdefs.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	r.backends[name] = b
	return b, nil
}

// pruneBackend is backend for listing and removing only: the local one
// needs no Claude Code for that.
func (r *Runner) pruneBackend(ctx context.Context, name string) (sandbox.Backend, error) {
	if b, err := r.backend(ctx, name); err == nil || name != local.Name || r.opts.Backends != nil {
		return b, err
	}
	bin, err := r.guestBinary(ctx)
	if err != nil {
		return nil, err
	}
	return local.New(local.Config{Root: filepath.Join(r.opts.StateDir, "local"), GuestBinary: bin, UIDBase: r.opts.Config.Local.UIDBase, Runsc: r.opts.Config.Local.Runsc})
}

// guestBinary is what local boxes carry as their paddock: the slim
// paddock-guest beside the Runner's executable, or the executable itself
// (guest.FindBinary). It is looked for once; the reason for a fallback is
// logged then.
func (r *Runner) guestBinary(ctx context.Context) (string, error) {
	r.guestOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			r.guestErr = err
			return
		}
		bin, why := guest.FindBinary(ctx, self)
		if why != "" {
			r.log.Warn("boxes carry the full paddock binary as their guest, at a cost per process in every box", logkey.Reason, why)
		}
		r.guestBin = bin
	})
	return r.guestBin, r.guestErr
}

func (r *Runner) newLocal(ctx context.Context) (sandbox.Backend, error) {
	bin, err := r.guestBinary(ctx)
	if err != nil {
		return nil, err
	}
	claude, err := r.claudeBinary(ctx)
	if err != nil {
		return nil, err
	}
	return local.New(local.Config{Root: filepath.Join(r.opts.StateDir, "local"), GuestBinary: bin, ClaudeBinary: claude,
		UIDBase: r.opts.Config.Local.UIDBase, Runsc: r.opts.Config.Local.Runsc})
}

// claudeBinary finds the pinned CLI: the configured binary, or the one
// installed under the state directory (installing it from npm if needed).
func (r *Runner) claudeBinary(ctx context.Context) (string, error) {
	if b := r.opts.Config.Claude.Binary; b != "" {
		if err := claudecode.Verify(ctx, b, claudecode.PinnedVersion); err != nil {
			return "", fmt.Errorf("claude.binary: %w", err)
		}
		return b, nil
	}
	dir := claudecode.Dir(r.opts.StateDir, claudecode.PinnedVersion)
	r.log.Info("installing the pinned Claude Code", "version", claudecode.PinnedVersion, "dir", dir)
	return claudecode.Install(ctx, dir, claudecode.PinnedVersion)
}

// newKubernetes opens the kubernetes backend from [kubernetes].
func (r *Runner) newKubernetes(ctx context.Context) (sandbox.Backend, error) {
	c := r.opts.Config.Kubernetes
	if c.Image == "" {
		return nil, fmt.Errorf("the kubernetes backend needs kubernetes.image in the Runner's config: push the box image with `paddock image build --push REPO` and name the REPO@sha256:… it prints: %w", errdefs.ErrInvalid)
	}
	tol := make([]corev1.Toleration, 0, len(c.Tolerations))
	for _, t := range c.Tolerations {
		tol = append(tol, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect)})
	}
	return kubernetes.New(ctx, kubernetes.Config{Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace,
		Owner: r.id, Image: c.Image, ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy), StorageClass: c.StorageClass,
		HomeSize: int64(c.HomeGB) << 30, WorkspaceSize: int64(c.WorkspaceGB) << 30,
		NodeSelector: c.NodeSelector, Tolerations: tol, UnsafeUnenforcedNetworkPolicy: c.UnsafeUnenforcedNetworkPolicy,
		Requests: sandbox.Limits{CPUs: c.CPURequest, MemoryBytes: int64(c.MemoryRequestMB) << 20}})
}
