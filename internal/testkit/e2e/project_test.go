package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestProjectImage: a workspace's project file asks for Debian's golang
// and a setup command. paddock run refuses it until its owner allows it,
// with the file shown; then the docker backend builds the project's image
// (the base with golang, debootstrapped once and cached), the setup runs
// in the box with the toolchain, and the real Claude Code's Bash tool,
// driven by the fake upstream, runs go test ./... of the workspace's Go
// module. A second session of the same repository is made from the same
// image, by id, without a build; a changed project file is refused again,
// with its diff.
func TestProjectImage(t *testing.T) {
	testenv.LookPath(t, "debootstrap")
	e := newEnv(t)
	ws := projectRepo(t)
	var image string
	defer func() { // after the sessions' boxes are gone
		if image != "" {
			exec.Command("docker", "image", "rm", "-f", image).Run()
		}
	}()

	// Not allowed yet: refused, the file shown, nothing made.
	_, errs, code := e.pdRun("run", "-d", "--name", "proj-one", "--backend", "docker", "--workspace", ws)
	if code == 0 || !strings.Contains(errs, "is new") || !strings.Contains(errs, "+packages = [\"golang\"]") || !strings.Contains(errs, "paddock project allow "+ws) {
		t.Fatalf("a project file not allowed: exit %d\n%s", code, errs)
	}
	if out := e.pd("ls", "-q"); strings.Contains(out, "proj-one") {
		t.Fatalf("a refused create left a session: %q", out)
	}
	e.pd("project", "allow", ws)

	e.fake.SetSteps([]fakeapi.Step{
		{Name: "Bash", Input: map[string]any{"command": "cd /workspace && go test ./... > go-test.out 2>&1; echo exit=$? >> go-test.out", "description": "run the tests"}},
	})
	defer e.fake.SetSteps(nil)
	_, errs, code = e.pdRun("run", "-d", "--name", "proj-one", "--backend", "docker", "--workspace", ws)
	if code != 0 {
		t.Fatalf("run with the allowed project file: exit %d\n%s", code, errs)
	}
	defer e.pdRun("rm", "-f", "proj-one")
	if !strings.Contains(errs, "asks for an image with the packages golang") {
		t.Errorf("run did not say an image may be built first:\n%s", errs)
	}
	one := e.inspect("proj-one")
	if one.Project == nil || !strings.HasPrefix(one.Project.Image, "sha256:") {
		t.Fatalf("the session's record names no project image: %+v", one.Project)
	}
	image = one.Project.Image
	if one.Project.SetupResult == nil || one.Project.SetupResult.Exit != 0 {
		t.Fatalf("the setup: %+v", one.Project.SetupResult)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".setup-go")); err != nil || !strings.HasPrefix(string(b), "go version go1.") {
		t.Fatalf("the setup's go version: %q %v", b, err)
	}
	e.waitScreen("proj-one", promptReady, 30*time.Second)
	e.typeLine("proj-one", fakeapi.StepsKeyword+" run the tests")
	e.waitScreen("proj-one", fakeapi.StepsDone, 120*time.Second)
	out, err := os.ReadFile(filepath.Join(ws, "go-test.out"))
	if err != nil || !strings.Contains(string(out), "ok  \texample.org/hello") || !strings.HasSuffix(string(out), "exit=0\n") {
		t.Fatalf("go test in the box, from claude's Bash tool: %q %v", out, err)
	}

	// The same repository's second session: the same image, not built.
	e.pd("run", "-d", "--name", "proj-two", "--backend", "docker", "--workspace", ws)
	defer e.pdRun("rm", "-f", "proj-two")
	if two := e.inspect("proj-two"); two.Project == nil || two.Project.Image != one.Project.Image {
		t.Fatalf("the second session's image: %+v, the first's %s", two.Project, one.Project.Image)
	}
	if got := strings.TrimSpace(e.pd("exec", "proj-two", "--", "go", "version")); !strings.HasPrefix(got, "go version go1.") {
		t.Fatalf("go in the second box: %q", got)
	}

	// The box edits the project file: the next session is refused, with
	// the diff, until it is allowed again.
	if err := os.WriteFile(filepath.Join(ws, ".paddock.toml"), []byte("effort = \"high\"\n"+projectFile), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = e.pdRun("run", "-d", "--name", "proj-three", "--backend", "docker", "--workspace", ws)
	if code == 0 || !strings.Contains(errs, "changed since you allowed it") || !strings.Contains(errs, "+effort = \"high\"") {
		t.Fatalf("a changed project file: exit %d\n%s", code, errs)
	}
}

// projectFile asks for Debian's golang and a setup command that uses it.
const projectFile = "[image]\npackages = [\"golang\"]\n\n[setup]\ncommand = \"go version > .setup-go\"\n"

// projectRepo is a git repository of a user's, committed: a small Go
// module with a test, and projectFile.
func projectRepo(t *testing.T) string {
	t.Helper()
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	files := map[string]string{
		"go.mod":        "module example.org/hello\n\ngo 1.19\n",
		"hello.go":      "package hello\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n",
		"hello_test.go": "package hello\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != \"hello\" {\n\t\tt.Fatal(Hello())\n\t}\n}\n",
		".paddock.toml": projectFile,
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAsOwner(t, ws)
	return ws
}
