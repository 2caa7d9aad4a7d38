package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Backend is the kubernetes backend.
type Backend struct {
	cfg  Config
	rest *rest.Config
	cs   kubernetes.Interface
	// enforced remembers the NetworkPolicy probe's verdict (policy.go).
	enforced policyVerdict
	// selfTests: Start runs the pod self-test (selftest.go); off only for
	// the fake clientset of the unit tests, which cannot exec.
	selfTests bool
}

var _ sandbox.Backend = (*Backend)(nil)

// New reaches the cluster with Config.Kubeconfig (or the in-cluster
// config) and checks that the namespace answers.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: cfg.Context}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: no cluster to reach (kubeconfig %q): %v; set kubernetes.kubeconfig in the Runner's config to a kubeconfig for your cluster (docs/BACKENDS.md), or run the Runner in a pod for the in-cluster config: %w", cfg.Kubeconfig, err, errdefs.ErrInvalid)
	}
	return NewFromREST(ctx, cfg, rc)
}

// NewFromREST is New with the client configuration given (tests, and a
// Runner that builds its own); Config.Kubeconfig and Context are ignored.
func NewFromREST(ctx context.Context, cfg Config, rc *rest.Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = "paddock"
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	b := &Backend{cfg: cfg, rest: rc, cs: cs, selfTests: true}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Pods(cfg.Namespace).List(pctx, metav1.ListOptions{Limit: 1, LabelSelector: b.ownerSelector()}); err != nil {
		return nil, mapErr(fmt.Sprintf("kubernetes backend: the API server at %s (namespace %s)", rc.Host, cfg.Namespace), err)
	}
	return b, nil
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements sandbox.Backend. Memory and CPU are the pod's
// limits; a pod has no pids limit of its own (podSpec).
// Runtimes are the cluster's RuntimeClasses where the Runner may list
// them (a cluster-scoped read that contrib/kubernetes/role.yaml's Role
// does not grant: contrib/kubernetes/runtimeclass-reader.yaml does).
func (b *Backend) Capabilities(ctx context.Context) sandbox.Capabilities {
	c := sandbox.Capabilities{Name: Name, NeedsDaemon: true, ReadOnlyRoot: true, MemoryLimit: true, CPULimit: true,
		SurvivesRunnerRestart: true, ProxyOnly: true, PodNetwork: true, StreamedClone: true}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if list, err := b.cs.NodeV1().RuntimeClasses().List(lctx, metav1.ListOptions{}); err == nil {
		c.Runtimes = make([]string, 0, len(list.Items))
		for _, rc := range list.Items {
			c.Runtimes = append(c.Runtimes, rc.Name)
		}
		slices.Sort(c.Runtimes)
	}
	return c
}

// runtimeClass resolves CreateOptions.Runtime against the cluster's
// RuntimeClasses (runtimes.Choose): a class that does not exist is
// refused before anything is made. Where the Runner may not read them,
// the word is taken as it is, and the pod's admission says.
func (b *Backend) runtimeClass(ctx context.Context, word string) (string, error) {
	if word == "" {
		return "", nil
	}
	return runtimes.Choose(Name, word, b.Capabilities(ctx).Runtimes, false)
}

// pidsNote is on every box: what the backend cannot enforce.
const pidsNote = "no pids limit per box on Kubernetes: the node's kubelet podPidsLimit applies to every pod"

func (b *Backend) ownerSelector() string {
	return labels.SelectorFromSet(labels.Set{sandbox.LabelManaged: "1", sandbox.LabelOwner: b.cfg.Owner}).String()
}

// mapErr wraps an API error in the errdefs sentinel it means.
func mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %v: %w", op, err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return fmt.Errorf("%s: %v: %w", op, err, errdefs.ErrConflict)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %v: %w", op, err, errdefs.ErrInvalid)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: %v (the Runner needs the Role of contrib/kubernetes/role.yaml in its namespace): %w", op, err, errdefs.ErrForbidden)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No answer from the API server at all.
		return fmt.Errorf("%s: %v: %w", op, err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// box is a box's record, checked to be this Runner's.
func (b *Backend) box(ctx context.Context, id string) (*networkingv1.NetworkPolicy, string, error) {
	np, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, "", mapErr("box "+id, err)
	}
	l := np.Labels
	session := l[sandbox.LabelSession]
	if l[sandbox.LabelManaged] != "1" || l[sandbox.LabelOwner] != b.cfg.Owner || l[sandbox.LabelKind] != string(sandbox.KindBox) ||
		sandbox.ValidSession(session) != nil || id != boxName(session) {
		return nil, "", fmt.Errorf("%s is not a box of this paddock: %w", id, errdefs.ErrNotFound)
	}
	return np, session, nil
}

// Create implements sandbox.Backend: the record (the deny-all policy), then
// the claims, which a kept volume may already hold. No pod yet.
func (b *Backend) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Box, error) {
	if err := sandbox.ValidSession(o.Session); err != nil {
		return sandbox.Box{}, err
	}
	// A clone's repository stays on the Runner's host: the pod gets its
	// history streamed into its workspace volume (StreamedClone).
	if err := refuseWorkspace(o); err != nil && !o.Clone {
		return sandbox.Box{}, err
	}
	image := o.Image
	if image == "" {
		image = b.cfg.Image
	}
	if image == "" {
		return sandbox.Box{}, fmt.Errorf("no image for the kubernetes backend: build one with `paddock image build`, push it to a registry the cluster pulls from, and name it by digest as kubernetes.image: %w", errdefs.ErrInvalid)
	}
	l := b.cfg.limits(o.Limits)
	rc, err := b.runtimeClass(ctx, o.Runtime)
	if err != nil {
		return sandbox.Box{}, err
	}
	np, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Create(ctx, b.record(o.Session, image, rc, l), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return sandbox.Box{}, fmt.Errorf("session %s already has a box: %w", o.Session, errdefs.ErrConflict)
	}
	if err != nil {
		return sandbox.Box{}, mapErr("create the box's network policy", err)
	}
	for _, c := range []struct {
		name string
		size int64
	}{{homeClaim(o.Session), b.cfg.HomeSize}, {wsClaim(o.Session), b.cfg.WorkspaceSize}} {
		if err := b.ensureClaim(ctx, o.Session, c.name, c.size); err != nil {
			_ = b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Delete(context.WithoutCancel(ctx), np.Name, metav1.DeleteOptions{})
			return sandbox.Box{}, err
		}
	}
	return sandbox.Box{ID: np.Name, Session: o.Session, Backend: Name, State: sandbox.StateCreated, Created: np.CreationTimestamp.UTC(),
		Volume: homeClaim(o.Session), Limits: l, Notes: []string{pidsNote}, Runtime: rc}, nil
}

// ensureClaim makes a claim, or keeps the session's existing one (a kept
// volume) if it is this Runner's.
func (b *Backend) ensureClaim(ctx context.Context, session, name string, size int64) error {
	pvcs := b.cs.CoreV1().PersistentVolumeClaims(b.cfg.Namespace)
	_, err := pvcs.Create(ctx, b.claim(session, name, size), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return mapErr("create claim "+name, err)
	}
	old, err := pvcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return mapErr("claim "+name, err)
	}
	if old.Labels[sandbox.LabelOwner] != b.cfg.Owner || old.Labels[sandbox.LabelSession] != session || old.DeletionTimestamp != nil {
		return fmt.Errorf("claim %s exists and is not this session's kept volume: %w", name, errdefs.ErrConflict)
	}
	return nil
}

// Start implements sandbox.Backend: a pod on the session's claims, once the
// cluster is known to enforce the box's policy (or the owner accepted that
// it may not), and a wait until it runs.
func (b *Backend) Start(ctx context.Context, id string) (sandbox.Box, error) {
	np, session, err := b.box(ctx, id)
	if err != nil {
		return sandbox.Box{}, err
	}
	if err := b.checkPolicyEnforced(ctx, np.Annotations[annImage]); err != nil {
		return sandbox.Box{}, err
	}
	var l sandbox.Limits
	if err := json.Unmarshal([]byte(np.Annotations[annLimits]), &l); err != nil {
		return sandbox.Box{}, fmt.Errorf("box %s: its record has no limits: %w", id, errdefs.ErrInvalid)
	}
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	pod, err := pods.Get(ctx, boxName(session), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return sandbox.Box{}, mapErr("box "+id, err)
	}
	if err == nil && ended(pod) {
		// Ended (evicted, its guest gone) or ending: a new pod on the
		// same claims.
		if err := b.deletePod(ctx, session, 0); err != nil {
			return sandbox.Box{}, err
		}
	}
	if err != nil || ended(pod) { // else running, or on its way: wait below
		if _, err := pods.Create(ctx, b.podSpec(session, np.Annotations[annImage], np.Annotations[annRuntime], l), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return sandbox.Box{}, mapErr("create the box's pod", err)
		}
	}
	if np.Annotations[annStarted] != "1" {
		patch := []byte(`{"metadata":{"annotations":{"` + annStarted + `":"1"}}}`)
		if _, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return sandbox.Box{}, mapErr("mark box "+id+" started", err)
		}
	}
	err = b.waitRunning(ctx, session)
	if err == nil && b.selfTests {
		err = b.selfTest(ctx, session)
	}
	if err != nil {
		// A pod that did not come up is not left to retry alone: the box
		// is stopped, its claims kept.
		_ = b.deletePod(context.WithoutCancel(ctx), session, 0)
		return sandbox.Box{}, err
	}
	return b.Inspect(ctx, id)
}

// deletePod deletes the session's pod and waits until it is gone, so that
// a new one can take its name and its claims. grace < 0 means the pod's own
// grace period.
func (b *Backend) deletePod(ctx context.Context, session string, grace int64) error {
	return b.deleteNamedPod(ctx, boxName(session), grace)
}

// deleteNamedPod deletes a pod and waits until it is gone.
func (b *Backend) deleteNamedPod(ctx context.Context, name string, grace int64) error {
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	opts := metav1.DeleteOptions{}
	if grace >= 0 {
		opts.GracePeriodSeconds = &grace
	}
	err := pods.Delete(ctx, name, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return mapErr("delete the box's pod", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(max(grace, 5))*time.Second+time.Minute)
	defer cancel()
	for {
		_, err := pods.Get(wctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if wctx.Err() != nil {
			return fmt.Errorf("pod %s is still there after its deletion: %w", name, errdefs.ErrUnavailable)
		}
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop implements sandbox.Backend: the pod goes, the claims and the record
// stay.
func (b *Backend) Stop(ctx context.Context, id string, o sandbox.StopOptions) error {
	_, session, err := b.box(ctx, id)
	if err != nil {
		return err
	}
	secs := int64(5)
	if o.Timeout > 0 {
		secs = int64((o.Timeout + time.Second - 1) / time.Second)
	}
	return b.deletePod(ctx, session, secs)
}

// Remove implements sandbox.Backend. The pod goes first, and its policy
// only once it is gone: a box never runs without its policy.
func (b *Backend) Remove(ctx context.Context, id string, o sandbox.RemoveOptions) error {
	_, session, err := b.box(ctx, id)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := b.deletePod(ctx, session, 1); err != nil {
		return err
	}
	if err := b.deleteObject(ctx, sandbox.KindBox, id); err != nil {
		return err
	}
	if o.KeepVolume {
		return nil
	}
	return errors.Join(b.deleteObject(ctx, sandbox.KindVolume, homeClaim(session)), b.deleteObject(ctx, sandbox.KindVolume, wsClaim(session)))
}

// deleteObject deletes a record or a claim; a missing one is no error.
func (b *Backend) deleteObject(ctx context.Context, kind sandbox.ObjectKind, name string) error {
	var err error
	switch kind {
	case sandbox.KindBox, sandbox.KindNetwork:
		err = b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	case sandbox.KindVolume:
		err = b.cs.CoreV1().PersistentVolumeClaims(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		return fmt.Errorf("object kind %q: %w", kind, errdefs.ErrInvalid)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return mapErr("delete "+name, err)
}

// Inspect implements sandbox.Backend. A box whose pod is gone (stopped,
// deleted or evicted from outside) or has ended is stopped; one that never
// had a pod is created.
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Box, error) {
	np, session, err := b.box(ctx, id)
	if err != nil {
		return sandbox.Box{}, err
	}
	bx := sandbox.Box{ID: id, Session: session, Backend: Name, State: sandbox.StateStopped, Created: np.CreationTimestamp.UTC(),
		Volume: homeClaim(session), Notes: []string{pidsNote}, Runtime: np.Annotations[annRuntime]}
	_ = json.Unmarshal([]byte(np.Annotations[annLimits]), &bx.Limits)
	pod, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, boxName(session), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if np.Annotations[annStarted] != "1" {
			bx.State = sandbox.StateCreated
		}
	case err != nil:
		return sandbox.Box{}, mapErr("box "+id, err)
	case running(pod):
		bx.State = sandbox.StateRunning
	}
	return bx, nil
}

// ended: the pod will never run its guest again.
func ended(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// running: the pod's guest runs and the pod is not being deleted.
func running(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == containerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// List implements sandbox.Backend: records (boxes), pods (processes) and
// claims (volumes) of this Runner. Objects already being deleted are left
// out: nothing more can be done to them.
func (b *Backend) List(ctx context.Context) ([]sandbox.Object, error) {
	lo := metav1.ListOptions{LabelSelector: b.ownerSelector()}
	var out []sandbox.Object
	add := func(kind sandbox.ObjectKind, m metav1.ObjectMeta) {
		if m.DeletionTimestamp == nil {
			out = append(out, sandbox.Object{Kind: kind, ID: m.Name, Session: m.Labels[sandbox.LabelSession], Labels: m.Labels})
		}
	}
	nps, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).List(ctx, lo)
	if err != nil {
		return nil, mapErr("list boxes", err)
	}
	for _, np := range nps.Items {
		kind := sandbox.KindBox // else the NetworkPolicy probe's (policy.go)
		if np.Labels[sandbox.LabelKind] != string(kind) {
			kind = sandbox.KindNetwork
		}
		add(kind, np.ObjectMeta)
	}
	pods, err := b.cs.CoreV1().Pods(b.cfg.Namespace).List(ctx, lo)
	if err != nil {
		return nil, mapErr("list pods", err)
	}
	for _, p := range pods.Items {
		add(sandbox.KindProcess, p.ObjectMeta)
	}
	pvcs, err := b.cs.CoreV1().PersistentVolumeClaims(b.cfg.Namespace).List(ctx, lo)
	if err != nil {
		return nil, mapErr("list claims", err)
	}
	for _, c := range pvcs.Items {
		add(sandbox.KindVolume, c.ObjectMeta)
	}
	return out, nil
}

// RemoveObject implements sandbox.Backend (for prune). A box's record goes
// only after its pod.
func (b *Backend) RemoveObject(ctx context.Context, o sandbox.Object) error {
	session := o.Labels[sandbox.LabelSession]
	if o.Labels[sandbox.LabelOwner] != b.cfg.Owner || sandbox.ValidSession(session) != nil {
		return fmt.Errorf("object %s is not this paddock's: %w", o.ID, errdefs.ErrInvalid)
	}
	switch o.Kind {
	case sandbox.KindBox:
		if o.ID != boxName(session) {
			return fmt.Errorf("object %s is not session %s's box: %w", o.ID, session, errdefs.ErrInvalid)
		}
		if err := b.deletePod(ctx, session, 1); err != nil {
			return err
		}
	case sandbox.KindProcess:
		return b.deleteNamedPod(ctx, o.ID, 1)
	}
	return b.deleteObject(ctx, o.Kind, o.ID)
}
