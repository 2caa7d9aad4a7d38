package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// A cluster enforces NetworkPolicy only if it runs a policy engine (a CNI
// such as Calico or Cilium); the API server takes policies either way, and
// nothing says whether they are obeyed. So the backend proves it, once per
// Backend, before its first box starts: a canary pod listens, and two
// prober pods try to reach it. One is selected by a policy that allows
// exactly that connection (and the canary's by one that admits it), the
// other by a deny-all policy like every box's. Enforced means: the allowed
// prober reached the canary and the denied one did not. A cluster whose
// pods reach nothing at all either way (the test cluster: its CNI isolates
// every pod) does not show enforcement, and is refused as well, unless the
// owner set UnsafeUnenforcedNetworkPolicy.

// policyVerdict is the probe's verdict, once known.
type policyVerdict struct {
	mu   sync.Mutex
	done bool
	err  error
}

// The probe's pods exit with these codes.
const (
	probeReached = 0
	probeBlocked = 3
)

// probeSession labels the probe's objects: no session owns it, so a probe
// cut short is pruned like any leftover.
const probeSession = "netpolicy-probe"

// checkPolicyEnforced refuses to start boxes on a cluster that is not shown
// to enforce NetworkPolicy, unless the owner set
// UnsafeUnenforcedNetworkPolicy. The verdict is kept; an error of the probe
// itself (the API server, a pod that would not run) is not, and the next
// start probes again.
func (b *Backend) checkPolicyEnforced(ctx context.Context, image string) error {
	if b.cfg.UnsafeUnenforcedNetworkPolicy {
		return nil
	}
	v := &b.enforced
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done {
		return v.err
	}
	allowed, denied, err := b.probePolicy(ctx, image)
	if err != nil {
		return fmt.Errorf("kubernetes backend: probing whether the cluster enforces NetworkPolicy: %w", err)
	}
	v.done, v.err = true, policyDecision(allowed, denied)
	return v.err
}

// policyDecision is the verdict on what the probers reached. Pure.
func policyDecision(allowedReached, deniedReached bool) error {
	const what = "; a box could reach the network. Install a policy engine in the cluster's network (Calico, Cilium, …), or accept the risk with kubernetes.unsafe_unenforced_network_policy: true"
	switch {
	case allowedReached && !deniedReached:
		return nil
	case deniedReached:
		return fmt.Errorf("the cluster does not enforce NetworkPolicy: a pod whose policy denies all egress reached another pod%s: %w", what, errdefs.ErrForbidden)
	default:
		return fmt.Errorf("the cluster does not show that it enforces NetworkPolicy: its pods reach nothing even where a policy allows it, so enforcement cannot be told from a network that isolates pods by itself%s: %w", what, errdefs.ErrForbidden)
	}
}

// probeName names the probe's objects of this Runner.
func (b *Backend) probeName(role string) string { return "paddock-" + probeSession + "-" + role }

// probePolicy runs the probe and reports whether each prober reached the
// canary. Its objects are deleted, pods first, whatever happens.
func (b *Backend) probePolicy(ctx context.Context, image string) (allowedReached, deniedReached bool, err error) {
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	nps := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace)
	roles := []string{"canary", "allowed", "denied"}
	cleanup := func() {
		cctx := context.WithoutCancel(ctx)
		for _, r := range roles {
			_ = b.deleteNamedPod(cctx, b.probeName(r), 0)
		}
		for _, r := range []string{"allow", "deny"} {
			_ = nps.Delete(cctx, b.probeName(r), metav1.DeleteOptions{})
		}
	}
	cleanup() // a probe cut short before
	defer cleanup()
	for _, np := range b.probePolicies() {
		if _, err := nps.Create(ctx, np, metav1.CreateOptions{}); err != nil {
			return false, false, mapErr("create probe policy", err)
		}
	}
	listen := `use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalPort => 8080, Listen => 8, ReuseAddr => 1) or die "listen: $!"; while (my $c = $s->accept) { print $c "ok\n"; close $c }`
	if _, err := pods.Create(ctx, b.probePod("canary", image, listen), metav1.CreateOptions{}); err != nil {
		return false, false, mapErr("create probe pod", err)
	}
	var ip string
	if err := b.waitPod(ctx, b.probeName("canary"), func(p *corev1.Pod) bool { ip = p.Status.PodIP; return running(p) && ip != "" }); err != nil {
		return false, false, err
	}
	try := fmt.Sprintf(`use IO::Socket::INET; exit(IO::Socket::INET->new(PeerAddr => "%s:8080", Timeout => 5) ? %d : %d)`, ip, probeReached, probeBlocked)
	reached := map[string]bool{}
	for _, r := range []string{"allowed", "denied"} {
		if _, err := pods.Create(ctx, b.probePod(r, image, try), metav1.CreateOptions{}); err != nil {
			return false, false, mapErr("create probe pod", err)
		}
	}
	for _, r := range []string{"allowed", "denied"} {
		code := -1
		if err := b.waitPod(ctx, b.probeName(r), func(p *corev1.Pod) bool {
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil {
					code = int(t.ExitCode)
					return true
				}
			}
			return false
		}); err != nil {
			return false, false, err
		}
		if code != probeReached && code != probeBlocked {
			return false, false, fmt.Errorf("probe pod %s exited %d: %w", r, code, errdefs.ErrUnavailable)
		}
		reached[r] = code == probeReached
	}
	return reached["allowed"], reached["denied"], nil
}

// probePolicies: the allowed prober may reach the canary's port and the
// canary admits it; the denied prober, like a box, reaches nothing.
func (b *Backend) probePolicies() []*networkingv1.NetworkPolicy {
	sel := func(role string) metav1.LabelSelector {
		l := b.selector(probeSession)
		l[labelProbe] = role
		return metav1.LabelSelector{MatchLabels: l}
	}
	port := intstr.FromInt32(8080)
	tcp := corev1.ProtocolTCP
	allow := b.record(probeSession, "", "", sandbox.Limits{})
	allow.Name, allow.Annotations, allow.Labels = b.probeName("allow"), nil, b.labels(probeSession, sandbox.KindNetwork)
	allow.Spec = networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: labelProbe, Operator: metav1.LabelSelectorOpIn, Values: []string{"allowed", "canary"}},
			{Key: sandbox.LabelOwner, Operator: metav1.LabelSelectorOpIn, Values: []string{b.cfg.Owner}},
		}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: ptr(sel("canary"))}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: ptr(sel("allowed"))}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		}},
	}
	deny := b.record(probeSession, "", "", sandbox.Limits{})
	deny.Name, deny.Annotations, deny.Labels = b.probeName("deny"), nil, b.labels(probeSession, sandbox.KindNetwork)
	deny.Spec.PodSelector = sel("denied")
	return []*networkingv1.NetworkPolicy{allow, deny}
}

// labelProbe marks the probe's pods with their role.
const labelProbe = "paddock.probe"

// probePod is a pod of the box image running perl, hardened as a box is,
// with no volume.
func (b *Backend) probePod(role, image, script string) *corev1.Pod {
	p := b.podSpec(probeSession, image, "", b.cfg.limits(sandbox.Limits{MemoryBytes: 64 << 20, CPUs: 0.2}))
	p.Name = b.probeName(role)
	p.Labels[labelProbe] = role
	c := &p.Spec.Containers[0]
	c.Command = []string{"/usr/bin/perl", "-e", script}
	c.WorkingDir, c.VolumeMounts, p.Spec.Volumes = "/", nil, nil
	return p
}

// waitPod polls a pod until done says so, a minute at most.
func (b *Backend) waitPod(ctx context.Context, name string, done func(*corev1.Pod) bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last *corev1.Pod
	for {
		p, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if done(p) {
				return nil
			}
			if why, fatal := podTrouble(p); fatal && !ended(p) {
				return fmt.Errorf("probe pod %s: %s: %w", name, why, errdefs.ErrUnavailable)
			}
		} else if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return mapErr("probe pod "+name, err)
		}
		select {
		case <-ctx.Done():
			why, _ := podTrouble(last)
			return fmt.Errorf("probe pod %s did not finish: %s: %w", name, why, errdefs.ErrUnavailable)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
