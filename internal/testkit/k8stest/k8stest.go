// Package k8stest gives tests a real, throw-away, single-node Kubernetes
// cluster: kube-apiserver, kube-controller-manager, kube-scheduler and
// kubelet (Version, built by scripts/k8s-bins.sh into BinDir), on Debian's
// etcd and a containerd of its own, every port on 127.0.0.1.
//
// A package that calls Start must run its tests through Main:
//
//	func TestMain(m *testing.M) { k8stest.Main(m) }
//
// The cluster is started by the first Start of the test process, shared by
// every test in it, and stopped by Main when the tests end. Only one
// cluster runs on a host at a time (the kubelet's cgroups and node name,
// the containerd shim directory): Start takes a host-wide lock (LockFile)
// for the cluster's whole life, so test packages that run in parallel wait
// for each other instead of colliding. Without root, or with a part
// missing, Start skips (testenv.Missing: it fails under
// PADDOCK_REQUIRE_INTEGRATION).
//
// What a run changes on the host, and how Stop undoes it (see also
// docs/BACKENDS.md, "The Kubernetes test cluster"):
//   - everything lives in one directory, <TMPDIR>/paddock-k8stest-<id>
//     (certificates, etcd's data, containerd's root and state, the
//     kubelet's root, pod logs, volumes, component logs);
//   - every process (components, containerd's shims, the pods) is in one
//     cgroup subtree, /paddock-k8stest-<id>, in every hierarchy; the
//     kubelet's cgroupRoot is that subtree. Stop kills what is in it and
//     removes it;
//   - containerd and the kubelet run in a mount namespace of their own, in
//     which tmpfs hide the host paths they write whatever their flags say
//     (/var/lib/kubelet, /var/log/pods, /var/log/containers, /var/lib/cni,
//     /run/containerd, /var/run/netns) and the kernel settings the kubelet
//     would change (vm.overcommit_memory, kernel.panic, …) read back the
//     values it wants. Every mount they make (the pods' root filesystems,
//     volumes, network namespaces) goes with that namespace when its last
//     process dies;
//   - pods get a network namespace of their own with one macvlan interface
//     in private mode on a veth pair made for the run, and no route: they
//     reach nothing, not even each other (so NetworkPolicy, which this
//     cluster does not enforce, is never what stops them);
//   - a process holding the mount namespace kills the whole cgroup subtree
//     if the test process dies without stopping the cluster; a later Start
//     removes whatever else such a run left (sweepStale).
package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// Version of the Kubernetes components; scripts/k8s-bins.sh reads it here.
const Version = "v1.34.4"

// BinDir holds the components scripts/k8s-bins.sh builds.
const BinDir = "/var/cache/paddock/k8s/" + Version + "/bin"

// LockFile is the host-wide lock one running cluster holds.
const LockFile = "/run/paddock-k8stest.lock"

// NodeName is the one node's name: the API server reaches the kubelet by it
// (--kubelet-preferred-address-types=Hostname), so it must resolve to
// 127.0.0.1.
const NodeName = "localhost"

// StorageClassName is the cluster's default StorageClass (Cluster.StorageClass).
const StorageClassName = "paddock-test"

// Cluster is a running test cluster. Its methods are safe for concurrent use.
type Cluster struct {
	// Kubeconfig is the path of an admin (system:masters) kubeconfig file.
	Kubeconfig string
	// Node is the node's name (NodeName). Its kubelet bounds each pod's
	// processes to sandbox.DefaultLimits.Pids (podPidsLimit: Kubernetes has
	// no pids limit per pod).
	Node string
	// StorageClass is the default StorageClass. A claim of it is bound
	// within a second or so to a new hostPath volume of the size it asks
	// (capacity is not enforced); deleting the claim deletes the volume
	// and its files (see provisioner).
	StorageClass string

	// Started is how long Start took, from nothing to the node Ready and
	// schedulable.
	Started time.Duration

	rc *rest.Config
	cs kubernetes.Interface
	in *instance // processes, cgroups, links, directories
}

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.rc) }

// Clientset returns an admin client.
func (c *Cluster) Clientset() kubernetes.Interface { return c.cs }

// shared is the test process's one cluster; Start makes it, Main stops it.
var shared struct {
	mu   sync.Mutex
	main bool // Main is running the tests
	c    *Cluster
	err  error // the start failed; later Starts fail with it too
}

// Start returns the test process's cluster, starting it on first use
// (about 10 s; the first call may also wait for another package's cluster
// to stop, see LockFile). It skips without root or components, and fails
// the test if the cluster does not come up; component log tails are
// printed when the test fails.
func Start(t testing.TB) *Cluster {
	t.Helper()
	requireHost(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("k8stest.Start: the package's TestMain must call k8stest.Main, which stops the cluster when the tests end")
	}
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = startRetrying(context.Background(), t.Logf)
		if shared.err == nil {
			t.Logf("k8stest: cluster up in %v (dir %s)", shared.c.Started.Round(time.Millisecond), shared.c.in.dir)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	c := shared.c
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.in.tails(40))
		}
	})
	return c
}

// Main runs a package's tests, then stops the cluster if one was started,
// and exits. A failed stop fails the run.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "k8stest:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Release stops the process's cluster now, if one runs, and frees the host
// for other test packages (LockFile); a later Start makes a new one. A
// package whose Kubernetes tests are a short part of a long run calls it
// when they end, so that other packages do not wait for the whole run.
func Release() error { return stopShared() }

// stopShared stops the process's cluster, if any; the next Start makes a
// new one.
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	c := shared.c
	shared.c, shared.err = nil, nil
	if c == nil {
		return nil
	}
	return errors.Join(c.in.stop(), c.in.unlock())
}

// requireHost skips (or fails, testenv.Missing) a test that cannot run a
// cluster here: -short, no root, a part missing.
func requireHost(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	testenv.Root(t)
	if why := missing(); why != "" {
		testenv.Missing(t, why)
	}
}

// tools are the host programs the cluster runs besides BinDir's.
var tools = []string{"etcd", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip", "go"}

// cniDir holds Debian's CNI plugins (containernetworking-plugins).
const cniDir = "/usr/lib/cni"

// missing says what the cluster lacks on this host, or "".
func missing() string {
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(BinDir, b)); err != nil {
			return fmt.Sprintf("%s is not built in %s; run scripts/k8s-bins.sh (make deps)", b, BinDir)
		}
	}
	for _, p := range tools {
		if _, err := exec.LookPath(p); err != nil {
			return p + " is not installed; run scripts/deps.sh (make deps)"
		}
	}
	for _, p := range []string{"macvlan", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniDir, p)); err != nil {
			return "the CNI plugin " + p + " is not in " + cniDir + "; run scripts/deps.sh (containernetworking-plugins)"
		}
	}
	return ""
}

// startRetrying is start, again on new ports (twice at most) when a port
// picked free was taken by another process before a component bound it
// (test packages run side by side; the failed component's log, in the
// error, says so). A failed start has undone everything.
func startRetrying(ctx context.Context, logf func(string, ...any)) (*Cluster, error) {
	c, err := start(ctx, logf)
	for i := 0; i < 2 && err != nil && strings.Contains(err.Error(), "address already in use"); i++ {
		logf("k8stest: a port was taken before the cluster bound it; starting again on new ports")
		c, err = start(ctx, logf)
	}
	return c, err
}
