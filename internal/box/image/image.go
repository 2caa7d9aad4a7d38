// Package image builds the Docker image a box runs: a digest-pinned base,
// the pinned Claude Code, and `paddock guest`, with a non-root user and
// DISABLE_AUTOUPDATER=1. The Dockerfile comes from one builder (Dockerfile);
// the build needs no network (everything is in the build context, and the
// build runs with network "none"); the result is refused unless
// `claude --version` inside it reports the pin.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"text/template"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// Labels on a box image.
const (
	LabelImage         = "paddock.image"
	LabelClaudeVersion = sandbox.LabelClaudeVersion
	LabelBase          = sandbox.LabelBase
	LabelPaddock       = sandbox.LabelPaddockVersion
)

// Spec describes an image.
type Spec struct {
	// Base is digest-pinned: "sha256:<64 hex>" (a local image id) or
	// "name@sha256:<64 hex>" (a registry digest). Tags are refused.
	Base string
	// ClaudeVersion is the exact Claude Code version it carries.
	ClaudeVersion string
	// Tag names the result (default paddock/box:claude-<version>).
	Tag string
	// PaddockVersion is the guest binary's version, for the label (Build
	// asks the binary when empty).
	PaddockVersion string
	// GuestDigest is the guest binary's sha256 in hex, for the label
	// LabelGuestDigest (Build computes it when empty).
	GuestDigest string
	// Recipe is the hash of the recipe the image was made from
	// (Recipe.Hash), for the label LabelRecipe; empty for none (an image
	// on a base given with --base).
	Recipe string
}

var (
	idRef     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	digestRef = regexp.MustCompile(`^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*@sha256:[0-9a-f]{64}$`)
	exactVer  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$`)
)

// CheckBase refuses anything but a digest-pinned base.
func CheckBase(base string) error {
	if idRef.MatchString(base) || digestRef.MatchString(base) {
		return nil
	}
	return fmt.Errorf("base %q is not pinned: give sha256:<image id> or name@sha256:<digest> (tags and latest float): %w", base, errdefs.ErrInvalid)
}

// CheckVersion checks only the Claude Code version; it returns it.
func (s *Spec) CheckVersion() (string, error) {
	if !exactVer.MatchString(s.ClaudeVersion) {
		return "", fmt.Errorf("claude version %q is not an exact version like 2.1.328: %w", s.ClaudeVersion, errdefs.ErrInvalid)
	}
	return s.ClaudeVersion, nil
}

// Check validates a spec and fills the default tag.
func (s *Spec) Check() error {
	if err := CheckBase(s.Base); err != nil {
		return err
	}
	if !exactVer.MatchString(s.ClaudeVersion) {
		return fmt.Errorf("claude version %q is not an exact version like 2.1.328: %w", s.ClaudeVersion, errdefs.ErrInvalid)
	}
	if s.Tag == "" {
		s.Tag = "paddock/box:claude-" + s.ClaudeVersion
	}
	if !versionRe.MatchString(s.PaddockVersion) {
		return fmt.Errorf("paddock version %q is not a version (letters, digits, . + - _): %w", s.PaddockVersion, errdefs.ErrInvalid)
	}
	if s.GuestDigest != "" && !hex64Re.MatchString(s.GuestDigest) {
		return fmt.Errorf("guest digest %q is not a sha256 in hex: %w", s.GuestDigest, errdefs.ErrInvalid)
	}
	if s.Recipe != "" && !hex64Re.MatchString(s.Recipe) {
		return fmt.Errorf("recipe %q is not a recipe's hash (64 hex digits, from Recipe.Hash): %w", s.Recipe, errdefs.ErrInvalid)
	}
	return nil
}

// versionRe is what a paddock version may be ("v1.2.3", "devel+0123abcd");
// empty until Build asks the binary.
var versionRe = regexp.MustCompile(`^[0-9A-Za-z.+_-]{0,64}$`)

// GuestVersion asks a guest binary (paddock-guest, or paddock itself) its
// version: `guest version` prints it alone on a line.
func GuestVersion(ctx context.Context, guestBin string) (string, error) {
	out, err := exec.CommandContext(ctx, guestBin, "guest", "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s guest version: %w", guestBin, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" || !versionRe.MatchString(v) {
		return "", fmt.Errorf("%s guest version printed %q, not a version", guestBin, out)
	}
	return v, nil
}

var dockerfile = template.Must(template.New("Dockerfile").Parse(`# Written by paddock image build; do not edit. Builds with no network.
FROM {{.Base}}
# paddock's steps run as root with sh, whatever USER and SHELL a
# project's steps left.
USER 0:0
SHELL ["/bin/sh", "-c"]
# The box user and the places it may write.
RUN set -eu; \
    grep -q '^{{.User}}:' /etc/group  || echo '{{.User}}:x:{{.UID}}:' >> /etc/group; \
    grep -q '^{{.User}}:' /etc/passwd || echo '{{.User}}:x:{{.UID}}:{{.UID}}:paddock:{{.Home}}:/bin/bash' >> /etc/passwd; \
    mkdir -p {{.Home}} {{.Workspace}} /run/paddock; \
    chown {{.UID}}:{{.UID}} {{.Home}} {{.Workspace}}; chmod 0700 {{.Home}}
# The pinned Claude Code: one native binary, mode 0555 from the context.
COPY claude /usr/local/bin/claude
# Claude Code's managed settings: paddock's activity hooks, where the box
# user (and a repository) cannot remove them (read-only root).
COPY managed-settings.json {{.ManagedSettings}}
# The guest, last: it changes with every paddock build.
COPY paddock /usr/local/bin/paddock
ENV DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    HOME={{.Home}} \
    PATH=/usr/local/bin:/usr/bin:/bin
LABEL {{.LabelImage}}="1" {{.LabelClaude}}="{{.ClaudeVersion}}" {{.LabelBase}}="{{.Base}}" {{.LabelGuest}}="{{.Guest}}" {{.LabelPaddock}}="{{.PaddockVersion}}"{{if .GuestDigest}} {{.LabelGuestDigest}}="{{.GuestDigest}}"{{end}}{{if .Recipe}} {{.LabelRecipe}}="{{.Recipe}}"{{end}}
USER {{.UID}}:{{.UID}}
WORKDIR {{.Workspace}}
ENTRYPOINT ["/usr/local/bin/paddock", "guest"]
`))

// Dockerfile renders the spec's Dockerfile.
func Dockerfile(s Spec) (string, error) {
	if err := s.Check(); err != nil {
		return "", err
	}
	var b bytes.Buffer
	err := dockerfile.Execute(&b, map[string]any{
		"Base": s.Base, "ClaudeVersion": s.ClaudeVersion, "UID": sandbox.BoxUID, "User": sandbox.BoxUser,
		"Home": sandbox.HomeDir, "Workspace": sandbox.WorkspaceDir,
		"LabelImage": LabelImage, "LabelClaude": LabelClaudeVersion, "LabelBase": LabelBase,
		"ManagedSettings": claudecode.ManagedSettingsPath,
		"LabelGuest":      sandbox.LabelGuestProtocol, "Guest": sandbox.GuestProtocol,
		"LabelPaddock": LabelPaddock, "PaddockVersion": s.PaddockVersion,
		"LabelGuestDigest": LabelGuestDigest, "GuestDigest": s.GuestDigest,
		"LabelRecipe": LabelRecipe, "Recipe": s.Recipe,
	})
	return b.String(), err
}

// Build builds the image from the Claude Code binary and the (static)
// paddock binary, shows progress, verifies the pin, and returns the image id.
//
// A base the local store lacks is pulled by its digest, with the pull's
// progress shown; a base given by image id (sha256:…) must be in the store.
func Build(ctx context.Context, cli *client.Client, s Spec, claudeBin, paddockBin string, progress io.Writer) (string, error) {
	if s.PaddockVersion == "" {
		v, err := GuestVersion(ctx, paddockBin)
		if err != nil {
			return "", err
		}
		s.PaddockVersion = v
	}
	if s.GuestDigest == "" {
		d, err := fileDigest(paddockBin)
		if err != nil {
			return "", err
		}
		s.GuestDigest = d
	}
	if err := s.Check(); err != nil { // fills the default tag
		return "", err
	}
	df, err := Dockerfile(s)
	if err != nil {
		return "", err
	}
	if progress == nil {
		progress = io.Discard
	}
	if err := ensureBase(ctx, cli, s.Base, progress); err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, df, claudeBin, paddockBin)) }()
	resp, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{s.Tag},
		Dockerfile:  "Dockerfile",
		NetworkMode: "none",
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelImage: "1"},
	})
	if err != nil {
		pr.Close()
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	id, err := Show(resp.Body, progress)
	if err != nil {
		return "", fmt.Errorf("image build failed: %w", err)
	}
	if id == "" {
		return "", fmt.Errorf("image build: %w", errNoID)
	}
	fmt.Fprintf(progress, "verifying: claude --version in %s\n", short(id))
	got, err := RunVersion(ctx, cli, id)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(got, s.ClaudeVersion+" ") {
		_, _ = cli.ImageRemove(ctx, id, client.ImageRemoveOptions{Force: true})
		return "", fmt.Errorf("the image reports Claude Code %q, not the pinned %s; image refused and removed: %w", got, s.ClaudeVersion, errdefs.ErrConflict)
	}
	fmt.Fprintf(progress, "ok: %s is %s with Claude Code %s\n", s.Tag, short(id), s.ClaudeVersion)
	return id, nil
}

// fileDigest is the sha256 of a file's contents, in hex.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// writeContext writes the build context as a tar stream.
func writeContext(w io.Writer, df, claudeBin, paddockBin string) error {
	tw := tar.NewWriter(w)
	add := func(name string, mode int64, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add("Dockerfile", 0o644, int64(len(df)), strings.NewReader(df)); err != nil {
		return err
	}
	ms := claudecode.ManagedSettings("/usr/local/bin/paddock")
	if err := add("managed-settings.json", 0o444, int64(len(ms)), bytes.NewReader(ms)); err != nil {
		return err
	}
	for name, path := range map[string]string{"claude": claudeBin, "paddock": paddockBin} {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		err = add(name, 0o555, fi.Size(), f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// ensureBase pulls a digest-pinned base the local store lacks.
func ensureBase(ctx context.Context, cli *client.Client, base string, progress io.Writer) error {
	_, err := cli.ImageInspect(ctx, base)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("look for the base %s: %w", base, err)
	}
	if idRef.MatchString(base) {
		return fmt.Errorf("base %s is not in the local image store; give a name@sha256:<digest> to pull, or run `paddock image build` without --base to make one: %w", base, errdefs.ErrNotFound)
	}
	fmt.Fprintf(progress, "pulling %s\n", base)
	resp, err := cli.ImagePull(ctx, base, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w; without a registry, run `paddock image build` without --base (it makes a base with debootstrap): %w", base, err, errdefs.ErrUnavailable)
	}
	defer resp.Close()
	if _, err := Show(resp, progress); err != nil {
		return fmt.Errorf("pull %s: %w", base, err)
	}
	if _, err := cli.ImageInspect(ctx, base); err != nil {
		return fmt.Errorf("pull %s ended without the image: %w", base, err)
	}
	return nil
}

// RunVersion runs `claude --version` in the image (no network, read-only,
// as the box user) and returns what it printed.
func RunVersion(ctx context.Context, cli *client.Client, img string) (string, error) {
	no := false
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{
		Image: img, User: fmt.Sprintf("%d:%d", sandbox.BoxUID, sandbox.BoxUID),
		Entrypoint: []string{"/usr/local/bin/claude", "--version"}, NetworkDisabled: true,
		Labels: map[string]string{LabelImage: "verify"},
	}, HostConfig: &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"}, Init: &no,
		Tmpfs: map[string]string{"/tmp": "rw,size=64m", sandbox.HomeDir: fmt.Sprintf("rw,size=64m,uid=%d", sandbox.BoxUID)}}})
	if err != nil {
		return "", fmt.Errorf("verify image: %w", err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true}) //nolint:errcheck
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("verify image: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	w := cli.ContainerWait(wctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		return "", fmt.Errorf("verify image: %w", err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", fmt.Errorf("verify image: %w", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, logs)
	return strings.TrimSpace(out.String()), nil
}
