// Package kubernetes is the `kubernetes` backend: a box is a pod of the box
// image (the docker backend's image, entrypoint `paddock guest`), its home
// and workspace are PersistentVolumeClaims, and a NetworkPolicy denies the
// pod all ingress and egress. The channel is the API server's exec stream
// running `paddock guest bridge` in the pod, as the docker backend uses
// `docker exec`: no port is opened on the pod, and the credential never
// enters the cluster (the backend refuses direct mode: ProxyOnly).
//
// Objects, all in Config.Namespace, all labelled like the other backends'
// (sandbox.LabelManaged, LabelSession, LabelKind, LabelOwner):
//
//	NetworkPolicy paddock-<session>            the box's record, Create → Remove (KindBox)
//	Pod           paddock-<session>            the running box, Start → Stop  (KindProcess)
//	PVC           paddock-<session>-home       home                          (KindVolume)
//	PVC           paddock-<session>-workspace  /workspace                    (KindVolume)
//
// The box's id is its NetworkPolicy's name. The policy exists before the
// pod is made and goes only after the pod is gone, so a box's pod never
// runs unconfined by it. Everything a Start needs is on the record (image,
// limits), so a restarted Runner re-adopts boxes from the cluster alone.
//
// Every pod is made by one builder, podSpec, hardened by construction
// (TestSpecHardened checks it field by field).
package kubernetes

import (
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Name of this backend.
const Name = "kubernetes"

// GuestPath is where box images carry the paddock binary (as docker's).
const GuestPath = "/usr/local/bin/paddock"

// Config configures the backend. The zero values of the optional fields
// are the documented defaults (WithDefaults).
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty uses the
	// in-cluster config (the Runner runs in a pod with a service account).
	Kubeconfig string
	// Context names the kubeconfig context; empty uses its current one.
	Context string
	// Namespace holds every object of the backend (required). It must
	// exist; the Runner needs in it the Role of contrib/kubernetes/role.yaml.
	Namespace string
	// Owner is this Runner's id, put on every object as LabelOwner; List,
	// Inspect and prune see only the owner's objects. Required, a valid
	// label value.
	Owner string
	// Image is the box image when CreateOptions.Image is empty: on a real
	// cluster, a registry reference pinned by digest (repo@sha256:…).
	Image string
	// ImagePullPolicy of the box container; empty means IfNotPresent. A
	// cluster without a registry (the test cluster) uses Never.
	ImagePullPolicy corev1.PullPolicy
	// StorageClass of the claims; empty uses the cluster's default class.
	StorageClass string
	// HomeSize and WorkspaceSize are the claims' requests (default 10 GiB).
	HomeSize, WorkspaceSize int64
	// NodeSelector and Tolerations place the pods.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Limits fill what CreateOptions.Limits leave at zero, before
	// sandbox.DefaultLimits do.
	Limits sandbox.Limits
	// Requests are the pods' resource requests (what the scheduler
	// reserves); zero means 100m CPU and 256 MiB, never above the limits.
	Requests sandbox.Limits
	// TmpSize bounds the /tmp emptyDir (a tmpfs, counted against the
	// memory limit; default 1 GiB).
	TmpSize int64
	// StartTimeout bounds Start's wait for a Running pod (default 3 min).
	StartTimeout time.Duration
	// UnsafeUnenforcedNetworkPolicy lets boxes run on a cluster where the
	// backend cannot prove that NetworkPolicy is enforced (no policy
	// engine): their pods are then isolated only by what the cluster's
	// network does by itself. The owner's explicit choice.
	UnsafeUnenforcedNetworkPolicy bool
}

// Defaults of Config.
const (
	DefaultVolumeSize   = 10 << 30
	DefaultTmpSize      = 1 << 30
	DefaultStartTimeout = 3 * time.Minute
)

// labelValue is what Kubernetes accepts as a label value (and a name part).
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// withDefaults checks c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		return c, fmt.Errorf("kubernetes backend: no namespace: %w", errdefs.ErrInvalid)
	}
	if !labelValue.MatchString(c.Owner) {
		return c, fmt.Errorf("kubernetes backend: owner id %q is not a Kubernetes label value: %w", c.Owner, errdefs.ErrInvalid)
	}
	switch c.ImagePullPolicy {
	case "":
		c.ImagePullPolicy = corev1.PullIfNotPresent
	case corev1.PullIfNotPresent, corev1.PullNever, corev1.PullAlways:
	default:
		return c, fmt.Errorf("kubernetes backend: image pull policy %q is not IfNotPresent, Never or Always: %w", c.ImagePullPolicy, errdefs.ErrInvalid)
	}
	if c.HomeSize == 0 {
		c.HomeSize = DefaultVolumeSize
	}
	if c.WorkspaceSize == 0 {
		c.WorkspaceSize = DefaultVolumeSize
	}
	if c.TmpSize == 0 {
		c.TmpSize = DefaultTmpSize
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.Requests.CPUs == 0 {
		c.Requests.CPUs = 0.1
	}
	if c.Requests.MemoryBytes == 0 {
		c.Requests.MemoryBytes = 256 << 20
	}
	if c.HomeSize < 0 || c.WorkspaceSize < 0 || c.TmpSize < 0 || c.Requests.CPUs < 0 || c.Requests.MemoryBytes < 0 {
		return c, fmt.Errorf("kubernetes backend: negative size: %w", errdefs.ErrInvalid)
	}
	return c, nil
}

// limits are a box's limits: CreateOptions', then Config's, then
// sandbox.DefaultLimits.
func (c Config) limits(l sandbox.Limits) sandbox.Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = c.Limits.MemoryBytes
	}
	if l.CPUs == 0 {
		l.CPUs = c.Limits.CPUs
	}
	if l.Pids == 0 {
		l.Pids = c.Limits.Pids
	}
	return l.WithDefaults()
}

func quantity(bytes int64) resource.Quantity { return *resource.NewQuantity(bytes, resource.BinarySI) }

func cpuQuantity(cpus float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(cpus*1000+0.5), resource.DecimalSI)
}
