// A project's recipe: what a project adds to the box image paddock makes
// (Debian packages in the base, its own Dockerfile on top of it), and the
// hash that names the result, so an image is made once per recipe and
// reused while the recipe stays the same.

package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Labels on a box image made by Ensure.
const (
	// LabelRecipe is the recipe's full hash (Recipe.Hash): what Ensure
	// looks for to reuse an image.
	LabelRecipe = "paddock.recipe"
	// LabelGuestDigest is the sha256 of the guest binary the image
	// carries: two builds of paddock can report the same version (a
	// development build names only its commit), never the same digest.
	LabelGuestDigest = "paddock.guest-sha256"
)

// Build networks a project's Dockerfile may run with.
const (
	// NetworkNone: RUN steps reach nothing (the default).
	NetworkNone = "none"
	// NetworkDefault: RUN steps reach the network through Docker's
	// default bridge, as `docker build` does.
	NetworkDefault = "default"
	// NetworkHost: RUN steps share the host's network, loopback services
	// included.
	NetworkHost = "host"
)

// Recipe is what a project adds to the box image. The zero Recipe is
// paddock's own image (DefaultBase, nothing on top).
type Recipe struct {
	// Packages are Debian packages added to DefaultBase's, installed by
	// debootstrap (which resolves their dependencies) from the host's
	// mirror. Order and duplicates do not matter.
	Packages []string
	// Dockerfile is the absolute path of the project's Dockerfile, or ""
	// for none. Its directory is the build context: everything in it
	// but what its .dockerignore excludes is sent to the build and
	// hashed into the recipe. See CheckDockerfile for what it may say,
	// and BuildContext for how it is read (the directory is opened as
	// given; below it no symlink is followed).
	Dockerfile string
	// Within, when not "", is a directory that holds Dockerfile (a
	// project's workspace): the path from it to the Dockerfile's
	// directory is followed without symlinks whenever it is read
	// (ReadContext). Not part of the recipe's hash.
	Within string
	// AcceptedDockerfile, when not nil, is what the Dockerfile must hold
	// (what its owner accepted): Hash refuses other bytes with
	// errdefs.ErrConflict, and a build sends only what was hashed.
	AcceptedDockerfile []byte
	// BuildNetwork is the network the Dockerfile's RUN steps have:
	// NetworkNone (also for ""), NetworkDefault or NetworkHost. Not part
	// of the recipe's hash: it changes what a build may reach, not what
	// the recipe says.
	BuildNetwork string
}

// IsZero reports whether r adds nothing to paddock's own image.
func (r Recipe) IsZero() bool { return len(r.Packages) == 0 && r.Dockerfile == "" }

// NormalPackages returns pkgs sorted, without duplicates, or an error
// naming the first one that is not a Debian package name (lower-case
// letters, digits, + - and ., at least two characters; no version or
// architecture: debootstrap takes names only).
func NormalPackages(pkgs []string) ([]string, error) {
	out := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		if !packageRe.MatchString(p) {
			return nil, fmt.Errorf("package %q is not a Debian package name (lower-case letters, digits, + - ., no version or architecture), e.g. build-essential: %w", p, errdefs.ErrInvalid)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// network is the build's network mode, NetworkNone for "".
func (r Recipe) network() string {
	if r.BuildNetwork == "" {
		return NetworkNone
	}
	return r.BuildNetwork
}

// Check validates the recipe without reading the Dockerfile: the package
// names, the Dockerfile's path (absolute) and the build network.
func (r Recipe) Check() error {
	if _, err := NormalPackages(r.Packages); err != nil {
		return err
	}
	if r.Dockerfile != "" && !filepath.IsAbs(r.Dockerfile) {
		return fmt.Errorf("the project's Dockerfile %q is not an absolute path; give it from / (its directory is the build context): %w", r.Dockerfile, errdefs.ErrInvalid)
	}
	switch r.network() {
	case NetworkNone, NetworkDefault, NetworkHost:
	default:
		return fmt.Errorf("build network %q is none of %s, %s or %s: %w", r.BuildNetwork, NetworkNone, NetworkDefault, NetworkHost, errdefs.ErrInvalid)
	}
	if r.Dockerfile == "" && r.network() != NetworkNone {
		return fmt.Errorf("a build network (%s) is for a project's Dockerfile's RUN steps, and there is no Dockerfile; give one or drop the network: %w", r.BuildNetwork, errdefs.ErrInvalid)
	}
	return nil
}

// BaseSpec is the base the recipe builds on: DefaultBase with r's
// packages added (sorted, without duplicates), from mirror ("" for the
// host's). A recipe with no packages has DefaultBase's recipe and tag.
func (r Recipe) BaseSpec(mirror string) (BaseSpec, error) {
	b := DefaultBase()
	if mirror != "" {
		b.Mirror = mirror
	}
	pkgs, err := NormalPackages(append(slices.Clone(b.Packages), r.Packages...))
	if err != nil {
		return BaseSpec{}, err
	}
	b.Packages = pkgs
	return b, nil
}

// Hash is the recipe's hash, 64 hex digits: of the base's suite and
// packages, and, with a Dockerfile, of the build context paddock sends
// (every file's path, type, permission bits and contents, symlinks'
// targets; the Dockerfile's contents always). Same recipe, same hash,
// whatever order the packages were given in; any change of package,
// Dockerfile or context file, another hash. It reads the context, so its
// errors are those of ReadContext and CheckDockerfile.
func (r Recipe) Hash() (string, error) {
	if err := r.Check(); err != nil {
		return "", err
	}
	h := newRecipeHash(r)
	if r.Dockerfile != "" {
		bc, err := ReadContext(r.Dockerfile, r.Within)
		if err != nil {
			return "", err
		}
		if r.AcceptedDockerfile != nil && !bytes.Equal(bc.Dockerfile, r.AcceptedDockerfile) {
			return "", fmt.Errorf("the Dockerfile %s changed since it was accepted with its project file: accept it again (paddock project show, then allow) or undo the change: %w", r.Dockerfile, errdefs.ErrConflict)
		}
		if err := CheckDockerfile(bc.Dockerfile, r.network()); err != nil {
			return "", fmt.Errorf("%s: %w", r.Dockerfile, err)
		}
		if err := bc.hashInto(h); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// newRecipeHash starts a recipe's hash with its base's part. The mirror
// is left out: any mirror serves the same signed packages.
func newRecipeHash(r Recipe) *fieldHash {
	b, _ := r.BaseSpec("http://unused.example/debian") // r.Check passed: the packages are valid
	h := &fieldHash{Hash: sha256.New()}
	h.field("paddock recipe 1")
	h.field("suite", b.Suite)
	h.field("packages")
	h.field(b.Packages...)
	return h
}

// fieldHash hashes fields, each prefixed with its length, so no two
// sequences of fields (a path with a newline in it, say) hash alike.
type fieldHash struct{ hash.Hash }

func (h *fieldHash) field(fs ...string) {
	var n [binary.MaxVarintLen64]byte
	for _, f := range fs {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
}

// RecipeTag is the tag of the box image of a recipe whose hash is hash,
// with Claude Code version: paddock's default, paddock/box:claude-<version>,
// for the zero recipe, else paddock/box-<hash's first 12>:claude-<version>.
// The recipe goes in the repository, not the tag, so the tag still ends
// in :claude-<version> (what the docker backend checks an image's Claude
// Code against), and images of different recipes never share a name.
func RecipeTag(r Recipe, hash, version string) string {
	if r.IsZero() || len(hash) < 12 {
		return "paddock/box:claude-" + version
	}
	return "paddock/box-" + hash[:12] + ":claude-" + version
}

// hex64Re is a sha256 in hex: what LabelRecipe and LabelGuestDigest hold.
var hex64Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
