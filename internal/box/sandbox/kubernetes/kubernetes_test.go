package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/k8stest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

func TestMain(m *testing.M) { k8stest.Main(m) }

// cluster is a namespace of the test cluster, with the box image imported,
// and a client configuration that holds nothing but the shipped Role in it
// (the admin impersonating a user bound to it).
func cluster(t *testing.T) (*k8stest.Cluster, string, *rest.Config) {
	t.Helper()
	c := k8stest.Start(t)
	cli := imagetest.Docker(t)
	imagetest.BoxImage(t, cli)
	c.ImportImage(t, imagetest.Tag)
	ctx := context.Background()
	admin := c.Clientset()
	ns := fmt.Sprintf("paddock-test-%d", time.Now().UnixNano()%1e9)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	role := shippedRole(t)
	role.Namespace = ns
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "paddock-runner"
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "paddock-runner", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := c.RESTConfig()
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	// The API server's authorizer learns of a new binding from its cache,
	// a moment later: wait until the binding holds, so that no test meets
	// a "forbidden" the Role would not give (seen in CI, under load).
	as, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := as.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shipped Role's binding never took effect: %v", err)
		}
	}
	return c, ns, rc
}

func testConfig(c *k8stest.Cluster, ns, owner string) Config {
	return Config{Namespace: ns, Owner: owner, Image: imagetest.Tag, ImagePullPolicy: corev1.PullNever, StorageClass: c.StorageClass,
		HomeSize: 1 << 30, WorkspaceSize: 1 << 30, StartTimeout: 90 * time.Second,
		// The test cluster's pods reach nothing, not even each other, but
		// it runs no policy engine: enforcement cannot be shown there.
		UnsafeUnenforcedNetworkPolicy: true}
}

func TestConformance(t *testing.T) {
	c, ns, rc := cluster(t)
	cfg := testConfig(c, ns, testenv.UniqueOwner(t))
	open := func(t *testing.T) sandbox.Backend {
		b, err := NewFromREST(context.Background(), cfg, rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sandboxtest.Run(t, sandboxtest.Setup{
		Backend:      open(t),
		Reopen:       open,
		ReadOnlyRoot: true,
		PodNetwork:   true,
		// No Workspace: a pod cannot mount a directory of the Runner's host.
	})
}

// TestUnenforcedPolicyRefused: on a cluster that does not show that it
// enforces NetworkPolicy (the test cluster), a box does not start unless
// the owner accepts it, and the refusal says why and what to do.
func TestUnenforcedPolicyRefused(t *testing.T) {
	c, ns, rc := cluster(t)
	cfg := testConfig(c, ns, testenv.UniqueOwner(t))
	cfg.UnsafeUnenforcedNetworkPolicy = false
	ctx := context.Background()
	b, err := NewFromREST(ctx, cfg, rc)
	if err != nil {
		t.Fatal(err)
	}
	bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "unenforced"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	_, err = b.Start(ctx, bx.ID)
	if !errdefs.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "NetworkPolicy") || !strings.Contains(err.Error(), "unsafe_unenforced_network_policy") {
		t.Fatalf("a cluster without a policy engine: %v", err)
	}
	t.Logf("refused: %v", err)
	objs, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind == sandbox.KindProcess || o.Kind == sandbox.KindNetwork {
			t.Errorf("left by the refusal: %+v", o)
		}
	}
	if got, err := b.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateCreated {
		t.Fatalf("after the refusal: %+v %v", got, err)
	}
}

// TestMissingImageNamed: a box of an image the node lacks fails to start at
// once, saying so, and leaves no pod.
func TestMissingImageNamed(t *testing.T) {
	c, ns, rc := cluster(t)
	cfg := testConfig(c, ns, testenv.UniqueOwner(t))
	ctx := context.Background()
	b, err := NewFromREST(ctx, cfg, rc)
	if err != nil {
		t.Fatal(err)
	}
	bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "noimage", Image: "paddock-test/no-such-image:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	t0 := time.Now()
	_, err = b.Start(ctx, bx.ID)
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") || !strings.Contains(err.Error(), "box image") {
		t.Fatalf("a missing image: %v", err)
	}
	if d := time.Since(t0); d > 60*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	if got, _ := b.Inspect(ctx, bx.ID); got.State == sandbox.StateRunning {
		t.Fatal("running without its image")
	}
}
