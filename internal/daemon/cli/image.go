package cli

import (
	"context"
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
	var mirror, push, dockerfile, network string
	var packages []string
	build := &cobra.Command{
		Use:   "build [--packages P,…] [--dockerfile FILE [--build-network default]] [--base NAME@sha256:DIGEST] [--claude-version V] [--tag T] [--push REPO]",
		Short: "Build the box image: a pinned base, the pinned Claude Code and paddock's guest",
		Long: `Build the image the docker backend runs, with no network inside the build (unless
--build-network lets a project's Dockerfile have one).

Without --base, the base is one paddock makes itself: Debian ` + image.DefaultBase().Suite + ` with bash, tmux, git
and CA certificates, debootstrapped from this host's Debian mirror (--mirror) and imported into
the local image store, then pinned by the id the store gives it. The first build takes a few
minutes; later ones reuse that base (` + image.DefaultBase().Tag() + `) and Docker's layer cache.
Needs root and debootstrap (apt-get install debootstrap).

A project's toolchains go in with --packages and --dockerfile (not with --base):

--packages golang,python3-venv,… adds Debian packages to that base (debootstrap resolves their
dependencies, from the same mirror); the order does not matter. A base of that package list is
made once, like the default one.

--dockerfile FILE builds the project's own steps on that base, then paddock's layers on top of
them (so the box user, the guest and the labels are paddock's whatever the steps did). The file
starts with
    ARG PADDOCK_BASE
    FROM ${PADDOCK_BASE}
(paddock passes the base's id as that build argument); any other FROM or COPY --from names a
stage of the file or an image pinned by digest (name@sha256:…), and the last stage is built on
${PADDOCK_BASE}. Sessions run with PATH=/usr/local/bin:/usr/bin:/bin: install tools there (or
link them there). No VOLUME, HEALTHCHECK, STOPSIGNAL or ONBUILD. The build context is the file's
directory: everything in it but what its .dockerignore excludes is sent (at most 512 MiB). Its
RUN steps have no network unless --build-network default (Docker's bridge: the steps reach the
network, e.g. to download) or host (the host's network, its loopback services included).

The image of such a recipe is tagged paddock/box-<recipe>:claude-<version> and labelled
paddock.recipe: the hash of the package list, the Dockerfile and every file of its context, so
a change makes a new image and the same recipe names the same one.

With --base, the base is pinned by digest (name@sha256:…, pulled when missing, or a local image
id sha256:…) and must hold bash and tmux (and git, for sessions on a git workspace); tags are
refused.

The Claude Code npm package is installed on the host (<state-dir>/cli/<version>), its progress
shown, and copied in. The image is refused unless claude --version inside it reports the
version asked for. Its labels (Claude Code version, base, guest protocol, paddock version) are
checked whenever a box is made from it.

--push REPO pushes the image as REPO:claude-<version> (REPO:<recipe>-claude-<version> for a
project's recipe) with the login that docker login stored
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
			if dockerfile != "" {
				abs, err := filepath.Abs(dockerfile)
				if err != nil {
					return usageError{fmt.Errorf("--dockerfile: %w", err)}
				}
				dockerfile = abs
			}
			recipe := image.Recipe{Packages: packages, Dockerfile: dockerfile, BuildNetwork: network}
			if spec.Base != "" {
				if len(packages) > 0 {
					return usageError{errors.New("--packages adds packages to the base paddock makes with debootstrap, and --base gives a base made elsewhere: drop --base, or install the packages in the image you give")}
				}
				if dockerfile != "" {
					return usageError{errors.New("--dockerfile builds on the base paddock makes with debootstrap, and --base gives a base made elsewhere: drop --base (your file starts FROM ${PADDOCK_BASE}), or put your steps in the image you give")}
				}
				if network != "" {
					return usageError{errors.New("--build-network is for the steps of --dockerfile, and there is none with --base: drop it")}
				}
				if err := spec.Check(); err != nil {
					return usageError{err}
				}
			} else if _, err := spec.CheckVersion(); err != nil {
				return usageError{err}
			}
			if err := recipe.Check(); err != nil {
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
			installClaude := func(ctx context.Context) (string, error) {
				return claudecode.InstallShowing(ctx, claudecode.Dir(dir, spec.ClaudeVersion), spec.ClaudeVersion, o.Stderr)
			}
			var id string
			if spec.Base == "" {
				// The Runner's path, but always building: a user who
				// asks for a build gets one (Docker's cache keeps an
				// unchanged one quick).
				id, _, err = image.Ensure(ctx, cli, recipe, image.EnsureOptions{
					ClaudeVersion: spec.ClaudeVersion, InstallClaude: installClaude, GuestBin: bin,
					Mirror: baseSpec.Mirror, TempDir: dir, Tag: spec.Tag, Rebuild: true, Progress: o.Stderr,
				})
			} else {
				var claude string
				if claude, err = installClaude(ctx); err == nil {
					id, err = image.Build(ctx, cli, spec, claude, bin, o.Stderr)
				}
			}
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
			pushTag := "claude-" + spec.ClaudeVersion
			if !recipe.IsZero() {
				// One repository, a tag per recipe; boxes name it by
				// the digest printed.
				ins, err := cli.ImageInspect(ctx, id)
				if err != nil {
					return fmt.Errorf("inspect %s: %w", id, err)
				}
				if ins.Config == nil || len(ins.Config.Labels[image.LabelRecipe]) < 12 {
					return fmt.Errorf("the image %s has no %s label to name its push by; build it again: %w", id, image.LabelRecipe, errdefs.ErrConflict)
				}
				pushTag = ins.Config.Labels[image.LabelRecipe][:12] + "-" + pushTag
			}
			pinned, err := image.Push(ctx, cli, id, push, pushTag, auth, o.Stderr)
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
	f.StringVar(&spec.Tag, "tag", "", "image tag (default paddock/box:claude-<version>; paddock/box-<recipe>:claude-<version> with --packages or --dockerfile)")
	f.StringVar(&push, "push", "", "also push it to this repository (REPO:claude-<version>, REPO:<recipe>-claude-<version> with --packages or --dockerfile) and print REPO@sha256:<digest>; the login is docker login's")
	f.StringSliceVar(&packages, "packages", nil, "Debian packages to add to the base paddock makes, comma-separated (e.g. golang,python3-venv,build-essential); not with --base")
	f.StringVar(&dockerfile, "dockerfile", "", "the project's Dockerfile, built on the base paddock makes (FROM ${PADDOCK_BASE}) before paddock's layers; its directory is the build context; not with --base")
	f.StringVar(&network, "build-network", "", "let --dockerfile's RUN steps reach the network: default (Docker's bridge) or host (the host's network, loopback services included); default none")
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
