package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

func testBackend(t *testing.T, c Config) *Backend {
	t.Helper()
	c, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return &Backend{cfg: c}
}

// TestSpecHardened checks the one pod builder, field by field.
func TestSpecHardened(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		runtime string
	}{
		{"defaults", Config{Namespace: "ns", Owner: "o1"}, ""},
		{"placed", Config{Namespace: "ns", Owner: "o1", ImagePullPolicy: corev1.PullNever,
			NodeSelector: map[string]string{"pool": "boxes"}, Tolerations: []corev1.Toleration{{Key: "boxes", Operator: corev1.TolerationOpExists}}}, "gvisor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testBackend(t, c.cfg)
			l := b.cfg.limits(sandbox.Limits{MemoryBytes: 1 << 30, CPUs: 1.5, Pids: 100})
			p := b.podSpec("s1", "img@sha256:ab", c.runtime, l)
			s := p.Spec
			checkLabels(t, p.Labels, "s1", sandbox.KindProcess)
			for _, k := range []string{sandbox.LabelManaged, sandbox.LabelOwner, sandbox.LabelSession} {
				if b.selector("s1")[k] != p.Labels[k] {
					t.Errorf("the policy's selector misses the pod on %s", k)
				}
			}
			psc := s.SecurityContext
			for name, bad := range map[string]bool{
				"host namespaces":              s.HostNetwork || s.HostPID || s.HostIPC || s.HostUsers != nil,
				"shared process namespace":     s.ShareProcessNamespace == nil || *s.ShareProcessNamespace,
				"service account token":        s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken,
				"service links":                s.EnableServiceLinks == nil || *s.EnableServiceLinks,
				"a resolver":                   s.DNSPolicy != corev1.DNSNone || s.DNSConfig == nil || len(s.DNSConfig.Nameservers) != 1 || s.DNSConfig.Nameservers[0] != "127.0.0.1",
				"restarts":                     s.RestartPolicy != corev1.RestartPolicyNever,
				"pod runs as root":             psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != sandbox.BoxUID || *psc.RunAsGroup != sandbox.BoxUID,
				"claims not the box user's":    psc.FSGroup == nil || *psc.FSGroup != sandbox.BoxUID,
				"pod seccomp":                  psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault,
				"supplementary groups":         len(psc.SupplementalGroups) != 0 || len(psc.Sysctls) != 0,
				"one container":                len(s.Containers) != 1 || len(s.InitContainers) != 0 || len(s.EphemeralContainers) != 0,
				"node name":                    s.NodeName != "",
				"runtime class":                (c.runtime == "") != (s.RuntimeClassName == nil) || s.RuntimeClassName != nil && *s.RuntimeClassName != c.runtime,
				"node selector, tolerations":   len(s.NodeSelector) != len(c.cfg.NodeSelector) || len(s.Tolerations) != len(c.cfg.Tolerations),
				"a grace period over a minute": s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds > 60,
			} {
				if bad {
					t.Errorf("pod: %s", name)
				}
			}
			ct := s.Containers[0]
			sc := ct.SecurityContext
			want := c.cfg.ImagePullPolicy
			if want == "" {
				want = corev1.PullIfNotPresent
			}
			for name, bad := range map[string]bool{
				"image":                     ct.Image != "img@sha256:ab" || ct.ImagePullPolicy != want,
				"guest without setid guard": len(ct.Command) != 5 || ct.Command[0] != GuestPath || ct.Command[1] != "guest" || ct.Command[2] != "--setid-guard" || ct.Command[4] != sandbox.GuestSocket || len(ct.Args) != 0,
				"runs as root":              sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != sandbox.BoxUID || *sc.RunAsGroup != sandbox.BoxUID,
				"privileged":                sc.Privileged == nil || *sc.Privileged,
				"privilege escalation":      sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
				"writable root":             sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
				"capabilities":              sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL",
				"seccomp":                   sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault,
				"unmasked /proc":            sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount,
				"ports":                     len(ct.Ports) != 0,
				"tty or stdin":              ct.TTY || ct.Stdin,
				"memory limit":              ct.Resources.Limits.Memory().Value() != 1<<30,
				"cpu limit":                 ct.Resources.Limits.Cpu().MilliValue() != 1500,
				"requests above limits":     ct.Resources.Requests.Cpu().Cmp(*ct.Resources.Limits.Cpu()) > 0 || ct.Resources.Requests.Memory().Cmp(*ct.Resources.Limits.Memory()) > 0,
				"workdir":                   ct.WorkingDir != sandbox.WorkspaceDir,
			} {
				if bad {
					t.Errorf("container: %s", name)
				}
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range ct.VolumeMounts {
				mounts[m.MountPath] = m
			}
			vols := map[string]corev1.Volume{}
			for _, v := range s.Volumes {
				if v.HostPath != nil {
					t.Errorf("hostPath volume %+v", v)
				}
				vols[v.Name] = v
			}
			if len(mounts) != 5 || len(vols) != 5 {
				t.Errorf("mounts %+v volumes %+v", ct.VolumeMounts, s.Volumes)
			}
			claimAt := func(path, claim string) {
				if v := vols[mounts[path].Name]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim || v.PersistentVolumeClaim.ReadOnly || mounts[path].SubPath != "" {
					t.Errorf("%s is not the claim %s: %+v", path, claim, v)
				}
			}
			claimAt(sandbox.HomeDir, homeClaim("s1"))
			claimAt(sandbox.WorkspaceDir, wsClaim("s1"))
			for _, path := range []string{"/tmp", "/run/paddock"} {
				v := vols[mounts[path].Name]
				if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
					t.Errorf("%s is not a bounded tmpfs: %+v", path, v)
				}
			}
			if m := mounts["/etc/resolv.conf"]; !m.ReadOnly || vols[m.Name].DownwardAPI == nil || !strings.Contains(vols[m.Name].DownwardAPI.Items[0].FieldRef.FieldPath, annEmpty) {
				t.Errorf("resolv.conf is not the empty file: %+v", m)
			}
		})
	}
}

func checkLabels(t *testing.T, l map[string]string, session string, kind sandbox.ObjectKind) {
	t.Helper()
	if l[sandbox.LabelManaged] != "1" || l[sandbox.LabelSession] != session || l[sandbox.LabelKind] != string(kind) || l[sandbox.LabelOwner] != "o1" {
		t.Errorf("labels %v", l)
	}
}

// TestPolicyDeniesAll: the record selects the session's pods and allows
// nothing either way; the claims are labelled and sized.
func TestPolicyDeniesAll(t *testing.T) {
	b := testBackend(t, Config{Namespace: "ns", Owner: "o1", StorageClass: "fast"})
	np := b.record("s1", "img", "", sandbox.Limits{MemoryBytes: 1})
	checkLabels(t, np.Labels, "s1", sandbox.KindBox)
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 ||
		np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || np.Spec.PolicyTypes[1] != networkingv1.PolicyTypeEgress {
		t.Fatalf("the policy allows something: %+v", np.Spec)
	}
	if len(np.Spec.PodSelector.MatchExpressions) != 0 || len(np.Spec.PodSelector.MatchLabels) != 3 || np.Spec.PodSelector.MatchLabels[sandbox.LabelSession] != "s1" {
		t.Fatalf("selector %+v", np.Spec.PodSelector)
	}
	for _, c := range []*corev1.PersistentVolumeClaim{b.claim("s1", homeClaim("s1"), b.cfg.HomeSize), b.claim("s1", wsClaim("s1"), b.cfg.WorkspaceSize)} {
		checkLabels(t, c.Labels, "s1", sandbox.KindVolume)
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "fast" || c.Spec.Resources.Requests.Storage().Value() != DefaultVolumeSize {
			t.Errorf("claim %+v", c.Spec)
		}
	}
	if c := testBackend(t, Config{Namespace: "ns", Owner: "o1"}).claim("s1", "x", 1); c.Spec.StorageClassName != nil {
		t.Errorf("no class configured, yet the claim names one: %v", *c.Spec.StorageClassName)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{Owner: "o1"},
		{Namespace: "ns"},
		{Namespace: "ns", Owner: "has space"},
		{Namespace: "ns", Owner: strings.Repeat("a", 64)},
		{Namespace: "ns", Owner: "o1", ImagePullPolicy: "Sometimes"},
		{Namespace: "ns", Owner: "o1", TmpSize: -1},
	} {
		if _, err := c.withDefaults(); !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestHostWorkspaceRefused(t *testing.T) {
	err := refuseWorkspace(sandbox.CreateOptions{Session: "s1", Workspace: "/home/me/src"})
	if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "no host workspace") {
		t.Fatalf("a host workspace: %v", err)
	}
	if err := refuseWorkspace(sandbox.CreateOptions{Session: "s1"}); err != nil {
		t.Fatal(err)
	}
}

// TestPullPolicy: a project's image pinned by digest is pulled if not
// present even where the configured image is never pulled (it is on the
// nodes; a project's, pushed by the Runner, is not); any other image
// keeps the configured policy.
func TestPullPolicy(t *testing.T) {
	b := testBackend(t, Config{Namespace: "ns", Owner: "o1", Image: "paddock/box:claude-1", ImagePullPolicy: corev1.PullNever})
	for image, want := range map[string]corev1.PullPolicy{
		"paddock/box:claude-1":               corev1.PullNever,
		"reg.example/p@sha256:" + hex64('a'): corev1.PullIfNotPresent,
		"reg.example/p:floating":             corev1.PullNever,
	} {
		if got := b.podSpec("s1", image, "", b.cfg.limits(sandbox.Limits{})).Spec.Containers[0].ImagePullPolicy; got != want {
			t.Errorf("%s: %s, want %s", image, got, want)
		}
	}
	b = testBackend(t, Config{Namespace: "ns", Owner: "o1", Image: "r/b@sha256:" + hex64('b'), ImagePullPolicy: corev1.PullAlways})
	if got := b.podSpec("s1", "reg.example/p@sha256:"+hex64('a'), "", b.cfg.limits(sandbox.Limits{})).Spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("with Always configured: %s", got)
	}
}

func hex64(c byte) string { return strings.Repeat(string(c), 64) }
