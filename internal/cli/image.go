package cli

import (
	"debug/elf"
	"fmt"
	"os"

	"github.com/moby/moby/client"
	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/image"
	"github.com/spf13/cobra"
)

func imageCmd(g *globals, o IO) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build the Docker image boxes run"}
	var spec image.Spec
	build := &cobra.Command{
		Use:   "build --base REF@sha256:DIGEST [--claude-version V] [--tag T]",
		Short: "Build a box image: a pinned base, the pinned Claude Code, tmux and paddock guest",
		Long: `Build the image the docker backend runs. The base must be pinned by digest
(name@sha256:… or a local image id sha256:…) and must already hold bash and tmux (and git, for
sessions on a git workspace); tags are refused. The Claude Code npm package is installed on the host (<state-dir>/cli/<version>) and
copied in, so the build needs no network. The image is refused unless claude --version inside
it reports the version asked for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := spec.Check(); err != nil {
				return usageError{err}
			}
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if err := checkStatic(self); err != nil {
				return err
			}
			fmt.Fprintf(o.Stderr, "installing Claude Code %s into %s\n", spec.ClaudeVersion, claudecode.Dir(dir, spec.ClaudeVersion))
			claude, err := claudecode.Install(cmd.Context(), claudecode.Dir(dir, spec.ClaudeVersion), spec.ClaudeVersion)
			if err != nil {
				return err
			}
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return fmt.Errorf("docker: %v: %w", err, errdefs.ErrUnavailable)
			}
			defer cli.Close()
			id, err := image.Build(cmd.Context(), cli, spec, claude, self, o.Stderr)
			if err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, id)
			return nil
		},
	}
	f := build.Flags()
	f.StringVar(&spec.Base, "base", "", "digest-pinned base image (required)")
	f.StringVar(&spec.ClaudeVersion, "claude-version", claudecode.PinnedVersion, "exact Claude Code version")
	f.StringVar(&spec.Tag, "tag", "", "image tag (default paddock/box:claude-<version>)")
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
