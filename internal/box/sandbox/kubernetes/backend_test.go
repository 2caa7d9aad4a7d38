package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// fakeBackend is a Backend on client-go's fake clientset, whose pods run
// as soon as they are made (kubelet): the bookkeeping of the lifecycle,
// without a cluster. The conformance test runs the real thing.
func fakeBackend(t *testing.T, c Config) (*Backend, *fake.Clientset) {
	t.Helper()
	b := testBackend(t, c)
	cs := fake.NewClientset()
	b.cs = cs
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { // the kubelet
		for ctx.Err() == nil {
			pods, _ := cs.CoreV1().Pods(b.cfg.Namespace).List(ctx, metav1.ListOptions{})
			for _, p := range pods.Items {
				if p.Status.Phase == "" {
					p.Status.Phase = corev1.PodRunning
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
					cs.CoreV1().Pods(b.cfg.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return b, cs
}

// fakeRunning is a fakeBackend (namespace ns, owner o1) with session s1's
// box started.
func fakeRunning(t *testing.T) (*Backend, *fake.Clientset, sandbox.Box) {
	t.Helper()
	ctx := context.Background()
	b, cs := fakeBackend(t, Config{Namespace: "ns", Owner: "o1", Image: "img", UnsafeUnenforcedNetworkPolicy: true})
	bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if bx, err = b.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	return b, cs, bx
}

func kinds(t *testing.T, b *Backend, session string) map[sandbox.ObjectKind]int {
	t.Helper()
	objs, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[sandbox.ObjectKind]int{}
	for _, o := range objs {
		if o.Session == session {
			out[o.Kind]++
		}
	}
	return out
}

func TestLifecycleBookkeeping(t *testing.T) {
	ctx := context.Background()
	b, _ := fakeBackend(t, Config{Namespace: "ns", Owner: "o1", Image: "img", UnsafeUnenforcedNetworkPolicy: true})
	other, _ := fakeBackend(t, Config{Namespace: "ns", Owner: "o2", Image: "img"})
	other.cs = b.cs
	bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "s1"})
	if err != nil || bx.State != sandbox.StateCreated || bx.ID != "paddock-s1" || bx.Limits != sandbox.DefaultLimits {
		t.Fatalf("create: %+v %v", bx, err)
	}
	if _, err := b.Create(ctx, sandbox.CreateOptions{Session: "s1"}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := b.Create(ctx, sandbox.CreateOptions{Session: "s2", Workspace: "/src"}); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a host workspace: %v", err)
	}
	if k := kinds(t, b, "s1"); k[sandbox.KindBox] != 1 || k[sandbox.KindVolume] != 2 || k[sandbox.KindProcess] != 0 {
		t.Fatalf("after create: %v", k)
	}
	if _, err := other.Inspect(ctx, bx.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another owner sees the box: %v", err)
	}
	if objs, _ := other.List(ctx); len(objs) != 0 {
		t.Fatalf("another owner lists %+v", objs)
	}
	if got, err := b.Start(ctx, bx.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("start: %+v %v", got, err)
	}
	if got, err := b.Start(ctx, bx.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("second start: %+v %v", got, err)
	}
	if k := kinds(t, b, "s1"); k[sandbox.KindProcess] != 1 {
		t.Fatalf("after start: %v", k)
	}
	if err := b.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateStopped {
		t.Fatalf("after stop: %+v %v", got, err)
	}
	if err := b.Stop(ctx, bx.ID, sandbox.StopOptions{}); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := b.Connect(ctx, bx.ID); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("connect to a stopped box: %v", err)
	}
	if err := b.Remove(ctx, bx.ID, sandbox.RemoveOptions{KeepVolume: true}); err != nil {
		t.Fatal(err)
	}
	if k := kinds(t, b, "s1"); k[sandbox.KindBox] != 0 || k[sandbox.KindVolume] != 2 {
		t.Fatalf("after remove keeping the volume: %v", k)
	}
	// A new box of the session takes its kept claims; another owner's
	// session of the same name does not.
	if _, err := other.Create(ctx, sandbox.CreateOptions{Session: "s1"}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("another owner took the kept claims: %v", err)
	}
	if k := kinds(t, b, "s1"); k[sandbox.KindBox] != 0 {
		t.Fatalf("a refused create left its record: %v", k)
	}
	bx, err = b.Create(ctx, sandbox.CreateOptions{Session: "s1", Limits: sandbox.Limits{MemoryBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Inspect(ctx, bx.ID); got.Limits.MemoryBytes != 1<<30 {
		t.Fatalf("limits after a restart: %+v", got.Limits)
	}
	// prune's way.
	objs, _ := b.List(ctx)
	for _, o := range objs {
		if err := b.RemoveObject(ctx, o); err != nil {
			t.Fatalf("remove %+v: %v", o, err)
		}
	}
	if k := kinds(t, b, "s1"); len(k) != 0 {
		t.Fatalf("left after prune: %v", k)
	}
	if err := b.Remove(ctx, bx.ID, sandbox.RemoveOptions{}); err != nil {
		t.Fatalf("remove a removed box: %v", err)
	}
}

// TestEndedPodIsStopped: a pod evicted or whose guest ended shows as a
// stopped box, and Start makes a new one on the same claims.
func TestEndedPodIsStopped(t *testing.T) {
	ctx := context.Background()
	b, cs, bx := fakeRunning(t)
	p, _ := cs.CoreV1().Pods("ns").Get(ctx, "paddock-s1", metav1.GetOptions{})
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}
	cs.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if got, err := b.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateStopped {
		t.Fatalf("an evicted box: %+v %v", got, err)
	}
	if got, err := b.Start(ctx, bx.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("wake after an eviction: %+v %v", got, err)
	}
	cs.CoreV1().Pods("ns").Delete(ctx, "paddock-s1", metav1.DeleteOptions{})
	if got, err := b.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateStopped {
		t.Fatalf("a box whose pod was deleted from outside: %+v %v", got, err)
	}
}

func TestPodTrouble(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "msg"}}}}}}
	}
	for _, c := range []struct {
		name  string
		pod   *corev1.Pod
		want  string
		fatal bool
	}{
		{"no pod", nil, "does not exist", false},
		{"creating", waiting("ContainerCreating"), "", false},
		{"image never pulled", waiting("ErrImageNeverPull"), "must have the box image", true},
		{"image pull backoff", waiting("ImagePullBackOff"), "ImagePullBackOff: msg", false},
		{"config error", waiting("CreateContainerConfigError"), "CreateContainerConfigError", true},
		{"unschedulable", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}}}, "Insufficient memory", false},
		{"evicted", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, "Evicted", true},
		{"guest ended", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}}}, "exit code 2", true},
		{"deleting", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}, "being deleted", true},
	} {
		got, fatal := podTrouble(c.pod)
		if fatal != c.fatal || !strings.Contains(got, c.want) || c.want == "" && got != "" {
			t.Errorf("%s: %q %v, want %q %v", c.name, got, fatal, c.want, c.fatal)
		}
	}
}

func TestPolicyDecision(t *testing.T) {
	for _, c := range []struct {
		allowed, denied bool
		ok              bool
		says            string
	}{
		{true, false, true, ""},
		{true, true, false, "does not enforce"},
		{false, true, false, "does not enforce"},
		{false, false, false, "cannot be told"},
	} {
		err := policyDecision(c.allowed, c.denied)
		if c.ok != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "unsafe_unenforced_network_policy") || !errdefs.Is(err, errdefs.ErrForbidden)) {
			t.Errorf("allowed %v denied %v: %v", c.allowed, c.denied, err)
		}
	}
}

// TestRuntimeClass: a box asked for gVisor gets the cluster's class of
// that family as its pod's runtimeClassName; a class the cluster lacks is
// refused before anything is made, with the RuntimeClass to add.
func TestRuntimeClass(t *testing.T) {
	ctx := context.Background()
	b, cs := fakeBackend(t, Config{Namespace: "ns", Owner: "o1", Image: "img", UnsafeUnenforcedNetworkPolicy: true})
	if _, err := b.Create(ctx, sandbox.CreateOptions{Session: "s1", Runtime: "gvisor"}); !errdefs.Is(err, errdefs.ErrInvalid) ||
		!strings.Contains(err.Error(), `"kind":"RuntimeClass"`) || !strings.Contains(err.Error(), `"handler":"runsc"`) {
		t.Fatalf("a class the cluster lacks: %v", err)
	}
	if k := kinds(t, b, "s1"); len(k) != 0 {
		t.Fatalf("a refused box left %v", k)
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "s1", Runtime: "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Start(ctx, bx.ID); err != nil {
		t.Fatal(err)
	}
	pods, _ := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Spec.RuntimeClassName == nil || *pods.Items[0].Spec.RuntimeClassName != "gvisor" {
		t.Fatalf("pods: %+v", pods.Items)
	}
	if got, _ := b.Inspect(ctx, bx.ID); got.Runtime != "gvisor" {
		t.Fatalf("inspect reports runtime %q", got.Runtime)
	}
}
