package image

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// A box image for a cluster or another machine goes to the owner's
// registry: `paddock image build --push REPO` tags it REPO:claude-<V>,
// pushes it, and prints REPO@sha256:<digest>, the name to put in the
// configuration (a tag floats; the digest is what was built and checked).

// repoRe is a repository without tag or digest: [host[:port]/]path.
var repoRe = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*$`)

// CheckRepo refuses what is not a plain repository name.
func CheckRepo(repo string) error {
	if !repoRe.MatchString(repo) || strings.Contains(repo, "@") {
		return fmt.Errorf("%q is not a repository like registry.example.com/team/paddock-box (no tag, no digest): %w", repo, errdefs.ErrInvalid)
	}
	return nil
}

// registryHost is the registry a repository lives in, as the Docker CLI
// names it in its config: a first component with a dot, a colon or
// "localhost" is a host; anything else is Docker Hub.
func registryHost(repo string) string {
	first, _, ok := strings.Cut(repo, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "https://index.docker.io/v1/"
}

// dockerConfig is the part of the Docker CLI's config.json that says how
// to log in to a registry.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// RegistryAuth finds the login `docker login` stored for repo's registry in
// the Docker CLI's config (dir: $DOCKER_CONFIG, default ~/.docker) and
// encodes it as the daemon's X-Registry-Auth header wants. No config, or
// no login for that registry: an anonymous push (a registry that needs a
// login then says so). A login kept by a credential helper is not read:
// the error says to push with the docker CLI.
func RegistryAuth(dir, repo string) (secret.Value, error) {
	host := registryHost(repo)
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return secret.Value{}, nil
	}
	if err != nil {
		return secret.Value{}, fmt.Errorf("read the Docker CLI's config: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		// Never echo the file: it may hold passwords.
		return secret.Value{}, fmt.Errorf("the Docker CLI's config %s is not JSON: %w", filepath.Join(dir, "config.json"), errdefs.ErrInvalid)
	}
	a, ok := cfg.Auths[host]
	helper := cfg.CredHelpers[host]
	if helper == "" && ok && a.Auth == "" && a.IdentityToken == "" {
		helper = cfg.CredsStore // docker login leaves an empty entry when a store keeps the login
	}
	if helper != "" {
		return secret.Value{}, fmt.Errorf("your login to %s is kept by the credential helper docker-credential-%s, which paddock does not run: push with `docker push` yourself, or build without --push: %w", host, helper, errdefs.ErrUnavailable)
	}
	if !ok {
		return secret.Value{}, nil
	}
	ac := registry.AuthConfig{ServerAddress: host, IdentityToken: a.IdentityToken}
	if a.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		user, pass, found := strings.Cut(string(raw), ":")
		if err != nil || !found {
			return secret.Value{}, fmt.Errorf("the login to %s in the Docker CLI's config is damaged; run docker login %s again: %w", host, host, errdefs.ErrInvalid)
		}
		ac.Username, ac.Password = user, pass
	}
	j, err := json.Marshal(ac)
	if err != nil {
		return secret.Value{}, err
	}
	return secret.New(base64.URLEncoding.EncodeToString(j)), nil
}

// Push tags img as repo:tag, pushes it with auth (zero: anonymous), shows
// the push as the docker CLI does, and returns repo@sha256:<digest>.
func Push(ctx context.Context, cli *client.Client, img, repo, tag string, auth secret.Value, progress io.Writer) (string, error) {
	if err := CheckRepo(repo); err != nil {
		return "", err
	}
	if progress == nil {
		progress = io.Discard
	}
	ref := repo + ":" + tag
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: img, Target: ref}); err != nil {
		return "", fmt.Errorf("tag %s: %w", ref, err)
	}
	fmt.Fprintf(progress, "pushing %s\n", ref)
	resp, err := cli.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: anonymousOr(auth)})
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	defer resp.Close()
	digest, err := Show(resp, progress)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	if !idRef.MatchString(digest) {
		return "", fmt.Errorf("push %s: the daemon reported no digest: %w", ref, errNoID)
	}
	pinned := repo + "@" + digest
	fmt.Fprintf(progress, "pushed: %s\n", pinned)
	return pinned, nil
}

// anonymousOr is the header for auth, or the empty login ("{}") the
// daemon takes for an anonymous push.
func anonymousOr(auth secret.Value) string {
	if auth.IsZero() {
		return base64.URLEncoding.EncodeToString([]byte("{}"))
	}
	return auth.Reveal()
}
