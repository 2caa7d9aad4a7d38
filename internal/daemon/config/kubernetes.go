package config

// kubernetes.go: the [kubernetes] table and its checks.

import (
	"fmt"
	"regexp"
	"strings"
)

// Kubernetes configures the kubernetes backend ([kubernetes]): boxes as
// pods in one namespace of a cluster the Runner reaches with a kubeconfig
// (or in-cluster config), needing there the Role of
// contrib/kubernetes/role.yaml.
type Kubernetes struct {
	// Kubeconfig is an absolute path; "" uses the in-cluster config.
	Kubeconfig string `toml:"kubeconfig"`
	// Context names a kubeconfig context; "" uses its current one.
	Context string `toml:"context"`
	// Namespace holds every object the backend makes (it must exist).
	Namespace string `toml:"namespace"`
	// Image is the box image. Unless ImagePullPolicy is "Never" (an image
	// already on the nodes), it must be pinned by digest
	// (repo@sha256:…, as `paddock image build --push REPO` prints).
	Image string `toml:"image"`
	// ImagePullPolicy: "" (IfNotPresent), "IfNotPresent", "Always", "Never".
	ImagePullPolicy string `toml:"image_pull_policy"`
	// StorageClass of the claims ("" = the cluster's default class).
	StorageClass string `toml:"storage_class"`
	// HomeGB and WorkspaceGB size the claims (0 = 10).
	HomeGB      int `toml:"home_gb"`
	WorkspaceGB int `toml:"workspace_gb"`
	// CPURequest and MemoryRequestMB are what the scheduler reserves for
	// each box (0 = 0.1 CPU and 256 MiB; never above the session's limits,
	// sessions.cpus and sessions.memory_mb).
	CPURequest      float64 `toml:"cpu_request"`
	MemoryRequestMB int     `toml:"memory_request_mb"`
	// Runtime is the kubernetes backend's runtime: a RuntimeClass of
	// the cluster (gVisor, Kata) for the pods, "" for the cluster's default.
	Runtime string `toml:"runtime"`
	// NodeSelector and Tolerations place the pods.
	NodeSelector map[string]string `toml:"node_selector"`
	Tolerations  []Toleration      `toml:"tolerations"`
	// UnsafeUnenforcedNetworkPolicy runs boxes on a cluster where paddock
	// cannot prove that NetworkPolicy is enforced: their pods are then as
	// isolated as the cluster's network makes them, nothing more.
	// ProjectRegistry is a repository (registry.example.com/team/paddock)
	// the cluster pulls from, where the Runner pushes the images of
	// project files ([image] of .paddock.toml), built on its host's
	// Docker, with the login docker login stored for its user; pods name
	// them by digest. "": a project file with [image] is refused on this
	// backend.
	ProjectRegistry               string `toml:"project_registry"`
	UnsafeUnenforcedNetworkPolicy bool   `toml:"unsafe_unenforced_network_policy"`
}

// Toleration is a pod toleration (the fields of Kubernetes' own).
type Toleration struct {
	Key      string `toml:"key"`
	Operator string `toml:"operator"` // "Equal" (default) or "Exists"
	Value    string `toml:"value"`
	Effect   string `toml:"effect"` // "", "NoSchedule", "PreferNoSchedule", "NoExecute"
}

var (
	// dnsLabel is a namespace's name (RFC 1123 label).
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// dnsSubdomain is a storage or runtime class's name.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	// labelKey is a label key: [prefix/]name.
	labelKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	// labelVal is a label value (may be empty).
	labelVal = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	// pinnedImage is an image named by digest.
	pinnedImage = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
)

// validate checks [kubernetes]; an empty image is refused only when the
// backend is used (the Runner says so then).
func (k *Kubernetes) validate() error {
	if k.Kubeconfig != "" && !strings.HasPrefix(k.Kubeconfig, "/") {
		return &Error{Key: "kubernetes.kubeconfig", Msg: fmt.Sprintf("%q must be an absolute path", k.Kubeconfig)}
	}
	if !dnsLabel.MatchString(k.Namespace) {
		return &Error{Key: "kubernetes.namespace", Msg: fmt.Sprintf("%q is not a namespace name (lower-case letters, digits, '-')", k.Namespace)}
	}
	switch k.ImagePullPolicy {
	case "", "IfNotPresent", "Always", "Never":
	default:
		return &Error{Key: "kubernetes.image_pull_policy", Msg: fmt.Sprintf("%q is not one of IfNotPresent, Always, Never", k.ImagePullPolicy)}
	}
	if k.Image != "" && k.ImagePullPolicy != "Never" && !pinnedImage.MatchString(k.Image) {
		return &Error{Key: "kubernetes.image", Msg: fmt.Sprintf("%q is not pinned by digest: name it repo@sha256:<digest> (paddock image build --push REPO prints it), or set image_pull_policy = \"Never\" for an image already on the nodes", k.Image)}
	}
	for _, c := range []struct{ key, v string }{{"kubernetes.storage_class", k.StorageClass}, {"kubernetes.runtime", k.Runtime}} {
		if c.v != "" && !dnsSubdomain.MatchString(c.v) {
			return &Error{Key: c.key, Msg: fmt.Sprintf("%q is not a Kubernetes object name", c.v)}
		}
	}
	for _, c := range []struct {
		key string
		v   int
	}{{"kubernetes.home_gb", k.HomeGB}, {"kubernetes.workspace_gb", k.WorkspaceGB}} {
		if c.v < 0 || c.v > 65536 {
			return &Error{Key: c.key, Msg: fmt.Sprintf("%d is outside 0 (default 10)..65536", c.v)}
		}
	}
	if k.CPURequest < 0 || k.CPURequest > 1024 {
		return &Error{Key: "kubernetes.cpu_request", Msg: fmt.Sprintf("%g is outside 0 (default 0.1)..1024", k.CPURequest)}
	}
	if k.MemoryRequestMB < 0 || k.MemoryRequestMB > 1<<20 {
		return &Error{Key: "kubernetes.memory_request_mb", Msg: fmt.Sprintf("%d is outside 0 (default 256)..1048576", k.MemoryRequestMB)}
	}
	for key, v := range k.NodeSelector {
		if !labelKey.MatchString(key) || !labelVal.MatchString(v) {
			return &Error{Key: "kubernetes.node_selector", Msg: fmt.Sprintf("%q = %q is not a label", key, v)}
		}
	}
	for i, t := range k.Tolerations {
		bad := func(msg string) error {
			return &Error{Key: "kubernetes.tolerations", Msg: fmt.Sprintf("toleration %d: %s", i+1, msg)}
		}
		if t.Key != "" && !labelKey.MatchString(t.Key) {
			return bad(fmt.Sprintf("key %q is not a label key", t.Key))
		}
		switch t.Operator {
		case "", "Equal":
			if t.Key == "" {
				return bad("operator Equal needs a key")
			}
		case "Exists":
			if t.Value != "" {
				return bad("operator Exists takes no value")
			}
		default:
			return bad(fmt.Sprintf("operator %q is not Equal or Exists", t.Operator))
		}
		if !labelVal.MatchString(t.Value) {
			return bad(fmt.Sprintf("value %q is not a label value", t.Value))
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			return bad(fmt.Sprintf("effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
		}
	}
	return nil
}
