package runtimes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// TestChoose: a family word finds the engine's name for it; a name the
// engine lacks is refused with what it offers and how to add one.
func TestChoose(t *testing.T) {
	for _, c := range []struct {
		backend, word string
		offered       []string
		want          string
		refusal       []string
	}{
		{"docker", "", []string{"runc"}, "", nil},
		{"docker", "runc", []string{"runc", "runsc"}, "runc", nil},
		{"docker", "gvisor", []string{"runc", "runsc"}, "runsc", nil},
		{"kubernetes", "runsc", []string{"gvisor"}, "gvisor", nil},
		{"kubernetes", "anything", nil, "anything", nil}, // the engine cannot be asked: it decides
		{"docker", "runsc", []string{"runc"}, "", []string{`no runtime "runsc"`, "offers: runc", "daemon.json", RunscPath(), `"runtimeArgs": ["--directfs=false"]`, "make deps GVISOR=1"}},
		{"kubernetes", "gvisor", []string{}, "", []string{"offers: none", "RuntimeClass", `"handler":"runsc"`}},
		{"local", "gvisor", []string{"bwrap", "runsc"}, "runsc", nil},
		{"local", "runsc", []string{"bwrap"}, "", []string{"offers: bwrap", RunscPath(), "which is not there", "make deps GVISOR=1", "local.runsc"}},
		{"docker", "Bad Name", []string{"runc"}, "", []string{"not a runtime name"}},
		{"docker", "kata", []string{"runc"}, "", []string{`"kata": {"runtimeType": "io.containerd.kata.v2"}`, "daemon.json"}},
	} {
		got, err := Choose(c.backend, c.word, c.offered, false)
		if c.refusal == nil {
			if err != nil || got != c.want {
				t.Errorf("%s %q in %v: %q, %v; want %q", c.backend, c.word, c.offered, got, err, c.want)
			}
			continue
		}
		if !errdefs.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s %q in %v: %q, %v; want a refusal", c.backend, c.word, c.offered, got, err)
			continue
		}
		for _, w := range c.refusal {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: the refusal lacks %q: %v", c.backend, c.word, w, err)
			}
		}
	}
}

// TestKindOf classifies engines' names and programs.
func TestKindOf(t *testing.T) {
	for name, want := range map[[2]string]Kind{
		{"runc", ""}: Shared, {"bwrap", ""}: Shared, {"io.containerd.runc.v2", ""}: Shared,
		{"runsc", ""}: GVisor, {"gvisor", ""}: GVisor, {"sandboxed", "/opt/gvisor/runsc"}: GVisor,
		{"kata-qemu", ""}: VM, {"io.containerd.kata.v2", ""}: VM, {"mystery", "/usr/bin/mystery"}: Unknown,
	} {
		if got := KindOf(name[0], name[1]); got != want {
			t.Errorf("KindOf(%q, %q) = %s, want %s", name[0], name[1], got, want)
		}
	}
}

// TestKVMProbe: no /dev/kvm, a /dev/kvm without vmx or svm (PVM, as on
// these machines), and a CPU with vmx.
func TestKVMProbe(t *testing.T) {
	dir := t.TempDir()
	dev, cpu := filepath.Join(dir, "kvm"), filepath.Join(dir, "cpuinfo")
	if ok, why := kvmFrom(dev, cpu); ok || !strings.Contains(why, "no "+dev) {
		t.Fatalf("no device: %v %q", ok, why)
	}
	os.WriteFile(dev, nil, 0o600)
	os.WriteFile(cpu, []byte("processor\t: 0\nflags\t\t: fpu sse2 hypervisor\n"), 0o600)
	if ok, why := kvmFrom(dev, cpu); ok || !strings.Contains(why, "neither vmx nor svm") {
		t.Fatalf("no vmx: %v %q", ok, why)
	}
	os.WriteFile(cpu, []byte("processor\t: 0\nflags\t\t: fpu vmx sse2\n"), 0o600)
	if ok, why := kvmFrom(dev, cpu); !ok {
		t.Fatalf("vmx: %v %q", ok, why)
	}
	if !NeedsKVM("kata") || NeedsKVM("runsc") {
		t.Fatal("NeedsKVM")
	}
}

// TestKataWithoutKVM: on a host without KVM (these machines), a VM
// runtime is refused for that reason first, whatever the engine has.
func TestKataWithoutKVM(t *testing.T) {
	if ok, _ := KVM(); ok {
		t.Skip("this host has KVM")
	}
	for _, offered := range [][]string{{"runc"}, {"runc", "kata"}} {
		_, err := Choose("docker", "kata", offered, true)
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "virtual machine") || !strings.Contains(err.Error(), "runsc") {
			t.Fatalf("kata without KVM, engine offers %v: %v", offered, err)
		}
	}
}

// TestGVisorArgs: a gVisor runtime registered without --directfs=false is
// refused (for a box with a host workspace) with the entry to register;
// other runtimes, and the flag in either spelling, pass.
func TestGVisorArgs(t *testing.T) {
	for _, c := range []struct {
		name, path string
		args       []string
		ok         bool
	}{
		{"runsc", "/usr/bin/runsc", nil, false},
		{"gvisor", "/x/runsc", []string{"--platform=systrap"}, false},
		{"sandboxed", "/opt/runsc", []string{"--directfs=true"}, false},
		{"runsc", RunscPath(), []string{"--directfs=false"}, true},
		{"runsc", RunscPath(), []string{"--debug", "-directfs=false"}, true},
		{"runc", "runc", nil, true},
	} {
		err := CheckGVisorArgs(c.name, c.path, c.args)
		if (err == nil) != c.ok {
			t.Errorf("%s %s %v: %v", c.name, c.path, c.args, err)
		}
		if err != nil && (!errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `"runtimeArgs": ["--directfs=false"]`)) {
			t.Errorf("%s: the refusal does not give the entry: %v", c.name, err)
		}
	}
	if GVisorPids(100) != 264 || GVisorPids(0) != 0 {
		t.Errorf("GVisorPids: %d %d", GVisorPids(100), GVisorPids(0))
	}
}
