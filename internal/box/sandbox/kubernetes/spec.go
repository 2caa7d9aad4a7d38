package kubernetes

import (
	"encoding/json"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Names of a session's objects (sandbox.ValidSession keeps them valid).
func boxName(session string) string   { return "paddock-" + session }
func homeClaim(session string) string { return "paddock-" + session + "-home" }
func wsClaim(session string) string   { return "paddock-" + session + "-workspace" }

// Annotations on a box's record (its NetworkPolicy): what Start needs.
const (
	annImage   = "paddock.image"
	annLimits  = "paddock.limits"  // JSON of sandbox.Limits, defaults filled
	annStarted = "paddock.started" // "1" once a pod was made
	annRuntime = "paddock.runtime" // the pods' RuntimeClass, if the session asked for one
	// annEmpty is never set: the downward API turns it into the empty file
	// that the box gets as /etc/resolv.conf.
	annEmpty = "paddock.empty"
)

// Container and volume names in the pod.
const (
	containerName = "box"
	volHome       = "home"
	volWorkspace  = "workspace"
	volTmp        = "tmp"
	volRun        = "run"
	volResolv     = "resolv"
)

// labels are sandbox.Labels plus the owner's.
func (b *Backend) labels(session string, kind sandbox.ObjectKind) map[string]string {
	l := sandbox.Labels(session, kind)
	l[sandbox.LabelOwner] = b.cfg.Owner
	return l
}

// selector picks the session's box pods, whichever object kind they are
// labelled; the NetworkPolicy's selector.
func (b *Backend) selector(session string) map[string]string {
	return map[string]string{sandbox.LabelManaged: "1", sandbox.LabelOwner: b.cfg.Owner, sandbox.LabelSession: session}
}

// refuseWorkspace: a pod may run on any node, never beside the owner's
// directory, and the Runner's idmapped view of it (wsmount) is on the
// Runner's host. So this backend takes no host workspace.
func refuseWorkspace(o sandbox.CreateOptions) error {
	if o.Workspace != "" {
		return fmt.Errorf("the kubernetes backend takes no host workspace (%s): a pod runs on a node of the cluster, which cannot mount a directory of the Runner's host; /workspace is a claim of the session (paddock run --clone gives the pod a clone of a git repository there instead): %w",
			o.Workspace, errdefs.ErrInvalid)
	}
	return nil
}

// record is the box's NetworkPolicy: it denies all ingress and egress to
// the session's pods (no rule allows anything) and carries what Start
// needs to make a pod.
func (b *Backend) record(session, image, runtimeClass string, l sandbox.Limits) *networkingv1.NetworkPolicy {
	lj, _ := json.Marshal(l) // plain numbers: cannot fail
	ann := map[string]string{annImage: image, annLimits: string(lj)}
	if runtimeClass != "" {
		ann[annRuntime] = runtimeClass
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: boxName(session), Namespace: b.cfg.Namespace,
			Labels:      b.labels(session, sandbox.KindBox),
			Annotations: ann,
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: b.selector(session)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// claim is one of a session's PersistentVolumeClaims.
func (b *Backend) claim(session, name string, size int64) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.cfg.Namespace, Labels: b.labels(session, sandbox.KindVolume)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: quantity(size)}},
		},
	}
	if b.cfg.StorageClass != "" {
		c.Spec.StorageClassName = &b.cfg.StorageClass
	}
	return c
}

// podSpec is the one builder of a box's pod. Its result is checked by
// TestSpecHardened; change both together.
//
// What it enforces and what it cannot: memory and CPU are the container's
// limits (cgroups, by the kubelet). A pod has no pids limit of its own: the
// kubelet's podPidsLimit is one value for every pod of a node, so l.Pids is
// kept on the record only and Capabilities say PidsLimit false; the owner
// sets podPidsLimit on the nodes that run boxes.
func (b *Backend) podSpec(session, image, runtimeClass string, l sandbox.Limits) *corev1.Pod {
	t, f := true, false
	uid := int64(sandbox.BoxUID)
	grace := int64(5)
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	req := corev1.ResourceList{
		corev1.ResourceCPU:    cpuQuantity(min(b.cfg.Requests.CPUs, l.CPUs)),
		corev1.ResourceMemory: quantity(min(b.cfg.Requests.MemoryBytes, l.MemoryBytes)),
	}
	tmpSize, runSize := quantity(b.cfg.TmpSize), resource.MustParse("1Mi")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: boxName(session), Namespace: b.cfg.Namespace,
			Labels: b.labels(session, sandbox.KindProcess),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever, // the guest's end is the box's
			TerminationGracePeriodSeconds: &grace,
			Hostname:                      "paddock",
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			ShareProcessNamespace:         &f,
			// No resolver: names travel inside CONNECT requests to the
			// Runner's egress proxy. The API insists on a nameserver;
			// nothing listens on the box's 127.0.0.1:53, and the file the
			// box sees is empty (volResolv).
			DNSPolicy: corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &uid,
				FSGroup:             &uid, // the claims belong to the box user
				FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      runtimeDefault,
			},
			NodeSelector: b.cfg.NodeSelector,
			Tolerations:  b.cfg.Tolerations,
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           image,
				ImagePullPolicy: b.pullPolicy(image),
				Command:         []string{GuestPath, "guest", "--setid-guard", "--socket", sandbox.GuestSocket},
				WorkingDir:      sandbox.WorkspaceDir,
				Env: []corev1.EnvVar{
					{Name: "HOME", Value: sandbox.HomeDir},
					{Name: "PATH", Value: "/usr/local/bin:/usr/bin:/bin"},
					{Name: "DISABLE_AUTOUPDATER", Value: "1"},
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &uid,
					Privileged:               &f,
					AllowPrivilegeEscalation: &f, // no_new_privs
					ReadOnlyRootFilesystem:   &t,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           runtimeDefault,
					ProcMount:                ptr(corev1.DefaultProcMount),
				},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    cpuQuantity(l.CPUs),
						corev1.ResourceMemory: quantity(l.MemoryBytes),
					},
					Requests: req,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volHome, MountPath: sandbox.HomeDir},
					{Name: volWorkspace, MountPath: sandbox.WorkspaceDir},
					{Name: volTmp, MountPath: "/tmp"},
					{Name: volRun, MountPath: "/run/paddock"},
					{Name: volResolv, MountPath: "/etc/resolv.conf", SubPath: "resolv.conf", ReadOnly: true},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{
				{Name: volHome, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: homeClaim(session)}}},
				{Name: volWorkspace, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: wsClaim(session)}}},
				{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
				{Name: volRun, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &runSize}}},
				{Name: volResolv, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "resolv.conf", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + annEmpty + "']"}}},
				}}},
			},
		},
	}
	if runtimeClass != "" {
		p.Spec.RuntimeClassName = &runtimeClass
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// digestRef is an image reference pinned by a whole digest.
var digestRef = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// pullPolicy is the pull policy of a box of image: the configured one,
// but IfNotPresent for an image other than Config.Image that is pinned by
// digest (a project's image, pushed to a registry the cluster pulls
// from) where the configured one is Never (an image already on the
// nodes, which a project's is not).
func (b *Backend) pullPolicy(image string) corev1.PullPolicy {
	if b.cfg.ImagePullPolicy == corev1.PullNever && image != b.cfg.Image && digestRef.MatchString(image) {
		return corev1.PullIfNotPresent
	}
	return b.cfg.ImagePullPolicy
}
