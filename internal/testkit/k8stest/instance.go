package k8stest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// instance is one run of the cluster on this host: its directory,
// processes, cgroups and links. start makes one; stop undoes all of it.
type instance struct {
	id, dir string
	hs      []hierarchy
	cgroup  string   // prefix+id, in every hierarchy
	link    string   // the pods' macvlan master; its peer is in the holder's netns
	made    []string // host directories shadowDirs made
	lock    *os.File // LockFile, held from start to the end of stop

	holder  *proc
	deadman *os.File // the holder's stdin; see holderScript
	mntNS   string   // the holder's mount namespace, as /proc/<pid>/ns/mnt reads
	procs   []*proc  // the components, in start order

	stopProvisioner context.CancelFunc
	provisioned     chan struct{} // closed when the provisioner returns
}

// proc is one process the run started; done is closed when it exits.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Addresses inside the cluster. The service range only names Services
// (nothing routes it: there is no kube-proxy); the pod range is the pods'
// macvlan subnet.
const (
	serviceCIDR  = "10.0.0.0/24"
	serviceIP    = "10.0.0.1"
	podCIDR      = "10.244.0.0/16"
	pauseImage   = "paddock.local/k8stest/pause:1"
	startTimeout = 3 * time.Minute
)

// start brings a cluster up: the host lock, a sweep of stale runs, then
// every component, until the node is Ready and schedulable. On failure it
// undoes what it did and the error carries the components' log tails.
func start(ctx context.Context, logf func(string, ...any)) (*Cluster, error) {
	lock, err := lockHost(logf)
	if err != nil {
		return nil, err
	}
	c, err := startLocked(ctx, lock)
	if err != nil {
		lock.Close()
	}
	return c, err
}

// startLocked is start once the lock is held; the cluster's stop does not
// release it (its owner does, see stopShared).
func startLocked(ctx context.Context, lock *os.File) (c *Cluster, err error) {
	t0 := time.Now()
	hs, err := hierarchies()
	if err == nil {
		err = sweepStale(hs)
	}
	if err != nil {
		return nil, fmt.Errorf("k8stest: cleaning up after an earlier run: %w", err)
	}
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	in := &instance{id: id, dir: filepath.Join(os.TempDir(), prefix+id), hs: hs, cgroup: prefix + id, link: linkPrefix + id + "h", lock: lock}
	defer func() {
		if err != nil {
			tails := in.tails(40)
			if serr := in.stop(); serr != nil {
				err = errors.Join(err, serr)
			}
			err = fmt.Errorf("k8stest: the cluster did not start: %w\n%s", err, tails)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c, err = in.up(ctx)
	if err != nil {
		return nil, err
	}
	c.Started = time.Since(t0)
	return c, nil
}

// up does start's work once the instance is named: the files, the host
// side (cgroups, namespaces, links), the components, then the waits.
func (in *instance) up(ctx context.Context) (*Cluster, error) {
	pt, err := in.prepare()
	if err != nil {
		return nil, err
	}
	// The pause image builds (a second or two of `go build`) while the
	// components start.
	pause := make(chan error, 1)
	go func() { pause <- buildPause(ctx, in.path("pause")) }()
	if err := in.isolate(); err != nil {
		return nil, err
	}
	if err := in.launchAll(ctx, pt); err != nil {
		return nil, err
	}

	rc := &rest.Config{
		Host:            pt.server(),
		TLSClientConfig: rest.TLSClientConfig{CAData: pt.pki.caPEM, CertData: pt.adminCert, KeyData: pt.adminKey},
		// Tests make objects in bursts; the default 5 QPS would throttle them.
		QPS: 100, Burst: 200,
		UserAgent: "paddock-k8stest",
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if err := in.waitFor(ctx, "the API server's /readyz", func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	if err := in.storage(ctx, cs); err != nil {
		return nil, err
	}
	select {
	case err := <-pause:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("building the pause image: %w", ctx.Err())
	}
	// Before the node is usable: no pod may start without its sandbox image.
	if err := importTar(ctx, in.containerdSock(), in.path("pause/image.tar")); err != nil {
		return nil, err
	}
	if err := in.waitFor(ctx, "node "+NodeName+" Ready and schedulable", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil // not registered yet
		}
		return nodeUsable(n), nil
	}); err != nil {
		return nil, err
	}
	return &Cluster{Kubeconfig: in.path("admin.kubeconfig"), Node: NodeName, StorageClass: StorageClassName, rc: rc, cs: cs, in: in}, nil
}

// plan is what prepare decided: the ports and the certificates.
type plan struct {
	etcd, peer, api, kubelet int // ports on 127.0.0.1
	pki                      *pki
	adminCert, adminKey      []byte
}

func (pt *plan) server() string { return "https://127.0.0.1:" + strconv.Itoa(pt.api) }

// prepare makes the run's directory tree, picks the ports, and writes the
// certificates and every config file.
func (in *instance) prepare() (*plan, error) {
	if err := os.Mkdir(in.dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{"pki", "logs", "etcd", "containerd", "kubelet", "pod-logs", "cni/net.d", "cni/ipam", "volumes", "volume-plugins"} {
		if err := os.MkdirAll(in.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	pt := &plan{etcd: ports[0], peer: ports[1], api: ports[2], kubelet: ports[3]}
	if pt.pki, pt.adminCert, pt.adminKey, err = in.certificates(pt.server()); err != nil {
		return nil, err
	}
	return pt, in.writeConfigs(pt.kubelet)
}

// isolate readies the host side: the cgroups, the shadowed paths and
// tunables, the holder and its namespaces, the links.
func (in *instance) isolate() error {
	if err := makeCgroups(in.hs, in.cgroup); err != nil {
		return err
	}
	var err error
	if in.made, err = shadowDirs(in.dir); err != nil {
		return err
	}
	tunables, err := tunableFiles(in.dir)
	if err != nil {
		return err
	}
	if err := in.startHolder(tunables); err != nil {
		return err
	}
	return makeLinks(in.link, linkPrefix+in.id+"p", in.holder.cmd.Process.Pid)
}

// launchAll starts the components. Each retries until what it needs
// answers, except the kubelet, which needs containerd's socket at once.
func (in *instance) launchAll(ctx context.Context, pt *plan) error {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(pt.etcd)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(pt.peer)
	if err := in.launch("etcd", false, nil, "etcd", "--name=k8stest", "--data-dir="+in.path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=k8stest="+peerURL, "--logger=zap", "--log-level=warn"); err != nil {
		return err
	}
	pk := pt.pki.path
	if err := in.launch("kube-apiserver", false, nil, filepath.Join(BinDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(pt.api),
		"--cert-dir="+pk(""),
		"--tls-cert-file="+pk("apiserver.crt"), "--tls-private-key-file="+pk("apiserver.key"),
		"--client-ca-file="+pk("ca.crt"),
		"--service-account-key-file="+pk("sa.pub"), "--service-account-signing-key-file="+pk("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+serviceCIDR,
		// As a real cluster's: nodes may touch only their own pods' objects.
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+pk("apiserver-kubelet-client.crt"), "--kubelet-client-key="+pk("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+pk("ca.crt"),
		// The node is "localhost" (NodeName): reached by name, on loopback.
		"--kubelet-preferred-address-types=Hostname",
		// No Endpoints for the kubernetes Service: its address is loopback.
		"--endpoint-reconciler-type=none",
		"--profiling=false"); err != nil {
		return err
	}
	if err := in.launch("containerd", true, nil, "containerd", "--config="+in.path("containerd/config.toml")); err != nil {
		return err
	}
	sock := in.containerdSock()
	if err := in.waitFor(ctx, "containerd's socket", func(context.Context) (bool, error) {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	}); err != nil {
		return err
	}
	// PATH without /usr/sbin: the kubelet then finds no iptables and
	// leaves the host's rules alone (it would add KUBE-FIREWALL and
	// canary chains).
	if err := in.launch("kubelet", true, []string{"PATH=/usr/bin:/bin"}, filepath.Join(BinDir, "kubelet"),
		"--config="+in.path("kubelet.json"), "--kubeconfig="+in.path("kubelet.kubeconfig"),
		"--hostname-override="+NodeName, "--root-dir="+in.path("kubelet"), "--cert-dir="+pk(""), "--v=1"); err != nil {
		return err
	}
	// Both with the admin's credentials, and no serving port (nothing
	// scrapes them; 0 turns their HTTPS off).
	admin := in.path("admin.kubeconfig")
	if err := in.launch("kube-controller-manager", false, nil, filepath.Join(BinDir, "kube-controller-manager"),
		"--kubeconfig="+admin, "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=false", "--root-ca-file="+pk("ca.crt"),
		"--service-cluster-ip-range="+serviceCIDR, "--controllers="+strings.Join(controllers, ",")); err != nil {
		return err
	}
	return in.launch("kube-scheduler", false, nil, filepath.Join(BinDir, "kube-scheduler"),
		"--kubeconfig="+admin, "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false")
}

// controllers are the controller manager's loops this cluster runs: what
// pods and claims need (service accounts and the root CA ConfigMap, the
// volume binder and the claim/volume protection finalizers), namespace
// deletion and garbage collection, node lifecycle (it lifts the node's
// not-ready taint, so the scheduler places pods) and the aggregated
// ClusterRoles (admin, edit, view). No Deployments or Services: no
// backend test needs them.
var controllers = []string{
	"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"persistentvolume-binder-controller", "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
	"namespace-controller", "garbage-collector-controller", "pod-garbage-collector-controller",
	"node-lifecycle-controller", "clusterrole-aggregation-controller",
}

// nodeUsable: Ready, and no taint that keeps pods off it.
func nodeUsable(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return ready
}

func (in *instance) path(rel string) string { return filepath.Join(in.dir, rel) }

func (in *instance) containerdSock() string { return in.path("containerd/containerd.sock") }

// certificates makes the run's CA, every component's certificate and the
// two kubeconfigs (admin, kubelet); it returns the admin's PEMs.
func (in *instance) certificates(server string) (p *pki, adminCert, adminKey []byte, err error) {
	if p, err = newPKI(in.path("pki")); err != nil {
		return nil, nil, nil, err
	}
	leaves := []leaf{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}},
		// The API server's client to the kubelet (exec, logs).
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		// The kubelet as the Node authorizer knows nodes.
		{name: "node", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}},
		{name: "kubelet", cn: NodeName, server: true, dns: []string{NodeName}, ips: []net.IP{net.ParseIP("127.0.0.1")}},
	}
	for _, l := range leaves {
		cert, key, err := p.issue(l)
		if err != nil {
			return nil, nil, nil, err
		}
		if l.name == "node" {
			if err := p.kubeconfig(in.path("kubelet.kubeconfig"), server, cert, key); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	if adminCert, adminKey, err = p.issue(leaf{name: "admin", cn: "paddock-k8stest-admin", orgs: []string{"system:masters"}}); err != nil {
		return nil, nil, nil, err
	}
	if err := p.kubeconfig(in.path("admin.kubeconfig"), server, adminCert, adminKey); err != nil {
		return nil, nil, nil, err
	}
	return p, adminCert, adminKey, p.serviceAccountKey()
}

// writeConfigs writes containerd's config, the CNI network, the kubelet's
// config and the empty resolv.conf the pods' DNS starts from.
func (in *instance) writeConfigs(kubeletPort int) error {
	// containerd: everything of its own under the run's directory (the
	// paths it does not let a config move are shadowed, see shadowed),
	// the CRI plugin's defaults but for what is said here.
	ctr := in.path("containerd")
	toml := fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

# (It would make /opt/containerd.)
[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This host cannot lower oom_score_adj (no CAP_SYS_RESOURCE): without
  # this, runc fails to start every sandbox.
  restrict_oom_score_adj = true
  # Exec and attach streams: the kubelet proxies them to this loopback
  # listener, on a port of containerd's choosing.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

  [plugins."io.containerd.grpc.v1.cri".cni]
    # Debian's plugins; the one network below, and no other.
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(ctr, "root"), filepath.Join(ctr, "state"), in.containerdSock(), filepath.Join(ctr, "opt"),
		pauseImage, cniDir, in.path("cni/net.d"))
	if err := os.WriteFile(filepath.Join(ctr, "config.toml"), []byte(toml), 0o644); err != nil {
		return err
	}
	// macvlan in private mode: a pod's interface reaches neither the host
	// nor another pod's; no route but the subnet's.
	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "paddock-k8stest",
		"plugins": []any{map[string]any{
			"type": "macvlan", "master": in.link, "mode": "private",
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
				"dataDir": in.path("cni/ipam"),
			},
		}},
	}
	if err := writeJSON(in.path("cni/net.d/10-paddock-k8stest.conflist"), cni); err != nil {
		return err
	}
	// Pods with the Default DNS policy get an empty resolver, not the host's.
	if err := os.WriteFile(in.path("resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	pk := func(f string) string { return in.path("pki/" + f) }
	// The kubelet: serving on loopback only (no read-only or healthz port),
	// to the API server alone (client certificates of the run's CA, each
	// request authorized by the API server), with everything it keeps
	// under the run's directory or cgroup subtree.
	kubelet := map[string]any{
		"apiVersion":        "kubelet.config.k8s.io/v1beta1",
		"kind":              "KubeletConfiguration",
		"address":           "127.0.0.1",
		"port":              kubeletPort,
		"readOnlyPort":      0,
		"healthzPort":       0,
		"tlsCertFile":       pk("kubelet.crt"),
		"tlsPrivateKeyFile": pk("kubelet.key"),
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": pk("ca.crt")},
		},
		"authorization":            map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint": "unix://" + in.containerdSock(),
		// No systemd here: the kubelet makes its cgroups itself, under
		// the run's subtree, on this cgroup v1 host.
		"cgroupDriver":    "cgroupfs",
		"cgroupRoot":      "/" + in.cgroup,
		"failCgroupV1":    false,
		"failSwapOn":      false,
		"podLogsDir":      in.path("pod-logs"),
		"resolvConf":      in.path("resolv.conf"),
		"volumePluginDir": in.path("volume-plugins"),
		// A pod has no pids limit of its own in Kubernetes: the node's
		// podPidsLimit bounds every pod. As an owner running boxes should,
		// the test node sets paddock's default box limit.
		"podPidsLimit": sandbox.DefaultLimits.Pids,
		// Nothing attaches volumes here (no attach/detach controller runs).
		"enableControllerAttachDetach": false,
		// Images come from ImportImage and no registry: never collect them.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Evict on a nearly full disk only: a busy test machine's disk
		// should not evict test pods.
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		"clusterDomain": "cluster.local",
		"hairpinMode":   "none",
	}
	return writeJSON(in.path("kubelet.json"), kubelet)
}

func writeJSON(file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// startHolder starts the process whose mount namespace containerd and the
// kubelet join (holderScript), in the run's cgroup.
func (in *instance) startHolder(tunables map[string]string) error {
	var cgroups []string
	for _, h := range in.hs {
		cgroups = append(cgroups, filepath.Join(h.mount, in.cgroup))
	}
	log, err := os.Create(in.path("logs/holder.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	// The holder's stdin: only this process has the write end (os.Pipe
	// sets close-on-exec), so it closes exactly when this process ends or
	// stop closes it, after the holder is dead.
	stdin, deadman, err := os.Pipe()
	if err != nil {
		return err
	}
	defer stdin.Close()
	out, ready, err := os.Pipe()
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("/bin/sh", "-c", holderScript(in.dir, shadowed, tunables, cgroups))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, ready, log
	// A new mount namespace (made private: nothing propagates back to the
	// host) and a new network namespace for the veth's far end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, Setpgid: true}
	err = cmd.Start()
	ready.Close()
	if err != nil {
		deadman.Close()
		return fmt.Errorf("the namespace holder: %w", err)
	}
	in.deadman = deadman
	in.holder = in.watch("holder", log.Name(), cmd)
	// In the cgroups before it says ready, so before anything is started
	// in its namespace: nothing of the run escapes the subtree.
	if err := joinCgroups(in.hs, in.cgroup, cmd.Process.Pid); err != nil {
		return err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		<-in.holder.done
		return fmt.Errorf("the namespace holder failed: %v", in.holder.err)
	}
	in.mntNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid))
	return err
}

// launch starts a component with its output in logs/<name>.log, in the
// run's cgroup; inNS runs it in the holder's mount namespace. env adds to
// (or replaces in) the test process's environment.
func (in *instance) launch(name string, inNS bool, env []string, argv ...string) error {
	log, err := os.Create(in.path("logs/" + name + ".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	if inNS {
		argv = append([]string{"nsenter", "--target=" + strconv.Itoa(in.holder.cmd.Process.Pid), "--mount", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = mergeEnv(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a ^C to `go test` reaches the test process,
	// whose ending then stops everything in order (or the holder does).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	p := in.watch(name, log.Name(), cmd)
	in.procs = append(in.procs, p)
	return joinCgroups(in.hs, in.cgroup, cmd.Process.Pid)
}

// watch waits for cmd in the background.
func (in *instance) watch(name, log string, cmd *exec.Cmd) *proc {
	p := &proc{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

// mergeEnv returns base with each KEY=value of over replacing base's KEY.
func mergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, o := range over {
			if strings.HasPrefix(o, k+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// waitFor polls cond every 100 ms until it holds, ctx ends, or a
// component exits (an error naming it).
func (in *instance) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		for _, p := range append([]*proc{in.holder}, in.procs...) {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %s exited (%v); see its log below", what, p.name, p.err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// storage makes the default StorageClass and starts its provisioner.
func (in *instance) storage(ctx context.Context, cs kubernetes.Interface) error {
	del := corev1.PersistentVolumeReclaimDelete
	imm := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       provisionerName,
		ReclaimPolicy:     &del,
		VolumeBindingMode: &imm,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("StorageClass %s: %w", StorageClassName, err)
	}
	log, err := os.Create(in.path("logs/provisioner.log"))
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	in.stopProvisioner, in.provisioned = cancel, make(chan struct{})
	pv := &provisioner{cs: cs, dir: in.path("volumes"), log: log}
	go func() {
		defer close(in.provisioned)
		defer log.Close()
		pv.run(pctx)
	}()
	return nil
}

// tails returns the last n lines of every component's log.
func (in *instance) tails(n int) string {
	var b strings.Builder
	logs, _ := filepath.Glob(in.path("logs/*.log"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", filepath.Base(l), len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// stop undoes start: the components get SIGTERM and two seconds, then
// everything in the run's cgroups is killed; the cgroups, the links, the
// directory and the host directories it made are removed; the lock stays
// held (unlock). Mounts need nothing: they were all in the holder's namespace,
// which went with its last process. It goes on past errors and returns
// them all.
func (in *instance) stop() error {
	var errs []error
	if in.stopProvisioner != nil {
		in.stopProvisioner()
		<-in.provisioned
	}
	// Last started first: the kubelet and controllers before the API
	// server, containerd and etcd.
	for i := len(in.procs) - 1; i >= 0; i-- {
		_ = in.procs[i].cmd.Process.Signal(syscall.SIGTERM)
	}
	grace := time.After(2 * time.Second)
	for _, p := range in.procs {
		select {
		case <-p.done:
		case <-grace:
		}
	}
	// Whatever is left: slow components, containerd's shims, the pods,
	// the holder. With the holder goes the mount namespace, so every mount.
	if err := killCgroups(in.hs, in.cgroup, 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	all := in.procs
	if in.holder != nil {
		all = append(all, in.holder)
	}
	for _, p := range all {
		_ = p.cmd.Process.Kill() // in case it never joined the cgroups
		<-p.done
	}
	if err := removeCgroups(in.hs, in.cgroup); err != nil {
		errs = append(errs, err)
	}
	if in.deadman != nil {
		in.deadman.Close()
	}
	if err := removeLink(in.link); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(in.dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(in.dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeMadeDirs(in.made); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unlock releases LockFile, after stop.
func (in *instance) unlock() error { return in.lock.Close() }

// lockHost takes LockFile, waiting (and saying so) while another cluster
// holds it.
func lockHost(logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return f, nil
	}
	logf("k8stest: waiting for %s: another test process runs a cluster on this host", LockFile)
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", LockFile, err)
	}
	return f, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
