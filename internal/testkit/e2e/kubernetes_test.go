package e2e

import (
	"context"
	"fmt"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/k8stest"
)

// The e2e package runs the test cluster for its kubernetes tests; Main
// stops it when the package's tests end.
func TestMain(m *testing.M) {
	if os.Getenv(rawAttachEnv) != "" { // this binary as a helper process (team_test.go)
		os.Exit(rawAttach())
	}
	k8stest.Main(m)
}

// newKubeEnv is newEnv with the Runner's kubernetes backend on the test
// cluster: the box image imported into the cluster's containerd (no
// registry: image_pull_policy Never), a namespace of the test's own, and
// unsafe_unenforced_network_policy, since the test cluster enforces no
// NetworkPolicy (its pods reach nothing by their network alone).
func newKubeEnv(t testing.TB, extra ...string) *env {
	t.Helper()
	c := k8stest.Start(t)
	cli := imagetest.Docker(t)
	imagetest.BoxImage(t, cli)
	cli.Close()
	c.ImportImage(t, imagetest.Tag)
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000_000)
	cs := c.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	e := newEnv(t, append([]string{"[kubernetes]", fmt.Sprintf("kubeconfig = %q", c.Kubeconfig), fmt.Sprintf("namespace = %q", ns),
		fmt.Sprintf("image = %q", imagetest.Tag), `image_pull_policy = "Never"`, "unsafe_unenforced_network_policy = true"}, extra...)...)
	e.kube, e.kubeNS = c, ns
	return e
}

// TestProjectImageOnKubernetes: with kubernetes.project_registry, a clone
// session on a pod of a repository whose project file asks for Debian's
// golang gets the image the Runner built and pushed to that registry (a
// docker-registry on loopback, which the cluster's containerd pulls from
// over plain http), named by digest; the setup and the real Claude Code's
// Bash tool run go test ./... in the pod's clone; the second session is
// made from the same pushed image. Without project_registry the create is
// refused with what to set. (Before TestSessionOnKubernetes, which
// releases the cluster.)
func TestProjectImageOnKubernetes(t *testing.T) {
	testenv.LookPath(t, "debootstrap")
	repo := startRegistry(t) + "/paddock-projects"
	e := newKubeEnv(t, fmt.Sprintf("project_registry = %q", repo))
	ws := projectRepo(t)
	e.pd("project", "allow", ws)
	defer func() { // every tag the push left, and the image when nothing else names it
		if ids, err := exec.Command("docker", "images", "-q", repo).Output(); err == nil {
			for _, id := range strings.Fields(string(ids)) {
				exec.Command("docker", "image", "rm", "-f", id).Run()
			}
		}
	}()
	e.fake.SetSteps([]fakeapi.Step{
		{Name: "Bash", Input: map[string]any{"command": "cd /workspace && go test ./... > /tmp/go-test.out 2>&1; echo exit=$? >> /tmp/go-test.out", "description": "run the tests"}},
	})
	defer e.fake.SetSteps(nil)
	e.pd("run", "-d", "--name", "kproj-one", "--backend", "kubernetes", "--workspace", ws, "--clone")
	defer e.pdRun("rm", "-f", "kproj-one")
	one := e.inspect("kproj-one")
	if one.Project == nil || !strings.HasPrefix(one.Project.Image, repo+"@sha256:") {
		t.Fatalf("the session's image is not the pushed one: %+v", one.Project)
	}
	if one.Project.SetupResult == nil || one.Project.SetupResult.Exit != 0 {
		t.Fatalf("the setup: %+v", one.Project.SetupResult)
	}
	if got := e.pd("exec", "kproj-one", "--", "cat", "/workspace/.setup-go"); !strings.HasPrefix(got, "go version go1.") {
		t.Fatalf("the setup's go version: %q", got)
	}
	e.waitScreen("kproj-one", promptReady, 60*time.Second)
	e.typeLine("kproj-one", fakeapi.StepsKeyword+" run the tests")
	e.waitScreen("kproj-one", fakeapi.StepsDone, 120*time.Second)
	if out := e.pd("exec", "kproj-one", "--", "cat", "/tmp/go-test.out"); !strings.Contains(out, "ok  \texample.org/hello") || !strings.HasSuffix(out, "exit=0\n") {
		t.Fatalf("go test in the pod, from claude's Bash tool: %q", out)
	}
	e.pd("run", "-d", "--name", "kproj-two", "--backend", "kubernetes", "--workspace", ws, "--clone")
	defer e.pdRun("rm", "-f", "kproj-two")
	if two := e.inspect("kproj-two"); two.Project == nil || two.Project.Image != one.Project.Image {
		t.Fatalf("the second session's image: %+v, the first's %s", two.Project, one.Project.Image)
	}
}

// TestPreviewOnKubernetes is TestPreviewInChromium on a pod. (Before
// TestSessionOnKubernetes, which releases the cluster.)
func TestPreviewOnKubernetes(t *testing.T) {
	previewInChromium(t, newKubeEnv(t), "kubernetes", false)
}

// TestSessionOnKubernetes: a session whose box is a pod, as a user drives
// it: the real pinned Claude Code has a turn through the credential proxy
// over the exec channel; the Runner is killed (-9) and restarted and
// re-adopts the pod; the pod is deleted behind paddock's back and the
// session becomes asleep with the reason, its token revoked, and wakes on
// a new pod with its conversation resumed; sleep deletes the pod and keeps
// the claims; rm leaves no labelled object in the cluster. Direct mode is
// refused for this backend.
func TestSessionOnKubernetes(t *testing.T) {
	// Last of the clean-ups: the cluster goes when this test is done, not
	// when the e2e run is (other packages wait for it meanwhile).
	t.Cleanup(func() {
		if err := k8stest.Release(); err != nil {
			t.Error(err)
		}
	})
	e := newKubeEnv(t)
	const name = "kube-1"
	id, token := e.chat(name, "kubernetes")
	if token == "" || token == ownerToken {
		t.Fatalf("the box holds %q, not a session token of its own", token)
	}
	e.waitTranscript(name, "hi from the fake server (turn 1)")
	kinds := func() map[sandbox.ObjectKind]int {
		m := map[sandbox.ObjectKind]int{}
		for _, o := range e.objectsOf(id) {
			m[o.Kind]++
		}
		return m
	}
	running := kinds()
	if running[sandbox.KindProcess] != 1 || running[sandbox.KindVolume] == 0 || running[sandbox.KindBox] != 1 {
		t.Fatalf("a running session has %v: want its pod, its claims and its record", running)
	}

	// The Runner dies and comes back: the pod is adopted, not replaced.
	e.stop(syscall.SIGKILL)
	e.start()
	for deadline := time.Now().Add(30 * time.Second); e.inspect(name).Observed != session.Running; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not re-adopted: %+v", e.inspect(name))
		}
	}
	if out := e.pd("exec", name, "--", "echo", "alive"); out != "alive\n" {
		t.Fatalf("exec after the Runner's restart: %q", out)
	}
	if after := kinds(); after[sandbox.KindProcess] != 1 {
		t.Fatalf("after the restart the session has %v", after)
	}

	// The pod is deleted from outside.
	pods := e.kube.Clientset().CoreV1().Pods(e.kubeNS)
	list, err := pods.List(context.Background(), metav1.ListOptions{LabelSelector: sandbox.LabelSession + "=" + id})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the session's pod: %v %v", list, err)
	}
	if err := pods.Delete(context.Background(), list.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.waitAsleep(name)
	if !strings.Contains(got.Reason, "paddock wake") {
		t.Fatalf("reason %q", got.Reason)
	}
	e.decidedOnce(id)
	if st := proxyStatus(t, e.dir, token); st != 401 {
		t.Fatalf("the deleted pod's token got %d", st)
	}
	e.wakeAndGoOn(name)

	e.pd("sleep", name)
	e.waitAsleep(name)
	asleep := kinds()
	if asleep[sandbox.KindProcess] != 0 || asleep[sandbox.KindVolume] != running[sandbox.KindVolume] {
		t.Fatalf("asleep, the session has %v (running it had %v): want the pod gone and the claims kept", asleep, running)
	}
	e.pd("wake", name)
	e.waitScreen(name, "(turn 2)", 60*time.Second) // resumed on a new pod

	e.pd("rm", "-f", name)
	for deadline := time.Now().Add(60 * time.Second); len(e.objectsOf(id)) != 0; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rm left %+v", e.objectsOf(id))
		}
	}
	out, code := e.pdCode("run", "-d", "--name", "kube-direct", "--backend", "kubernetes", "--credential-mode", "direct")
	if code == 0 || !strings.Contains(out, "proxy-mode sessions only") {
		t.Fatalf("direct mode on kubernetes: exit %d: %s", code, out)
	}

	// A clone session on a pod: no host directory reaches a pod, so its
	// history is streamed from the owner's repository into its volume;
	// a commit by exec, its diff, and its merge into the owner's branch.
	t.Run("clone", func(t *testing.T) {
		e.t = t
		person := gitPerson(t)
		ws := ownedRepo(t)
		before := treeState(t, ws)
		const name = "kube-clone"
		e.pdAs(person, "run", "-d", "--name", name, "--backend", "kubernetes", "--workspace", ws, "--clone")
		defer e.pdRun("rm", "-f", name)
		e.waitScreen(name, promptReady, 90*time.Second)
		if got := e.pd("exec", name, "--", "sh", "-c", "cd /workspace && git log --format=%s && cat main.txt && git rev-parse --abbrev-ref HEAD && git status --porcelain"); got != "init\nhello world\npaddock/"+name+"\n" {
			t.Fatalf("the pod's clone: %q", got)
		}
		e.pd("exec", name, "--", "sh", "-c", "cd /workspace && echo 'hello pod' > main.txt && git commit -qam 'edit in the pod'")
		if d := changed(before, treeState(t, ws)); len(d) > 0 {
			t.Fatalf("the host repository changed before any fetch: %q", d)
		}
		if got := e.pd("diff", name); !strings.Contains(got, "-hello world") || !strings.Contains(got, "+hello pod") {
			t.Fatalf("diff: %q", got)
		}
		if out, _ := e.pdAs(person, "merge", name); !strings.Contains(out, "fast-forward") {
			t.Fatalf("merge: %q", out)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "main.txt")); string(b) != "hello pod\n" {
			t.Fatalf("main.txt after the merge: %q", b)
		}
		allOwners(t, ws)
	})
}

// bareKube is the bare backend start on the test cluster: a pod of the box
// image running /bin/true (nothing of paddock), from create to Succeeded.
func bareKube(b testing.TB, e *env) time.Duration {
	return sandboxtest.BareKube(b, e.kube.Clientset(), e.kubeNS, imagetest.Tag)
}
