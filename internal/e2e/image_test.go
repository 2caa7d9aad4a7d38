package e2e

import (
	"bytes"
	"context"
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

	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/image"
	"github.com/paddockhq/paddock/internal/image/imagetest"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/testenv"
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
	testenv.Root(t)
	bin := testenv.PaddockBinary(t)
	cli := imagetest.Docker(t)
	defer cli.Close()
	ctx := context.Background()
	base, err := imagetest.Base(ctx, cli, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testenv.TraversableTempDir(t), "state")
	build := func() (id, progress string) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, "--state-dir", dir, "image", "build")
		cmd.Env = os.Environ() // the user's: npm may need its CA or proxy settings
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("paddock image build: %v\n%s%s", err, out.String(), errb.String())
		}
		id = strings.TrimSpace(out.String())
		if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(id) {
			t.Fatalf("stdout is %q, not the image id", id)
		}
		return id, errb.String()
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
	testenv.Root(t)
	bin := testenv.PaddockBinary(t)
	cli := imagetest.Docker(t)
	defer cli.Close()
	ctx := context.Background()
	base, err := imagetest.Base(ctx, cli, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
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
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, append([]string{"--state-dir", filepath.Join(dir, "state"), "image", "build"}, args...)...)
		cmd.Env = os.Environ()
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
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
	testenv.Root(t)
	bin := testenv.PaddockBinary(t)
	cli := imagetest.Docker(t)
	defer cli.Close()
	ctx := context.Background()
	if _, err := imagetest.Base(ctx, cli, io.Discard); err != nil {
		t.Fatal(err)
	}
	repo := startRegistry(t) + "/team/paddock-box"
	dir := testenv.TraversableTempDir(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "--state-dir", filepath.Join(dir, "state"), "image", "build", "--tag", "paddock-test/pushed:1", "--push", repo)
	// No Docker CLI login: an anonymous push, as to this registry.
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(dir, "docker-config"))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("image build --push: %v\n%s%s", err, out.String(), errb.String())
	}
	pinned := strings.TrimSpace(out.String())
	if !regexp.MustCompile("^" + regexp.QuoteMeta(repo) + "@sha256:[0-9a-f]{64}$").MatchString(pinned) {
		t.Fatalf("stdout is %q, not %s@sha256:<digest>", pinned, repo)
	}
	tag := repo + ":claude-" + claudecode.PinnedVersion
	inOrder(t, errb.String(), "ok: paddock-test/pushed:1 is ", "pushing "+tag+"\n", "claude-"+claudecode.PinnedVersion+": digest: sha256:", "pushed: "+pinned+"\n")
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
	cmd = exec.Command(bin, "--state-dir", filepath.Join(dir, "state"), "image", "build", "--push", repo+":v1")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "no tag, no digest") {
		t.Fatalf("--push with a tag: %v %s", err, b)
	}
}
