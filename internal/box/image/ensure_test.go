package image_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// ensureSetup is what the Ensure tests need: root, debootstrap, Docker,
// the pinned Claude Code, a fresh guest, and the default base made (by
// imagetest, which makes it once for every test process).
func ensureSetup(t *testing.T) (*client.Client, image.EnsureOptions, *testenv.Buffer) {
	t.Helper()
	testenv.Root(t)
	testenv.LookPath(t, "debootstrap")
	claude := testenv.Claude(t)
	guest := testenv.GuestBinary(t)
	cli := imagetest.Docker(t)
	t.Cleanup(func() { cli.Close() })
	var progress io.Writer = io.Discard
	if testing.Verbose() {
		progress = os.Stderr
	}
	if _, err := imagetest.Base(context.Background(), cli, progress); err != nil {
		t.Fatal(err)
	}
	out := &testenv.Buffer{}
	if testing.Verbose() {
		progress = io.MultiWriter(out, os.Stderr)
	} else {
		progress = out
	}
	return cli, image.EnsureOptions{ClaudeVersion: claudecode.PinnedVersion, ClaudeBin: claude, GuestBin: guest,
		TempDir: t.TempDir(), BaseCache: "/var/cache/paddock", Progress: progress}, out
}

// testTag is the recipe's tag under paddock-test/, removed when the test
// ends (the base stays: making it again is what takes minutes).
func testTag(t *testing.T, cli *client.Client, r image.Recipe) string {
	t.Helper()
	h, err := r.Hash()
	if err != nil {
		t.Fatal(err)
	}
	tag := "paddock-test/" + strings.TrimPrefix(image.RecipeTag(r, h, claudecode.PinnedVersion), "paddock/")
	t.Cleanup(func() {
		_, err := cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Logf("remove %s: %v", tag, err)
		}
	})
	return tag
}

// inBox runs a command in the image as a box does: the box user, no
// network, a read-only root; it returns what it printed.
func inBox(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	args := append([]string{"run", "--rm", "--network", "none", "--read-only", "--user", strconv.Itoa(sandbox.BoxUID) + ":" + strconv.Itoa(sandbox.BoxUID),
		"--entrypoint", cmd[0], id}, cmd[1:]...)
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(cmd, " "), id, err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkLabels fails unless the image carries paddock's labels for the
// recipe r.
func checkLabels(t *testing.T, cli *client.Client, id string, r image.Recipe, guestBin string) {
	t.Helper()
	ctx := context.Background()
	ins, err := cli.ImageInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Hash()
	if err != nil {
		t.Fatal(err)
	}
	ver, err := image.GuestVersion(ctx, guestBin)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{image.LabelImage: "1", image.LabelRecipe: h, image.LabelClaudeVersion: claudecode.PinnedVersion,
		image.LabelPaddock: ver, sandbox.LabelGuestProtocol: strconv.Itoa(sandbox.GuestProtocol)} {
		if got := ins.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if d := ins.Config.Labels[image.LabelGuestDigest]; len(d) != 64 {
		t.Errorf("label %s = %q", image.LabelGuestDigest, d)
	}
	if ins.Config.User != "1000:1000" || len(ins.Config.Entrypoint) != 2 || ins.Config.Entrypoint[1] != "guest" {
		t.Errorf("user %q, entrypoint %v: not paddock's", ins.Config.User, ins.Config.Entrypoint)
	}
}

// TestEnsurePackages: a recipe with a package makes a base holding it
// (debootstrap, once per package list; the tree is cached under
// /var/cache/paddock), and an image on it whose box user runs it, with
// paddock's labels; the same recipe again is the same image, not built.
func TestEnsurePackages(t *testing.T) {
	cli, o, progress := ensureSetup(t)
	ctx := context.Background()
	r := image.Recipe{Packages: []string{"jq"}}
	o.Tag = testTag(t, cli, r)
	id, built, err := image.Ensure(ctx, cli, r, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !built {
		t.Fatalf("%s was there before the test made it", o.Tag)
	}
	spec, _ := r.BaseSpec("")
	if !strings.Contains(progress.String(), "base: "+spec.Tag()) || !strings.Contains(progress.String(), "ok: "+o.Tag+" is ") {
		t.Fatalf("progress:\n%s", progress.String())
	}
	if got := inBox(t, id, "jq", "--version"); !strings.HasPrefix(got, "jq-1.") {
		t.Fatalf("jq --version printed %q", got)
	}
	checkLabels(t, cli, id, r, o.GuestBin)

	again, built, err := image.Ensure(ctx, cli, image.Recipe{Packages: []string{"jq", "jq"}}, o)
	if err != nil || built || again != id {
		t.Fatalf("the same recipe again: %s built=%v %v, want %s not built", again, built, err, id)
	}
	if !strings.Contains(progress.String(), "built earlier from this recipe") {
		t.Fatalf("progress:\n%s", progress.String())
	}
}

// TestEnsureDockerfile: a project's Dockerfile is built on the base, its
// context sent (what .dockerignore lists left out), its RUN steps with no
// network; paddock's layers come after (its user and entrypoint, whatever
// USER the file left). The same recipe again is reused; a changed
// Dockerfile makes another image; a failing step tags nothing.
func TestEnsureDockerfile(t *testing.T) {
	cli, o, progress := ensureSetup(t)
	ctx := context.Background()
	dir := t.TempDir()
	write := func(rel, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const df = `# A project's toolchain.
ARG PADDOCK_BASE
FROM ${PADDOCK_BASE} AS tools
COPY . /opt/project/
RUN test "$(ls /sys/class/net)" = lo && echo built > /opt/project/step && chmod -R a+rX /opt/project
USER nobody
`
	write("Dockerfile", df)
	write("hello.txt", "hello from the context\n")
	write("secret.txt", "left out\n")
	write(".dockerignore", "secret.txt\n")
	r := image.Recipe{Dockerfile: filepath.Join(dir, "Dockerfile")}
	o.Tag = testTag(t, cli, r)
	id, built, err := image.Ensure(ctx, cli, r, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !built {
		t.Fatalf("%s was there before the test made it", o.Tag)
	}
	for _, want := range []string{"project: building " + r.Dockerfile, "network none", "project: Dockerfile built as ", "ok: " + o.Tag + " is "} {
		if !strings.Contains(progress.String(), want) {
			t.Fatalf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	if got := inBox(t, id, "sh", "-c", "cat /opt/project/hello.txt /opt/project/step; id -u; ls /opt/project"); got != "hello from the context\nbuilt\n1000\nDockerfile\nhello.txt\nstep" {
		t.Fatalf("in the image: %q", got)
	}
	checkLabels(t, cli, id, r, o.GuestBin)

	again, built, err := image.Ensure(ctx, cli, r, o)
	if err != nil || built || again != id {
		t.Fatalf("the same recipe again: %s built=%v %v, want %s not built", again, built, err, id)
	}

	// A changed Dockerfile is another recipe: another image.
	write("Dockerfile", df+"RUN true\n")
	r2 := r
	o.Tag = testTag(t, cli, r2)
	changed, built, err := image.Ensure(ctx, cli, r2, o)
	if err != nil || !built || changed == id {
		t.Fatalf("a changed Dockerfile: %s built=%v %v (the first was %s)", changed, built, err, id)
	}

	// A step that fails: a clear error, nothing tagged.
	write("Dockerfile", "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\nRUN echo failing step >&2; false\n")
	o.Tag = testTag(t, cli, r)
	_, _, err = image.Ensure(ctx, cli, r, o)
	if err == nil || !strings.Contains(err.Error(), "the project's Dockerfile "+r.Dockerfile+" failed") ||
		!strings.Contains(err.Error(), "returned a non-zero code: 1") || !strings.Contains(err.Error(), "no image was tagged") {
		t.Fatalf("a failing step: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, o.Tag); !cerrdefs.IsNotFound(err) {
		t.Fatalf("a failed build left %s: %v", o.Tag, err)
	}

	// A label of paddock's, however the file spells it, would reach
	// every box made from the image (boxes inherit labels): refused after
	// the project's stage, nothing tagged.
	write("Dockerfile", "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\nARG K=paddock.unsafe-host-code\nLABEL ${K}=1\n")
	o.Tag = testTag(t, cli, r)
	_, _, err = image.Ensure(ctx, cli, r, o)
	if err == nil || !strings.Contains(err.Error(), "sets the label paddock.unsafe-host-code") || !strings.Contains(err.Error(), "no image was tagged") {
		t.Fatalf("a paddock label: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, o.Tag); !cerrdefs.IsNotFound(err) {
		t.Fatalf("a refused stage left %s: %v", o.Tag, err)
	}

	// A file that breaks the contract is refused before anything runs.
	write("Dockerfile", "FROM debian:bookworm\n")
	if _, _, err := image.Ensure(ctx, cli, r, o); err == nil || !strings.Contains(err.Error(), "the first FROM must be FROM ${PADDOCK_BASE}") {
		t.Fatalf("a floating FROM: %v", err)
	}
}
