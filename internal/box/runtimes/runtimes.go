// Package runtimes names the runtimes a box can run on, one word for every
// backend (docs/BACKENDS.md "Runtimes"), and probes what the host offers.
//
// A runtime word is what the owner types (paddock run --runtime,
// sessions.runtime): the name the backend's engine knows it by (a Docker
// daemon's runtime, a Kubernetes RuntimeClass, the local backend's
// sandbox program), or one of the family names "gvisor" and "kata",
// which Resolve maps to whichever name of that family the engine has.
package runtimes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// GVisorVersion is the gVisor build paddock tests and recommends: a
// pseudo-version of gvisor.dev/gvisor's go branch from the Go module
// proxy (scripts/gvisor-bin.sh builds it; the module has no tags).
const GVisorVersion = "v0.0.0-20260905035102-160fafc42237"

// RunscPath is where scripts/gvisor-bin.sh puts the pinned runsc.
func RunscPath() string {
	return filepath.Join("/var/cache/paddock/gvisor", GVisorVersion, "runsc")
}

// Kind is what a runtime puts between a box and the host's kernel.
type Kind string

// Kinds.
const (
	// Shared: namespaces on the host's kernel (bubblewrap, runc, crun).
	Shared Kind = "shared-kernel"
	// GVisor: gVisor's kernel in user space (runsc); the host's kernel
	// sees only the sentry's narrow set of system calls.
	GVisor Kind = "gvisor"
	// VM: a virtual machine per box (Kata Containers), needing KVM.
	VM Kind = "vm"
	// Unknown: a runtime paddock does not know; the engine's word for it.
	Unknown Kind = "unknown"
)

// Names of the local backend's sandbox programs.
const (
	Bwrap = "bwrap"
	Runsc = "runsc"
)

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Valid checks a runtime word: lowercase letters, digits, '.', '_' and
// '-', as Docker and Kubernetes name them.
func Valid(word string) error {
	if !validName.MatchString(word) {
		return fmt.Errorf("%q is not a runtime name (lowercase letters, digits, '.', '_' and '-', e.g. runsc)", word)
	}
	return nil
}

// KindOf classifies a runtime by its name, or by the program behind it
// where the engine says (a Docker runtime's path).
func KindOf(name, path string) Kind {
	for _, s := range []string{name, filepath.Base(path)} {
		s = strings.ToLower(s)
		switch {
		case s == "":
		case strings.Contains(s, "runsc"), strings.Contains(s, "gvisor"):
			return GVisor
		case strings.Contains(s, "kata"):
			return VM
		case s == Bwrap, s == "runc", s == "crun", s == "youki", strings.HasPrefix(s, "io.containerd.runc"):
			return Shared
		}
	}
	return Unknown
}

// family lists, for a family word, the names engines commonly give it,
// most common first.
var family = map[string][]string{
	"gvisor": {"gvisor", "runsc"},
	"runsc":  {"runsc", "gvisor"},
	"kata":   {"kata", "kata-runtime", "kata-qemu", "kata-clh", "kata-fc", "io.containerd.kata.v2"},
}

// Resolve is the name among offered that word means: word itself, or for
// a family word ("gvisor", "runsc", "kata") the first of its family the
// engine offers.
func Resolve(word string, offered []string) (string, bool) {
	if slices.Contains(offered, word) {
		return word, true
	}
	for _, n := range family[word] {
		if slices.Contains(offered, n) {
			return n, true
		}
	}
	return "", false
}

// NeedsKVM: the word names a VM runtime, which cannot start a box on a
// host without hardware virtualisation.
func NeedsKVM(word string) bool { return KindOf(word, "") == VM }

// KVM says whether this host can run hardware-virtualised VMs, and if
// not, why, in words for an error.
func KVM() (ok bool, why string) {
	return kvmFrom("/dev/kvm", "/proc/cpuinfo")
}

func kvmFrom(dev, cpuinfo string) (bool, string) {
	if _, err := os.Stat(dev); err != nil {
		return false, "this host has no " + dev + " (no KVM: a cloud VM without nested virtualisation, or the kvm module not loaded)"
	}
	f, err := os.Open(cpuinfo)
	if err != nil {
		return false, "cannot read " + cpuinfo + ": " + err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, fl := range strings.Fields(v) {
			if fl == "vmx" || fl == "svm" {
				return true, ""
			}
		}
		break
	}
	return false, "this host has " + dev + " but its CPU flags show neither vmx nor svm: a paravirtual KVM (such as PVM) that Kata's hypervisors cannot use"
}

// Refusal is the message for a runtime word the backend's engine does not
// offer: what it offers, and how to add one.
func Refusal(backend, word string, offered []string) string {
	have := "none that paddock can list"
	if len(offered) > 0 {
		have = strings.Join(offered, ", ")
	}
	msg := fmt.Sprintf("the %s backend has no runtime %q (it offers: %s); ", backend, word, have)
	kind := KindOf(word, "")
	switch backend {
	case "local":
		if kind == GVisor {
			return msg + "it runs gVisor boxes with runsc " + GVisorVersion + " from " + RunscPath() + ", which is not there: `sudo make deps GVISOR=1` builds it (or set local.runsc to a runsc of your own)"
		}
		return msg + "the local backend runs boxes with bwrap (bubblewrap) or, once built, runsc (gVisor); for a VM per box use the docker or kubernetes backend on a host with KVM"
	case "docker":
		if kind == GVisor {
			msg += "`sudo make deps GVISOR=1` builds runsc " + GVisorVersion + " and registers it; or "
		}
		return msg + fmt.Sprintf(`register it with the daemon: add to /etc/docker/daemon.json {"runtimes": {%s}} and reload dockerd (kill -HUP its pid, or systemctl reload docker); docker info lists what it has`, DockerEntry(word))
	case "kubernetes":
		handler := word
		if kind == GVisor {
			handler = "runsc"
		}
		return msg + fmt.Sprintf("a cluster admin makes it: kubectl apply -f - <<<'{\"apiVersion\":\"node.k8s.io/v1\",\"kind\":\"RuntimeClass\",\"metadata\":{\"name\":%q},\"handler\":%q}', with the %s handler configured in each node's containerd", word, handler, handler)
	}
	return msg + "paddock run --runtime names one the backend offers"
}

// GVisorArgs are the arguments paddock's gVisor runtime is registered
// with. --directfs=false keeps the box's file operations in gVisor's
// gofer, whose mount namespace holds the read-only guards paddock mounts
// inside a host workspace (wsmount): with directfs the sentry works from
// descriptors in a namespace without them, where the host kernel lets it
// rename a guarded directory (.git, .vscode, …) away on the host or
// remove an empty one, and the box could then write a new one in its
// place. It also keeps the sentry itself from any host file.
var GVisorArgs = []string{"--directfs=false"}

// GVisorPids is the host's task limit for a gVisor box whose processes
// are limited to pids: gVisor enforces no limit of its own inside (the
// OCI limit goes to the host's cgroup, which counts the sentry's and the
// gofer's threads, about 33 idle, and a stub process with its thread per
// process of the box), so the box's pids are counted twice, plus 64. A
// box that reaches it ends whole (the sentry cannot make a thread), where
// a shared-kernel box refuses the one fork: docs/SECURITY.md.
func GVisorPids(pids int64) int64 {
	if pids <= 0 {
		return pids
	}
	return 2*pids + 64
}

// DockerEntry is the /etc/docker/daemon.json "runtimes" member that
// registers name: gVisor's with RunscPath and GVisorArgs, Kata's as its
// containerd shim.
func DockerEntry(name string) string { return dockerEntry(name, KindOf(name, "")) }

func dockerEntry(name string, kind Kind) string {
	if kind == VM { // Kata 2 and 3 ship a containerd shim, not an OCI runtime binary (Docker 23 or later)
		return fmt.Sprintf(`%q: {"runtimeType": "io.containerd.kata.v2"}`, name)
	}
	if kind != GVisor {
		return fmt.Sprintf(`%q: {"path": %q}`, name, "/usr/local/bin/"+name)
	}
	args := make([]string, len(GVisorArgs))
	for i, a := range GVisorArgs {
		args[i] = strconv.Quote(a)
	}
	return fmt.Sprintf(`%q: {"path": %q, "runtimeArgs": [%s]}`, name, RunscPath(), strings.Join(args, ", "))
}

// CheckGVisorArgs refuses a gVisor runtime registered without GVisorArgs
// (args: what the engine passes it) for a box that binds a host
// workspace, with the registration to use instead. Errors wrap
// errdefs.ErrInvalid.
func CheckGVisorArgs(name, path string, args []string) error {
	if KindOf(name, path) != GVisor {
		return nil
	}
	for _, want := range GVisorArgs {
		if !slices.Contains(args, want) && !slices.Contains(args, "-"+strings.TrimPrefix(want, "--")) {
			return fmt.Errorf("runtime %q is registered without %s, which a box with a host workspace needs under gVisor (without it the box could rename the read-only guards of .git and the editors' folders away on the host): register it as {\"runtimes\": {%s}} in /etc/docker/daemon.json and reload dockerd, or leave out --workspace (or use --clone): %w",
				name, want, dockerEntry(name, GVisor), errdefs.ErrInvalid)
		}
	}
	return nil
}

// Choose resolves word among the runtimes a backend offers (nil: the
// engine cannot be asked, and word is taken as it is) and refuses, with
// Refusal's words, one the engine lacks, or a VM runtime on a host
// without KVM (hostKVM: the engine runs on this host). "" chooses the
// backend's default. Errors wrap errdefs.ErrInvalid.
func Choose(backend, word string, offered []string, hostKVM bool) (string, error) {
	if word == "" {
		return "", nil
	}
	if err := Valid(word); err != nil {
		return "", fmt.Errorf("%v: %w", err, errdefs.ErrInvalid)
	}
	if hostKVM && NeedsKVM(word) { // no KVM is the first thing to say
		if ok, why := KVM(); !ok {
			return "", fmt.Errorf("runtime %q runs each box in a virtual machine, and %s; use runsc (gVisor), which needs no KVM: %w", word, why, errdefs.ErrInvalid)
		}
	}
	name := word
	if offered != nil {
		var ok bool
		if name, ok = Resolve(word, offered); !ok {
			return "", fmt.Errorf("%s: %w", Refusal(backend, word, offered), errdefs.ErrInvalid)
		}
	}
	return name, nil
}
