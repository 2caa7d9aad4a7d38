package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// A base paddock makes itself when no base is given: Debian, debootstrapped
// from the distribution's mirror (the one place every Debian host reaches,
// registry or not), imported into the local image store, and pinned by the
// id the store gives it (a content digest). What it holds is the recipe in
// BaseSpec; the recipe's hash is in the image's tag and label, so a change
// of recipe makes a new base and never reuses a stale one.

// LabelBaseRecipe marks a base paddock made, with its recipe's hash.
const LabelBaseRecipe = "paddock.base-recipe"

// BaseSpec is the recipe of a self-made base.
type BaseSpec struct {
	// Suite is the Debian release, e.g. "bookworm".
	Suite string
	// Mirror is the Debian mirror's URL; not part of the recipe (any
	// mirror serves the same signed packages).
	Mirror string
	// Packages are installed on top of debootstrap's minbase variant.
	Packages []string
}

// DefaultBase is the base of `paddock image build` without --base: what a
// box needs (bash, tmux for the terminal, git for workspaces, gh for
// pull requests through a grant (paddock run --secret), CA
// certificates for tools that reach allowed hosts, ps) and what the tests'
// probes use (perl, curl).
func DefaultBase() BaseSpec {
	return BaseSpec{Suite: "bookworm", Mirror: HostMirror(),
		Packages: []string{"bash", "ca-certificates", "curl", "gh", "git", "perl-base", "procps", "tmux"}}
}

var (
	suiteRe   = regexp.MustCompile(`^[a-z]+$`)
	packageRe = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	mirrorRe  = regexp.MustCompile(`^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?$`)
)

// Check refuses a recipe debootstrap would misread.
func (b BaseSpec) Check() error {
	if !suiteRe.MatchString(b.Suite) {
		return fmt.Errorf("suite %q is not a Debian release name like bookworm: %w", b.Suite, errdefs.ErrInvalid)
	}
	if !mirrorRe.MatchString(b.Mirror) {
		return fmt.Errorf("mirror %q is not an http(s) URL like http://deb.debian.org/debian: %w", b.Mirror, errdefs.ErrInvalid)
	}
	for _, p := range b.Packages {
		if !packageRe.MatchString(p) {
			return fmt.Errorf("package %q is not a Debian package name: %w", p, errdefs.ErrInvalid)
		}
	}
	return nil
}

// Recipe is the hash of what the base holds (suite and packages, sorted
// as given; the mirror is left out).
func (b BaseSpec) Recipe() string {
	h := sha256.Sum256([]byte("debootstrap minbase\n" + b.Suite + "\n" + strings.Join(b.Packages, ",")))
	return hex.EncodeToString(h[:])[:12]
}

// Tag names the base in the local store: paddock/base:<suite>-<recipe>.
func (b BaseSpec) Tag() string { return "paddock/base:" + b.Suite + "-" + b.Recipe() }

// HostMirror is the Debian mirror this host's apt uses, or deb.debian.org.
func HostMirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		if m := mirrorIn(f); m != "" {
			return m
		}
	}
	return "http://deb.debian.org/debian"
}

// mirrorIn finds the first Debian archive URL in an apt sources file (the
// deb822 "URIs:" form or a one-line "deb URL suite …").
func mirrorIn(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		var u string
		switch {
		case len(fs) >= 2 && fs[0] == "URIs:":
			u = fs[1]
		case len(fs) >= 3 && fs[0] == "deb" && !strings.HasPrefix(fs[1], "["):
			u = fs[1]
		}
		u = strings.TrimRight(u, "/")
		if strings.HasSuffix(u, "/debian") && mirrorRe.MatchString(u) {
			return u
		}
	}
	return ""
}

// FindBase returns the id of a base made from spec's recipe, or "" when
// the store holds none.
func FindBase(ctx context.Context, cli *client.Client, spec BaseSpec) (string, error) {
	res, err := cli.ImageInspect(ctx, spec.Tag())
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for the base %s: %w", spec.Tag(), err)
	}
	if res.Config == nil || res.Config.Labels[LabelBaseRecipe] != spec.Recipe() {
		return "", nil
	}
	return res.ID, nil
}

// MakeBaseOptions are the optional parts of MakeBase.
type MakeBaseOptions struct {
	// Progress receives debootstrap's output and the import's, as they
	// come; nil shows nothing.
	Progress io.Writer
	// Rootfs, when set, keeps the debootstrapped tree there (a cache
	// keyed by recipe, as the tests use): a complete one is imported
	// without running debootstrap again. Empty: a temporary directory
	// under TempDir, removed after the import.
	Rootfs string
	// TempDir holds the temporary tree (default os.TempDir()).
	TempDir string
}

// complete marks a Rootfs tree whose debootstrap finished.
const complete = ".paddock-complete"

// MakeBase debootstraps spec into a tree, imports it into the local store
// tagged spec.Tag() with the recipe's label, and returns its id. It needs
// root and the debootstrap program; the host must reach spec.Mirror.
func MakeBase(ctx context.Context, cli *client.Client, spec BaseSpec, o MakeBaseOptions) (string, error) {
	if err := spec.Check(); err != nil {
		return "", err
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	root := o.Rootfs
	if root == "" {
		tmp, err := os.MkdirTemp(o.TempDir, "paddock-base-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		root = filepath.Join(tmp, "rootfs")
	}
	if _, err := os.Stat(filepath.Join(root, complete)); err != nil {
		if err := debootstrap(ctx, spec, root, progress); err != nil {
			return "", err
		}
	} else {
		fmt.Fprintf(progress, "base: using the debootstrapped tree in %s\n", root)
	}
	fmt.Fprintf(progress, "base: importing %s as %s\n", root, spec.Tag())
	// tar keeps what a Go walk would have to relearn: device nodes,
	// hard links, numeric owners, capabilities in xattrs.
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--exclude=./"+complete, "-C", root, "-c", ".")
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var tarErr strings.Builder
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		return "", fmt.Errorf("tar: %w", err)
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pipe, SourceName: "-"}, spec.Tag(),
		client.ImageImportOptions{Message: "paddock base: debootstrap " + spec.Suite,
			Changes: []string{"LABEL " + LabelBaseRecipe + "=" + spec.Recipe(), "ENV PATH=/usr/local/bin:/usr/bin:/bin", `CMD ["/bin/bash"]`}})
	if err != nil {
		_ = tarCmd.Process.Kill()
		_ = tarCmd.Wait()
		return "", fmt.Errorf("docker import: %w", err)
	}
	_, showErr := Show(resp, progress)
	resp.Close()
	if err := tarCmd.Wait(); err != nil {
		return "", fmt.Errorf("tar of %s: %w: %s", root, err, strings.TrimSpace(tarErr.String()))
	}
	if showErr != nil {
		return "", fmt.Errorf("docker import: %w", showErr)
	}
	id, err := FindBase(ctx, cli, spec)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("docker import of %s left no image with the recipe's label: %w", spec.Tag(), errdefs.ErrConflict)
	}
	fmt.Fprintf(progress, "base: %s is %s\n", spec.Tag(), id)
	return id, nil
}

// debootstrap makes the tree, streaming its output line by line.
func debootstrap(ctx context.Context, spec BaseSpec, root string, progress io.Writer) error {
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		return fmt.Errorf("debootstrap is needed to make a base image (apt-get install debootstrap), or give one with --base NAME@sha256:DIGEST: %w", errdefs.ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("making a base image with debootstrap needs root (sudo paddock image build), or give one with --base NAME@sha256:DIGEST: %w", errdefs.ErrForbidden)
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(progress, "base: debootstrap %s from %s (%s)\n", spec.Suite, spec.Mirror, strings.Join(spec.Packages, " "))
	cmd := exec.CommandContext(ctx, bin, "--variant=minbase", "--include="+strings.Join(spec.Packages, ","), spec.Suite, root, spec.Mirror)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	var last []string // for the error: debootstrap says why at the end
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		fmt.Fprintf(progress, "debootstrap: %s\n", l)
		if last = append(last, l); len(last) > 5 {
			last = last[1:]
		}
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("debootstrap %s from %s failed (%w): %s; see %s",
			spec.Suite, spec.Mirror, err, strings.Join(last, " / "), filepath.Join(root, "debootstrap", "debootstrap.log"))
	}
	// The package cache and lists are not part of a box.
	for _, g := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*"} {
		ms, _ := filepath.Glob(filepath.Join(root, g))
		for _, m := range ms {
			_ = os.Remove(m)
		}
	}
	if err := os.WriteFile(filepath.Join(root, complete), nil, 0o644); err != nil {
		return err
	}
	return nil
}

// errNoID is returned when a stream ended without the id it should carry.
var errNoID = errors.New("the daemon reported no image id")
