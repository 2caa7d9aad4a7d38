package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) != "" {
		orphan()
		return
	}
	Main(m)
}

// orphanEnv makes the test binary start a cluster, say where it is, and
// wait to be killed (TestKilledRunIsCleanedUp).
const orphanEnv = "PADDOCK_K8STEST_ORPHAN"

func orphan() {
	c, err := startRetrying(context.Background(), func(string, ...any) {})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // the whole of it, component logs too
		fmt.Println("error:", strings.ReplaceAll(err.Error(), "\n", " | "))
		os.Exit(1)
	}
	fmt.Printf("%s %s %s %s\n", c.in.dir, c.in.cgroup, c.in.link, c.in.mntNS)
	select {}
}

// TestCluster runs a box-like pod on the cluster: the box image, the box's
// hardened security context, a deny-all NetworkPolicy, a claim of the
// test class; exec through the API server; no way out of the pod; the
// claim's files outliving the pod; a deleted claim's volume freed.
func TestCluster(t *testing.T) {
	c := Start(t)
	t.Logf("cluster start, to node Ready: %v", c.Started.Round(time.Millisecond))
	img := imagetest.BoxImage(t, imagetest.Docker(t))
	t0 := time.Now()
	c.ImportImage(t, imagetest.Tag)
	t.Logf("box image %s imported in %v", img, time.Since(t0).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := c.Clientset()
	ns := newNamespace(ctx, t, cs)
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newClaim(ctx, t, cs, ns, "home", "1Gi", c.StorageClass)

	t0 = time.Now()
	runPod(ctx, t, cs, boxPod(ns, "box-1", imagetest.Tag, "home"))
	t.Logf("pod create → Running: %v", time.Since(t0).Round(time.Millisecond))

	if got := podPidsMax(t, c, ns, "box-1"); got != strconv.FormatInt(sandbox.DefaultLimits.Pids, 10) {
		t.Errorf("the pod's pids.max is %q, want the node's podPidsLimit %d", got, sandbox.DefaultLimits.Pids)
	}
	out, _ := execIn(ctx, t, c, ns, "box-1", nil, "id", "-u")
	if out != "1000\n" {
		t.Errorf("id -u in the pod = %q, want 1000", out)
	}
	t0 = time.Now()
	in := strings.Repeat("paddock round trip\n", 1000)
	if out, _ := execIn(ctx, t, c, ns, "box-1", strings.NewReader(in), "cat"); out != in {
		t.Errorf("stdin round trip through exec: %d bytes back of %d", len(out), len(in))
	}
	t.Logf("exec round trip (cat of %d bytes): %v", len(in), time.Since(t0).Round(time.Millisecond))

	// Nothing reachable: the API server (on the host's loopback, by the
	// node's address, by the kubernetes Service) nor anything outside.
	// The probe refuses to dial at all if the pod has a default route,
	// so a broken network sends nothing out.
	node, err := cs.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiPort := c.RESTConfig().Host[strings.LastIndex(c.RESTConfig().Host, ":")+1:]
	targets := []string{"127.0.0.1/" + apiPort, serviceIP + "/443", "1.1.1.1/443"}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			targets = append(targets, a.Address+"/"+apiPort)
		}
	}
	out, _ = execIn(ctx, t, c, ns, "box-1", nil, "bash", "-c", probeScript, "probe", strings.Join(targets, " "))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "unreachable ") {
			t.Errorf("from the pod: %s", l)
		}
	}
	t.Logf("from the pod:\n%s", out)
	t.Logf("memory (RSS) with one pod running: %s", memory(c))

	// The claim outlives its pod (sleep and wake).
	execIn(ctx, t, c, ns, "box-1", nil, "sh", "-c", "echo kept > /data/f")
	deletePod(ctx, t, cs, ns, "box-1")
	runPod(ctx, t, cs, boxPod(ns, "box-2", imagetest.Tag, "home"))
	if out, _ := execIn(ctx, t, c, ns, "box-2", nil, "cat", "/data/f"); out != "kept\n" {
		t.Errorf("a file written on the claim by the first pod reads %q in the second", out)
	}
	deletePod(ctx, t, cs, ns, "box-2")

	// Deleting the claim frees its volume and its files.
	got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "volume "+pv.Name+" deleted", func() bool {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Errorf("volume %s deleted, its directory %s still there (%v)", pv.Name, pv.Spec.HostPath.Path, err)
	}
}

// probeScript ($1: "host/port ..." targets) prints one line per target,
// "unreachable …" or "REACHED …", after checking there is no default
// route (if there is one it dials nothing).
const probeScript = `
while read -r _ dest _; do
  if [ "$dest" = 00000000 ]; then echo "DEFAULT ROUTE in /proc/net/route; not dialling"; exit 0; fi
done < /proc/net/route
for t in $1; do
  if timeout 3 bash -c "exec 3<>/dev/tcp/$t" 2>/dev/null; then echo "REACHED $t"; else echo "unreachable $t"; fi
done
`

// TestStopLeavesNothing starts a cluster of its own, runs a pod with a
// claim (so there are shims, mounts, a network namespace, pod cgroups),
// stops it, and looks for anything left: a process, a mount, a cgroup, a
// link, a file, a host directory, an iptables chain, a changed tunable.
func TestStopLeavesNothing(t *testing.T) {
	ownCluster(t)
	// The host as it is with no cluster: under the lock, stale runs swept.
	lock, err := lockHost(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	hs, err := hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	if err := sweepStale(hs); err != nil {
		t.Fatal(err)
	}
	before := hostState(t)
	c, err := startLocked(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	in := c.in
	stopped := false
	defer func() {
		if !stopped {
			t.Log(in.tails(40))
			_ = in.stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Clientset()
	ns := newNamespace(ctx, t, cs)
	newClaim(ctx, t, cs, ns, "v", "1Mi", "") // of the default class
	pod := boxPod(ns, "p", pauseImage, "v")
	pod.Spec.Containers[0].Command = nil // the pause program is its entrypoint
	runPod(ctx, t, cs, pod)
	during := cgroupPids(in.hs, in.cgroup)
	t.Logf("%d processes in the run's cgroups with a pod running", len(during))

	stopped = true
	t0 := time.Now()
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stop: %v", time.Since(t0).Round(time.Millisecond))

	for _, pid := range during {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cmd, []byte(in.dir)) || bytes.Contains(cmd, []byte(in.id)) {
				t.Errorf("process %d left: %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			}
		}
	}
	noneInNamespace(t, in.mntNS)
	ms, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.HasPrefix(m.point, in.dir) || m.fstype == "tmpfs" && strings.Contains(m.super, "paddock-k8stest") {
			t.Errorf("mount left: %s (%s)", m.point, m.fstype)
		}
	}
	noneLeft(t, in.hs, in.cgroup, in.link, in.dir)
	after := hostState(t)
	if after != before {
		t.Errorf("the host differs after the run:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestKilledRunIsCleanedUp kills a test process whose cluster runs: the
// holder then kills every process of the run (so its mounts go too), and
// the next run's sweep removes the rest.
func TestKilledRunIsCleanedUp(t *testing.T) {
	ownCluster(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 4 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the orphan said %q", line)
	}
	dir, cgroup, link, mntNS := f[0], f[1], f[2], f[3]
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	hs, err := hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for len(cgroupPids(hs, cgroup)) > 0 && time.Since(t0) < 20*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := cgroupPids(hs, cgroup); len(pids) > 0 {
		t.Errorf("processes %v of the killed run still live after %v", pids, time.Since(t0))
	} else {
		t.Logf("the holder killed the run's processes within %v", time.Since(t0).Round(time.Millisecond))
	}
	noneInNamespace(t, mntNS)

	lock, err := lockHost(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := sweepStale(hs); err != nil {
		t.Fatal(err)
	}
	noneLeft(t, hs, cgroup, link, dir)
}

// ownCluster readies a test that runs a cluster of its own: one cluster
// per host, so the shared one, if another test started it, goes first
// (the next Start makes a new one).
func ownCluster(t *testing.T) {
	t.Helper()
	requireHost(t)
	if err := stopShared(); err != nil {
		t.Fatal(err)
	}
}

// noneInNamespace fails the test for every process in mount namespace ns.
//
// A namespace's number is free again once the namespace is gone, and the
// other test packages running beside this one make new ones all the time
// (bwrap boxes): a process that started after the check began is not the
// run's, whatever its namespace's number. One that is still ending is
// given three seconds.
func noneInNamespace(t *testing.T, ns string) {
	t.Helper()
	checked := uptimeTicks(t)
	left := func() []string {
		var out []string
		procs, _ := filepath.Glob("/proc/[0-9]*/ns/mnt")
		for _, p := range procs {
			dir := filepath.Dir(filepath.Dir(p))
			if got, _ := os.Readlink(p); got != ns {
				continue
			}
			pid, _ := strconv.Atoi(filepath.Base(dir))
			if start, ok := sandbox.ProcStartTime(pid); ok && start <= checked {
				out = append(out, dir)
			}
		}
		return out
	}
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l := left()
		if len(l) == 0 {
			return
		}
		if time.Now().After(end) {
			for _, d := range l {
				t.Errorf("%s is still in the run's mount namespace", d)
			}
			return
		}
	}
}

// uptimeTicks is the time since boot in clock ticks (USER_HZ, 100 on
// Linux), the unit of a process's start time in /proc/PID/stat.
func uptimeTicks(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(secs*100) + 1
}

// noneLeft fails the test for each of a run's cgroups, its link and its
// directory that is still there.
func noneLeft(t *testing.T, hs []hierarchy, cgroup, link, dir string) {
	t.Helper()
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h.mount, cgroup)); err == nil {
			t.Errorf("cgroup left: %s", filepath.Join(h.mount, cgroup))
		}
	}
	if linkExists(link) {
		t.Errorf("link left: %s", link)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("directory left: %s", dir)
	}
}

// memory reports each component's resident memory, and the sum over
// every process of the run (shims and pods included).
func memory(c *Cluster) string {
	rss := func(pid int) int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.Fields(v)[0])
				return kb >> 10
			}
		}
		return 0
	}
	var parts []string
	for _, p := range c.in.procs {
		parts = append(parts, fmt.Sprintf("%s %d MB", p.name, rss(p.cmd.Process.Pid)))
	}
	total, pids := 0, cgroupPids(c.in.hs, c.in.cgroup)
	for _, pid := range pids {
		total += rss(pid)
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; all %d processes %d MB", len(pids), total)
}

// hostState describes what a run could change outside its directory and
// cgroups: the shadowed paths, the kernel tunables, the links, iptables'
// chains.
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	// Names starting "pdk" are other paddock tests' (the e2e egress test's
	// network namespace and veth, made and removed while this one runs in
	// parallel); a cluster never makes them.
	others := func(name string) bool { return strings.HasPrefix(name, "pdk") }
	for _, s := range shadowed {
		ents, err := os.ReadDir(s)
		n := 0
		for _, e := range ents {
			if !others(e.Name()) {
				n++
			}
		}
		fmt.Fprintf(&b, "%s: %d entries, %v\n", s, n, err)
	}
	keys := make([]string, 0, len(kernelTunables))
	for k := range kernelTunables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := os.ReadFile("/proc/sys/" + k)
		fmt.Fprintf(&b, "%s = %s", k, v)
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if !others(l.Name()) {
			fmt.Fprintf(&b, "link %s\n", l.Name())
		}
	}
	if _, err := exec.LookPath("iptables-save"); err == nil {
		out, _ := exec.Command("iptables-save").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, ":KUBE-") || strings.Contains(l, "KUBE-") {
				fmt.Fprintf(&b, "iptables: %s\n", l)
			}
		}
	}
	return b.String()
}

// newNamespace makes a namespace for the test and waits for its default
// ServiceAccount (pods are refused until the controller manager makes it).
func newNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	n, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "k8stest-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the default ServiceAccount of "+n.Name, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(n.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	return n.Name
}

// podPidsMax reads the pids.max of a pod's cgroup (the kubelet's pod
// level, under the QoS class's group unless the pod is Guaranteed).
func podPidsMax(t *testing.T, c *Cluster, ns, name string) string {
	t.Helper()
	p, err := c.Clientset().CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range c.in.hs {
		pod := "pod" + string(p.UID)
		for _, pat := range []string{"kubepods/*/" + pod, "kubepods/" + pod} {
			if m, _ := filepath.Glob(filepath.Join(h.mount, c.in.cgroup, pat, "pids.max")); len(m) == 1 {
				b, err := os.ReadFile(m[0])
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(string(b))
			}
		}
	}
	return "no pids cgroup for the pod"
}

// newClaim makes a ReadWriteOnce claim of size; class "" leaves the
// class to the cluster's default.
func newClaim(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, size, class string) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "" {
		claim.Spec.StorageClassName = &class
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// boxPod is a pod shaped like a box: the box's security context, no
// service account token, no service links, no DNS, no pulls, the claim
// at /data; the command keeps it running.
func boxPod(ns, name, image, claim string) *corev1.Pod {
	no, yes := false, true
	uid := int64(1000)
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "box",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "infinity"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{
				Name:         "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
			}},
		},
	}
}

// runPod creates pod and waits until it runs (the scheduler places it).
func runPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	waitUntil(ctx, t, "pod "+pod.Name+" Running", func() bool {
		p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod %s ended: %s", pod.Name, podStatus(p))
		}
		return p.Status.Phase == corev1.PodRunning
	}, func() string { return podStatus(last) })
}

// podStatus is a pod's phase, conditions and container states, for errors.
func podStatus(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s node %q", p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Message)
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, "; %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, "; %s terminated: %s %d %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
		}
	}
	return b.String()
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "pod "+name+" gone", func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// waitUntil polls cond every 100 ms; at ctx's end it fails the test, with
// what detail says.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			msg := "timed out waiting for " + what
			for _, d := range detail {
				msg += ": " + d()
			}
			t.Fatal(msg)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// execIn runs argv in the pod's container through the API server's exec
// stream (websocket, else SPDY: client-go's choice for kubectl), and
// returns its stdout and exit status; stderr goes to the test log.
func execIn(ctx context.Context, t *testing.T, c *Cluster, ns, pod string, stdin io.Reader, argv ...string) (string, int) {
	t.Helper()
	req := c.Clientset().CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "box", Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	rc := c.RESTConfig()
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errOut})
	if errOut.Len() > 0 {
		t.Logf("%s: stderr: %s", strings.Join(argv, " "), errOut.String())
	}
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitStatus()
	}
	t.Fatalf("exec %s in %s/%s: %v", strings.Join(argv, " "), ns, pod, err)
	return "", 0
}

// TestVersionMatchesGoMod: the client modules in go.mod are the
// components' release (v0.<minor>.<patch> for v1.<minor>.<patch>).
func TestVersionMatchesGoMod(t *testing.T) {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := "v0." + strings.TrimPrefix(Version, "v1.")
	for _, m := range []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} {
		if !strings.Contains(string(b), "\t"+m+" "+want+"\n") {
			t.Errorf("go.mod does not require %s %s (the test cluster runs %s)", m, want, Version)
		}
	}
	if _, err := strconv.Atoi(strings.Split(strings.TrimPrefix(Version, "v1."), ".")[0]); err != nil {
		t.Errorf("Version %q is not v1.<minor>.<patch>", Version)
	}
}

// TestMadeDirMountedOnByOthers: a host directory a run made (say
// /var/run/netns) that something else has since mounted on (`ip netns
// add` binds it on itself for good) is left where it is, not an error of
// the sweep; once nothing is mounted on it, it is removed.
func TestMadeDirMountedOnByOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir := filepath.Join(t.TempDir(), "made")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	mounted := true
	defer func() {
		if mounted {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	}()
	if !isMountPoint(dir) {
		t.Fatalf("%s: a bind mount on itself is not seen as a mount point", dir)
	}
	if err := removeMadeDirs([]string{dir}); err != nil {
		t.Fatalf("a made directory someone else mounted on: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the mounted-on directory is gone: %v", err)
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if isMountPoint(dir) {
		t.Fatalf("%s: still a mount point after umount", dir)
	}
	if err := removeMadeDirs([]string{dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the made directory is still there: %v", err)
	}
}
