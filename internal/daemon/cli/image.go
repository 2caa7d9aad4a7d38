package cli

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/spf13/cobra"
)

func imageCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build the Docker image boxes run"}
	var spec image.Spec
	var mirror, push string
	build := &cobra.Command{
		Use:   "build [--base NAME@sha256:DIGEST] [--claude-version V] [--tag T] [--push REPO]",
		Short: "Build the box image: a pinned base, the pinned Claude Code and paddock's guest",
		Long: `Build the image the docker backend runs, with no network inside the build.

Without --base, the base is one paddock makes itself: Debian ` + image.DefaultBase().Suite + ` with bash, tmux, git
and CA certificates, debootstrapped from this host's Debian mirror (--mirror) and imported into
the local image store, then pinned by the id the store gives it. The first build takes a few
minutes; later ones reuse that base (` + image.DefaultBase().Tag() + `) and Docker's layer cache.
Needs root and debootstrap (apt-get install debootstrap).

With --base, the base is pinned by digest (name@sha256:…, pulled when missing, or a local image
id sha256:…) and must hold bash and tmux (and git, for sessions on a git workspace); tags are
refused.

The Claude Code npm package is installed on the host (<state-dir>/cli/<version>), its progress
shown, and copied in. The image is refused unless claude --version inside it reports the
version asked for. Its labels (Claude Code version, base, guest protocol, paddock version) are
checked whenever a box is made from it.

--push REPO pushes the image as REPO:claude-<version> with the login that docker login stored
(in $DOCKER_CONFIG or ~/.docker) and prints REPO@sha256:<digest>: the name for a registry that
other machines or a cluster pull from.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if push != "" {
				if err := image.CheckRepo(push); err != nil {
					return usageError{fmt.Errorf("--push: %w", err)}
				}
			}
			if spec.Base != "" {
				if err := spec.Check(); err != nil {
					return usageError{err}
				}
			} else if _, err := spec.CheckVersion(); err != nil {
				return usageError{err}
			}
			baseSpec := image.DefaultBase()
			if mirror != "" {
				baseSpec.Mirror = strings.TrimRight(mirror, "/")
			}
			if err := baseSpec.Check(); err != nil {
				return usageError{fmt.Errorf("--mirror: %w", err)}
			}
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			if err := statedir.Ensure(dir); err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			// The image carries the slim guest where it was built beside
			// this paddock (make build), else paddock itself.
			bin, why := guest.FindBinary(ctx, self)
			if why != "" {
				fmt.Fprintf(o.Stderr, "the image carries the full paddock binary as its guest: %s\n", why)
			}
			if err := checkStatic(bin); err != nil {
				return err
			}
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return fmt.Errorf("docker: %v: %w", err, errdefs.ErrUnavailable)
			}
			defer cli.Close()
			if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
				if errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "permission denied") {
					return fmt.Errorf("you may not use the Docker daemon (%v): run this with sudo: %w", err, errdefs.ErrForbidden)
				}
				return fmt.Errorf("no Docker daemon answers (%v); start it (sudo systemctl start docker) or set DOCKER_HOST: %w", err, errdefs.ErrUnavailable)
			}
			start := time.Now()
			if spec.Base == "" {
				id, err := image.FindBase(ctx, cli, baseSpec)
				if err != nil {
					return err
				}
				if id != "" {
					fmt.Fprintf(o.Stderr, "base: %s (%s), made earlier\n", baseSpec.Tag(), id)
				} else {
					fmt.Fprintf(o.Stderr, "base: none yet; making %s (a few minutes, once)\n", baseSpec.Tag())
					if id, err = image.MakeBase(ctx, cli, baseSpec, image.MakeBaseOptions{Progress: o.Stderr, TempDir: dir}); err != nil {
						return err
					}
				}
				spec.Base = id
			}
			claude, err := claudecode.InstallShowing(ctx, claudecode.Dir(dir, spec.ClaudeVersion), spec.ClaudeVersion, o.Stderr)
			if err != nil {
				return err
			}
			id, err := image.Build(ctx, cli, spec, claude, bin, o.Stderr)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "built in %s; sessions with --backend docker use it\n", time.Since(start).Round(time.Second))
			if push == "" {
				fmt.Fprintln(o.Stdout, id)
				return nil
			}
			dockerDir := o.getenv("DOCKER_CONFIG")
			if dockerDir == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return err
				}
				dockerDir = filepath.Join(home, ".docker")
			}
			auth, err := image.RegistryAuth(dockerDir, push)
			if err != nil {
				return err
			}
			pinned, err := image.Push(ctx, cli, id, push, "claude-"+spec.ClaudeVersion, auth, o.Stderr)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "name it by digest where boxes run from a registry: %s\n", pinned)
			fmt.Fprintln(o.Stdout, pinned)
			return nil
		},
	}
	f := build.Flags()
	f.StringVar(&spec.Base, "base", "", "digest-pinned base image (default: one paddock makes with debootstrap)")
	f.StringVar(&mirror, "mirror", "", "Debian mirror for the base paddock makes (default: this host's, from /etc/apt)")
	f.StringVar(&spec.ClaudeVersion, "claude-version", claudecode.PinnedVersion, "exact Claude Code version")
	f.StringVar(&spec.Tag, "tag", "", "image tag (default paddock/box:claude-<version>)")
	f.StringVar(&push, "push", "", "also push it to this repository (REPO:claude-<version>) and print REPO@sha256:<digest>; the login is docker login's")
	cmd.AddCommand(build)
	return cmd
}

// checkStatic refuses a dynamically linked paddock: the same binary must
// run as the guest in any image.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build paddock with CGO_ENABLED=0 (make build) so it can run as the guest in a box: %w", path, errdefs.ErrInvalid)
		}
	}
	return nil
}

func claudeCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{Use: "claude", Short: "Manage the pinned Claude Code CLI the boxes run"}
	var ver string
	install := &cobra.Command{
		Use:   "install",
		Short: "Install the pinned Claude Code from npm into <state-dir>/cli/<version> and verify it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			bin, err := claudecode.Install(cmd.Context(), claudecode.Dir(dir, ver), ver)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "Claude Code %s: %s\n", ver, bin)
			return nil
		},
	}
	install.Flags().StringVar(&ver, "version", claudecode.PinnedVersion, "exact version")
	cmd.AddCommand(install)
	return cmd
}
