package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestImageBuildNoFlags runs the README's Docker step as a user does:
// `paddock image build`, no flag, with a state directory of its own. The
// base is the one paddock makes (the tests' image code made it, with the
// same recipe, or made it now); Claude Code is installed with npm's
// progress shown; the build's steps are shown as the docker CLI shows
// them; the image is tagged with the default name and labelled with what
// the docker backend checks. A second run reuses everything and gives the
// same image.
func TestImageBuildNoFlags(t *testing.T) {
	bin, cli, base := imageSetup(t)
	ctx := context.Background()
	dir := filepath.Join(testenv.TraversableTempDir(t), "state")
	build := func() (id, progress string) {
		t.Helper()
		out, progress, err := imageBuild(bin, dir, nil)
		if err != nil {
			t.Fatalf("paddock image build: %v\n%s%s", err, out, progress)
		}
		id = strings.TrimSpace(out)
		if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(id) {
			t.Fatalf("stdout is %q, not the image id", id)
		}
		return id, progress
	}
	id, progress := build()
	spec := image.DefaultBase()
	inOrder(t, progress,
		"base: "+spec.Tag()+" ("+base+"), made earlier\n",
		"installing Claude Code "+claudecode.PinnedVersion+" with npm into "+filepath.Join(dir, "cli", claudecode.PinnedVersion)+"\n",
		"\n  npm http ", // npm's own lines, indented, as they come
		"Step 1/",
		"FROM "+base+"\n",
		"Successfully tagged paddock/box:claude-"+claudecode.PinnedVersion+"\n",
		"verifying: claude --version in ",
		"ok: paddock/box:claude-"+claudecode.PinnedVersion+" is ",
		"built in ")
	ins, err := cli.ImageInspect(ctx, "paddock/box:claude-"+claudecode.PinnedVersion)
	if err != nil {
		t.Fatal(err)
	}
	if ins.ID != id {
		t.Fatalf("the default tag is %s, the build printed %s", ins.ID, id)
	}
	ver, err := image.GuestVersion(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{sandbox.LabelBase: base, sandbox.LabelClaudeVersion: claudecode.PinnedVersion,
		sandbox.LabelPaddockVersion: ver, sandbox.LabelGuestProtocol: "2", image.LabelImage: "1"} {
		if got := ins.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	// The image's paddock is the slim guest built beside the CLI.
	sum, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "sha256sum", id, docker.GuestPath).Output()
	if err != nil {
		t.Fatalf("sha256sum in the image: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(filepath.Dir(bin), guest.BinaryName))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(sum)); len(got) == 0 || got[0] != fmt.Sprintf("%x", sha256.Sum256(want)) {
		t.Fatalf("the image's %s is not paddock-guest: %s", docker.GuestPath, sum)
	}
	if strings.Contains(progress, "carries the full paddock") {
		t.Fatalf("the build says it fell back to the full binary:\n%s", progress)
	}
	again, progress := build()
	if again != id {
		t.Fatalf("a second build gave %s, not %s", again, id)
	}
	inOrder(t, progress, "made earlier", "Claude Code "+claudecode.PinnedVersion+": installed earlier", "Using cache", "built in ")
}

// inOrder fails unless s holds each of want, in that order.
func inOrder(t *testing.T, s string, want ...string) {
	t.Helper()
	rest := s
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("missing %q (in order) in:\n%s", w, s)
		}
		rest = rest[i+len(w):]
	}
}

// TestImageBuildPullsBase: a base given by digest that the store lacks is
// pulled by that digest from its registry, the pull shown as the docker
// CLI shows it, and the box image names that digest as its base. The
// registry is Debian's docker-registry on loopback, holding the base
// paddock made; a tag or an unknown local id is refused.
func TestImageBuildPullsBase(t *testing.T) {
	bin, cli, base := imageSetup(t)
	ctx := context.Background()
	addr := startRegistry(t)
	dir := testenv.TraversableTempDir(t)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	repo := addr + "/paddock/base"
	docker("tag", base, repo+":pushed")
	docker("push", repo+":pushed")
	var digests []string
	if err := json.Unmarshal([]byte(docker("image", "inspect", "--format", "{{json .RepoDigests}}", base)), &digests); err != nil {
		t.Fatal(err)
	}
	ref := ""
	for _, d := range digests {
		if strings.HasPrefix(d, repo+"@sha256:") {
			ref = d
		}
	}
	if ref == "" {
		t.Fatalf("no digest of %s among %v", repo, digests)
	}
	// The store forgets the registry's names (the layers stay: the pull
	// finds them there, as it would on a second machine's cache).
	docker("rmi", repo+":pushed") // the repository's digest goes with its last tag
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		t.Fatalf("%s is still in the store", ref)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", ref, "paddock-test/pulled:1").Run() })

	run := func(args ...string) (string, string, error) {
		return imageBuild(bin, filepath.Join(dir, "state"), nil, args...)
	}
	out, progress, err := run("--base", ref, "--tag", "paddock-test/pulled:1")
	if err != nil {
		t.Fatalf("image build --base %s: %v\n%s%s", ref, err, out, progress)
	}
	inOrder(t, progress, "pulling "+ref+"\n", "Pulling from paddock/base", "Digest: sha256:", "Step 1/", "FROM "+ref+"\n", "ok: paddock-test/pulled:1 is ")
	ins, err := cli.ImageInspect(ctx, "paddock-test/pulled:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := ins.Config.Labels[sandbox.LabelBase]; got != ref {
		t.Fatalf("label %s = %q, want %q", sandbox.LabelBase, got, ref)
	}
	// Refused, each with what to do.
	for _, c := range []struct{ base, want string }{
		{repo + ":pushed", "is not pinned"},
		{"sha256:" + strings.Repeat("0", 64), "is not in the local image store"},
	} {
		if _, errs, err := run("--base", c.base); err == nil || !strings.Contains(errs, c.want) {
			t.Errorf("--base %s: %v %q, want %q", c.base, err, errs, c.want)
		}
	}
}

// startRegistry runs Debian's docker-registry on a free loopback port
// (Docker trusts 127.0.0.0/8 over plain http) for the test, and returns
// its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	regBin := testenv.LookPath(t, "docker-registry")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "registry.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "registry"), addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := exec.Command(regBin, "serve", cfg)
	regLog := &testenv.Buffer{}
	reg.Stdout, reg.Stderr = regLog, regLog
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	for i := 0; ; i++ {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			return addr
		}
		if i == 100 {
			t.Fatalf("the registry did not come up:\n%s", regLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestImageBuildPush: --push REPO pushes the built image as
// REPO:claude-<version> and prints REPO@sha256:<digest>, a name another
// machine pulls exactly that image by.
func TestImageBuildPush(t *testing.T) {
	bin, _, _ := imageSetup(t)
	repo := startRegistry(t) + "/team/paddock-box"
	dir := testenv.TraversableTempDir(t)
	// No Docker CLI login: an anonymous push, as to this registry.
	out, progress, err := imageBuild(bin, filepath.Join(dir, "state"), []string{"DOCKER_CONFIG=" + filepath.Join(dir, "docker-config")},
		"--tag", "paddock-test/pushed:1", "--push", repo)
	if err != nil {
		t.Fatalf("image build --push: %v\n%s%s", err, out, progress)
	}
	pinned := strings.TrimSpace(out)
	if !regexp.MustCompile("^" + regexp.QuoteMeta(repo) + "@sha256:[0-9a-f]{64}$").MatchString(pinned) {
		t.Fatalf("stdout is %q, not %s@sha256:<digest>", pinned, repo)
	}
	tag := repo + ":claude-" + claudecode.PinnedVersion
	inOrder(t, progress, "ok: paddock-test/pushed:1 is ", "pushing "+tag+"\n", "claude-"+claudecode.PinnedVersion+": digest: sha256:", "pushed: "+pinned+"\n")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag, "paddock-test/pushed:1").Run() })
	// The registry serves that manifest under that digest.
	digest := pinned[strings.Index(pinned, "@")+1:]
	req, _ := http.NewRequest("HEAD", "http://"+repo[:strings.Index(repo, "/")]+"/v2/team/paddock-box/manifests/"+digest, nil)
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Docker-Content-Digest") != digest {
		t.Fatalf("the registry answers %d, digest %q, for %s", resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), pinned)
	}
	// A tag with --push is refused before anything is built.
	if _, errs, err := imageBuild(bin, filepath.Join(dir, "state"), nil, "--push", repo+":v1"); err == nil || !strings.Contains(errs, "no tag, no digest") {
		t.Fatalf("--push with a tag: %v %s", err, errs)
	}
}

// imageSetup is what the image tests need: root, the paddock binary, a
// Docker client (closed with the test) and the id of the base paddock
// makes (made now if the store lacks it).
func imageSetup(t *testing.T) (bin string, cli *client.Client, base string) {
	t.Helper()
	testenv.Root(t)
	bin = testenv.PaddockBinary(t)
	cli = imagetest.Docker(t)
	t.Cleanup(func() { cli.Close() })
	base, err := imagetest.Base(context.Background(), cli, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return bin, cli, base
}

// imageBuild runs `paddock --state-dir dir image build args…` as a user
// does, in the test's environment (npm may need its CA or proxy settings)
// plus env, and returns its standard output and error.
func imageBuild(bin, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--state-dir", dir, "image", "build"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}
