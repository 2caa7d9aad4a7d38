// Ensure: the box image of a recipe, reused when one is there, made when
// not (the base, the project's Dockerfile, then paddock's own layers).

package image

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	mobyimage "github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// EnsureOptions are what Ensure needs besides the recipe.
type EnsureOptions struct {
	// ClaudeVersion is the exact Claude Code version the image carries.
	ClaudeVersion string
	// ClaudeBin is that version's binary, copied into the image. When
	// empty, InstallClaude is called for it, only if an image must be
	// built (after the base is ready, so the progress reads in the order
	// things happen). One of the two is required.
	ClaudeBin     string
	InstallClaude func(ctx context.Context) (string, error)
	// GuestBin is the static paddock (or paddock-guest) binary the image
	// carries as its guest.
	GuestBin string
	// Mirror is the Debian mirror a base is made from ("" for the
	// host's, HostMirror).
	Mirror string
	// TempDir holds a base's debootstrapped tree while it is made
	// (default os.TempDir()).
	TempDir string
	// BaseCache, when set, keeps debootstrapped trees between runs, one
	// per base recipe (BaseCache/rootfs-<suite>-<recipe>), so a store
	// that lost a base imports it again without debootstrap. Callers
	// that share it must not make the same base at the same time.
	BaseCache string
	// Tag names the image (default RecipeTag).
	Tag string
	// Rebuild builds even when an image of the recipe is there (Docker's
	// layer cache still makes an unchanged build quick): what `paddock
	// image build` does, since it was asked to build.
	Rebuild bool
	// Progress receives what happens, step by step, the builds' output
	// as the docker CLI shows it; nil shows nothing.
	Progress io.Writer
}

// Ensure returns the id of the box image of r for o.ClaudeVersion and
// the guest in o.GuestBin, and whether it built one.
//
// Reuse: the image tagged o.Tag (default RecipeTag) is returned as it is,
// built false, when its labels say it is paddock's (LabelImage), of this
// recipe's hash (LabelRecipe), this Claude Code version, this guest
// (LabelGuestDigest, LabelPaddock) and this guest protocol. Only the tag
// is looked at: an untagged image with the right labels may be a
// project's own stage, whose labels its Dockerfile chose.
//
// Otherwise it builds: the base of r.BaseSpec (FindBase, or MakeBase:
// debootstrap, minutes, once per package list), then the project's
// Dockerfile on it, if any (build argument PADDOCK_BASE, its directory
// as the context, network r.BuildNetwork, nothing tagged), then paddock's
// own layers on top (Build: Claude Code, managed settings, the guest,
// the box user, the labels; `claude --version` checked), tagged. A step
// that fails leaves no image tagged; its error says which step and what
// to do. Concurrent calls are safe; two may both build (the last tags).
func Ensure(ctx context.Context, cli *client.Client, r Recipe, o EnsureOptions) (id string, built bool, err error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	if _, err := (&Spec{ClaudeVersion: o.ClaudeVersion}).CheckVersion(); err != nil {
		return "", false, err
	}
	if o.ClaudeBin == "" && o.InstallClaude == nil {
		return "", false, fmt.Errorf("ensure a box image: no Claude Code binary and no way to install one (EnsureOptions.ClaudeBin or InstallClaude): %w", errdefs.ErrInvalid)
	}
	if o.GuestBin == "" {
		return "", false, fmt.Errorf("ensure a box image: no guest binary (EnsureOptions.GuestBin: the static paddock or paddock-guest, as make build leaves it): %w", errdefs.ErrInvalid)
	}
	hash, err := r.Hash() // checks r, and the Dockerfile against the contract
	if err != nil {
		return "", false, err
	}
	guestVer, err := GuestVersion(ctx, o.GuestBin)
	if err != nil {
		return "", false, err
	}
	guestDigest, err := fileDigest(o.GuestBin)
	if err != nil {
		return "", false, err
	}
	tag := o.Tag
	if tag == "" {
		tag = RecipeTag(r, hash, o.ClaudeVersion)
	}
	if !o.Rebuild {
		want := map[string]string{LabelImage: "1", LabelRecipe: hash, LabelClaudeVersion: o.ClaudeVersion,
			LabelPaddock: guestVer, LabelGuestDigest: guestDigest, sandbox.LabelGuestProtocol: strconv.Itoa(sandbox.GuestProtocol)}
		id, err := findTagged(ctx, cli, tag, want)
		if err != nil || id != "" {
			if id != "" {
				fmt.Fprintf(progress, "image: %s (%s), built earlier from this recipe\n", tag, short(id))
			}
			return id, false, err
		}
	}
	spec, err := r.BaseSpec(o.Mirror)
	if err != nil {
		return "", false, err
	}
	if err := spec.Check(); err != nil {
		return "", false, err
	}
	base, err := ensureMadeBase(ctx, cli, spec, o, progress)
	if err != nil {
		return "", false, err
	}
	claude := o.ClaudeBin
	if claude == "" {
		if claude, err = o.InstallClaude(ctx); err != nil {
			return "", false, err
		}
	}
	top := base
	if r.Dockerfile != "" {
		if top, err = buildProject(ctx, cli, r, hash, base, progress); err != nil {
			return "", false, err
		}
	}
	id, err = Build(ctx, cli, Spec{Base: top, ClaudeVersion: o.ClaudeVersion, Tag: tag, PaddockVersion: guestVer,
		GuestDigest: guestDigest, Recipe: hash}, claude, o.GuestBin, progress)
	if err != nil {
		return "", false, err
	}
	return id, true, nil
}

// findTagged returns the id of the image tagged tag when its labels hold
// want, else "".
func findTagged(ctx context.Context, cli *client.Client, tag string, want map[string]string) (string, error) {
	res, err := cli.ImageInspect(ctx, tag)
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for the image %s: %w", tag, err)
	}
	if res.Config == nil {
		return "", nil
	}
	for k, v := range want {
		if res.Config.Labels[k] != v {
			return "", nil
		}
	}
	return res.ID, nil
}

// ensureMadeBase finds the base of spec, or makes it, saying which.
func ensureMadeBase(ctx context.Context, cli *client.Client, spec BaseSpec, o EnsureOptions, progress io.Writer) (string, error) {
	id, err := FindBase(ctx, cli, spec)
	if err != nil {
		return "", err
	}
	if id != "" {
		fmt.Fprintf(progress, "base: %s (%s), made earlier\n", spec.Tag(), id)
		return id, nil
	}
	fmt.Fprintf(progress, "base: none yet; making %s (a few minutes, once)\n", spec.Tag())
	mo := MakeBaseOptions{Progress: progress, TempDir: o.TempDir}
	if o.BaseCache != "" {
		mo.Rootfs = filepath.Join(o.BaseCache, "rootfs-"+spec.Suite+"-"+spec.Recipe())
	}
	return MakeBase(ctx, cli, spec, mo)
}

// buildProject builds the project's Dockerfile on base and returns the
// id of its last stage, untagged. The context it sends must be the one
// hashed into the recipe (hash): a file changed in between is an error.
func buildProject(ctx context.Context, cli *client.Client, r Recipe, hash, base string, progress io.Writer) (string, error) {
	bc, err := ReadContext(r.Dockerfile, r.Within)
	if err != nil {
		return "", err
	}
	network := r.network()
	fmt.Fprintf(progress, "project: building %s on %s (context %s: %d entries, %d KiB; network %s)\n",
		r.Dockerfile, short(base), bc.Dir, len(bc.entries), (bc.Size+1023)>>10, network)
	sent := newRecipeHash(r)
	pr, pw := io.Pipe()
	sentErr := make(chan error, 1)
	go func() {
		err := bc.writeTar(pw, sent)
		pw.CloseWithError(err)
		sentErr <- err
	}()
	baseArg := base
	resp, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Dockerfile:  bc.DockerfileName,
		BuildArgs:   map[string]*string{BaseArg: &baseArg},
		NetworkMode: network,
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Version:     build.BuilderV1,
	})
	if err != nil {
		pr.CloseWithError(err)
		<-sentErr
		return "", fmt.Errorf("build the project's Dockerfile %s: %w", r.Dockerfile, err)
	}
	id, err := Show(resp.Body, progress)
	resp.Body.Close()
	pr.Close()
	werr := <-sentErr // the daemon read the whole context before it built
	if err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		hint := ""
		if network == NetworkNone {
			hint = "; its RUN steps have no network: a step that fetches needs build network default (--build-network default)"
		}
		return "", fmt.Errorf("the project's Dockerfile %s failed: %w: fix it (the build's output above shows the step)%s; no image was tagged", r.Dockerfile, err, hint)
	}
	if id == "" || !idRef.MatchString(id) {
		return "", fmt.Errorf("build the project's Dockerfile %s: %w", r.Dockerfile, errNoID)
	}
	if got := fmt.Sprintf("%x", sent.Sum(nil)); got != hash {
		return "", fmt.Errorf("the build context %s changed while paddock read it (the files sent are not the ones hashed into the recipe): run the build again once it stays the same: %w", bc.Dir, errdefs.ErrConflict)
	}
	ins, err := cli.ImageInspect(ctx, id)
	if err != nil {
		return "", fmt.Errorf("inspect the project's stage %s: %w", short(id), err)
	}
	if err := checkProjectStage(ins.InspectResponse); err != nil {
		return "", fmt.Errorf("the project's Dockerfile %s: %w; no image was tagged", r.Dockerfile, err)
	}
	fmt.Fprintf(progress, "project: %s built as %s\n", bc.DockerfileName, short(id))
	return id, nil
}

// checkProjectStage refuses a project's stage whose image settings would
// reach past its own box, whatever its Dockerfile said to make them (a
// LABEL's key from a build argument, say): paddock's layers on top reset
// the user, entrypoint, command, working directory, shell and paddock's
// own labels, and cannot unset the rest. Labels named paddock.* (but the
// base's recipe) are paddock's: every box inherits its image's labels,
// and the docker backend reads some of them (how to mount a workspace,
// say). A volume, a health check, a stop signal or an ONBUILD trigger
// changes how boxes run.
func checkProjectStage(ins mobyimage.InspectResponse) error {
	c := ins.Config
	if c == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		if strings.HasPrefix(k, "paddock.") && k != LabelBaseRecipe {
			return fmt.Errorf("it sets the label %s: labels named paddock.* are paddock's own (every box inherits its image's labels, and paddock reads them): name yours otherwise: %w", k, errdefs.ErrInvalid)
		}
	}
	switch {
	case len(c.Volumes) > 0:
		return fmt.Errorf("it declares volumes (%s), which would give every box anonymous Docker volumes: remove the VOLUME: %w", strings.Join(slices.Sorted(maps.Keys(c.Volumes)), ", "), errdefs.ErrInvalid)
	case c.Healthcheck != nil && len(c.Healthcheck.Test) > 0 && c.Healthcheck.Test[0] != "NONE":
		return fmt.Errorf("it sets a health check, which would run in every box: remove the HEALTHCHECK: %w", errdefs.ErrInvalid)
	case c.StopSignal != "":
		return fmt.Errorf("it sets the stop signal %s, which would change how paddock stops a box: remove the STOPSIGNAL: %w", c.StopSignal, errdefs.ErrInvalid)
	case len(c.OnBuild) > 0:
		return fmt.Errorf("it leaves ONBUILD triggers, which would run inside paddock's part of the build: write the steps themselves: %w", errdefs.ErrInvalid)
	}
	return nil
}
