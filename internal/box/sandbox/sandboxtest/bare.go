package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/paddockhq/paddock/internal/testkit/perf"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BareBwrap is the baseline of the local backend's start: bubblewrap with
// the same namespaces and mounts paddock uses, running /bin/true, to exit.
func BareBwrap(tb testing.TB) time.Duration {
	tb.Helper()
	t0 := time.Now()
	cmd := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--as-pid-1", "--new-session", "--", "/bin/true")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("bare bwrap: %v %s", err, out)
	}
	return time.Since(t0)
}

// BareDocker is the baseline of the docker backend's start: `docker run`
// of img running /bin/true, without network, to exit, on runtime (""
// the daemon's default). The container is removed after the clock stops.
func BareDocker(tb testing.TB, cli *client.Client, img, runtime string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	t0 := time.Now()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: img, Entrypoint: []string{"/bin/true"}, NetworkDisabled: runtime == ""},
		HostConfig: &container.HostConfig{NetworkMode: "none", Runtime: runtime}})
	if err != nil {
		tb.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		tb.Fatal(err)
	}
	w := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		tb.Fatal(err)
	}
	return time.Since(t0)
}

// BareKube is the baseline of the kubernetes backend's start: what a box
// needs of the cluster and nothing of paddock — two new claims of the
// default StorageClass (a box's home and workspace) and a pod of img
// (already on the node) mounting them and running sleep, in namespace ns,
// from the first create to the pod Running (its container started: the
// point from which a box's guest serves). Waiting for a /bin/true pod to
// be Succeeded would add the kubelet's status reporting, which a box's
// start does not wait for. Everything is deleted after the clock stops.
func BareKube(tb testing.TB, cs kubernetes.Interface, ns, img string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	pods, pvcs := cs.CoreV1().Pods(ns), cs.CoreV1().PersistentVolumeClaims(ns)
	name := fmt.Sprintf("bare-%d", time.Now().UnixNano())
	no, zero := false, int64(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "bare", Image: img, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}}}
	var claims []string
	for _, v := range []string{"home", "workspace"} {
		claim := name + "-" + v
		claims = append(claims, claim)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/mnt/" + v})
	}
	t0 := time.Now()
	for _, claim := range claims {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if _, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
		defer pvcs.Delete(ctx, claim, metav1.DeleteOptions{}) //nolint:errcheck
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	defer pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) //nolint:errcheck
	for deadline := t0.Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return time.Since(t0)
		}
		if err == nil && p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			var st any = err
			if err == nil {
				st = p.Status
			}
			tb.Fatalf("bare pod %s did not run: %+v", name, st)
		}
	}
}

// DockerBoxPSS is the PSS of every host process of a docker box's cgroup
// (a runc box's own processes, or a gVisor box's sentry, gofer and stubs).
func DockerBoxPSS(tb testing.TB, cli *client.Client, id string) int64 {
	tb.Helper()
	res, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		tb.Fatalf("inspect %s: %v", id, err)
	}
	procs, err := perf.PidsCgroupProcs(res.Container.State.Pid)
	if err != nil {
		tb.Fatal(err)
	}
	pss, err := perf.CgroupPSS(procs)
	if err != nil {
		tb.Fatal(err)
	}
	return pss
}

// BareRunsc is the baseline of the local backend's gVisor start: runsc
// (the pinned build at runsc) run directly, with the flags paddock uses,
// on a bundle of an empty read-only root with /usr bound, running
// /bin/true as uid 1000, to exit. Its state directory and pinned network
// namespace are removed after the clock stops.
func BareRunsc(tb testing.TB, runsc string) time.Duration {
	tb.Helper()
	dir := tb.TempDir()
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	for _, d := range []string{"usr", "proc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "lib", "lib64"} {
		if err := os.Symlink("usr/"+l, filepath.Join(rootfs, l)); err != nil {
			tb.Fatal(err)
		}
	}
	spec := `{"ociVersion":"1.0.2","process":{"user":{"uid":1000,"gid":1000},"args":["/bin/true"],"env":["PATH=/usr/bin"],"cwd":"/","noNewPrivileges":true},
"root":{"path":"rootfs","readonly":true},"hostname":"bare",
"mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/dev","type":"tmpfs","source":"tmpfs"},{"destination":"/tmp","type":"tmpfs","source":"tmpfs"},
{"destination":"/usr","type":"bind","source":"/usr","options":["rbind","ro"]}],
"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network"}]}}`
	if err := os.WriteFile(filepath.Join(dir, "bundle", "config.json"), []byte(spec), 0o600); err != nil {
		tb.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	defer func() {
		for unix.Unmount(filepath.Join(state, "null-netns"), unix.MNT_DETACH) == nil {
		}
	}()
	t0 := time.Now()
	cmd := exec.Command(runsc, "--root", state, "--network=none", "--ignore-cgroups", "--overlay2=none", "--directfs=false",
		"run", "--bundle", filepath.Join(dir, "bundle"), "bare")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("bare runsc: %v %s", err, out)
	}
	return time.Since(t0)
}
