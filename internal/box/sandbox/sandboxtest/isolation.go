// The conformance suite's isolation probes and limits.

package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"golang.org/x/sys/unix"
)

func isolation(t *testing.T, s Setup) {
	b := StartBox(t, s, uniqueSession("iso"), sandbox.Limits{}, "")
	probe := func(name, script string, check func(out, errs string, code int) error) {
		t.Run(name, func(t *testing.T) {
			out, errs, code := b.Run(t, script)
			if err := check(out, errs, code); err != nil {
				t.Fatalf("%v\nout: %s\nerr: %s", err, out, errs)
			}
		})
	}
	if s.PodNetwork {
		probe("ReachesNothing", `paddock guest selftest --pod-network`, func(out, _ string, code int) error {
			if code != 0 {
				return fmt.Errorf("the pod self-test failed (%d)", code)
			}
			return nil
		})
	} else {
		probe("OnlyLoopback", `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`, func(out, _ string, _ int) error {
			if strings.TrimSpace(out) != "lo" {
				return fmt.Errorf("interfaces: %q", out)
			}
			return nil
		})
		probe("NoRoute", `tail -n +2 /proc/net/route | wc -l; cat /proc/net/ipv6_route 2>/dev/null | grep -v " lo$" | wc -l`, func(out, _ string, _ int) error {
			if strings.Fields(out)[0] != "0" || strings.Fields(out)[1] != "0" {
				return fmt.Errorf("routes: %q", out)
			}
			return nil
		})
	}
	probe("Kernel", `uname -r`, func(out, _ string, _ int) error {
		return checkKernel(s, strings.TrimSpace(out))
	})
	probe("NoResolver", `test ! -s /etc/resolv.conf && echo noconf; getent hosts example.com || echo noresolve; getent hosts localhost`, func(out, _ string, _ int) error {
		if !strings.Contains(out, "noconf") || !strings.Contains(out, "noresolve") {
			return fmt.Errorf("a name resolved or a resolver is configured: %q", out)
		}
		return nil
	})
	probe("NoCapabilities", `grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status`, func(out, _ string, _ int) error {
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasSuffix(l, "0000000000000000") {
				return fmt.Errorf("capability set not empty: %s", l)
			}
		}
		return nil
	})
	probe("NotRoot", `id -u; id -g`, func(out, _ string, _ int) error {
		if out != fmt.Sprintf("%d\n%d\n", sandbox.BoxUID, sandbox.BoxUID) {
			return fmt.Errorf("ids: %q", out)
		}
		return nil
	})
	probe("SystemDirsReadOnly", `for d in /usr /usr/bin /etc /opt/paddock/bin /bin /; do touch $d/.paddock-probe 2>/dev/null && echo "WROTE $d"; done; echo done`, func(out, _ string, _ int) error {
		if strings.Contains(out, "WROTE") {
			return fmt.Errorf("a system directory is writable: %q", out)
		}
		return nil
	})
	if s.ReadOnlyRoot {
		probe("RootFilesystemReadOnly", `for d in /var /srv /root /opt /media /mnt; do touch $d/.paddock-probe 2>/dev/null && echo "WROTE $d"; done; echo done`, func(out, _ string, _ int) error {
			if strings.Contains(out, "WROTE") {
				return fmt.Errorf("the root filesystem is writable: %q", out)
			}
			return nil
		})
	}
	probe("WritablePlaces", `for d in "$HOME" /workspace /tmp; do touch $d/.probe && echo "ok $d"; done`, func(out, _ string, _ int) error {
		if strings.Count(out, "ok ") != 3 {
			return fmt.Errorf("home, /workspace and /tmp must be writable: %q", out)
		}
		return nil
	})
	probe("HostProcessesInvisible", `ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\0' ' '`, func(out, _ string, _ int) error {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		n, _ := strconv.Atoi(lines[0])
		if n > 10 || !strings.Contains(out, "paddock guest") {
			return fmt.Errorf("%d processes visible, PID 1 is %q", n, lines[len(lines)-1])
		}
		return nil
	})
	probe("NoDockerSocket", `for p in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do test -e $p && echo "FOUND $p"; done; find / -xdev \( -name 'docker.sock' -o -name 'containerd.sock' \) 2>/dev/null; find /run /var/run /tmp /home /workspace -type s 2>/dev/null | grep -v '^/run/paddock/'; echo done`, func(out, _ string, _ int) error {
		if strings.TrimSpace(out) != "done" {
			return fmt.Errorf("a daemon socket is reachable: %q", out)
		}
		return nil
	})
	// No credential of a cluster (kubernetes: no service account token
	// mounted, no service links naming the API server).
	probe("NoServiceAccountToken", `for p in /var/run/secrets /run/secrets; do test -e $p && echo "FOUND $p"; done; env | grep -E '^KUBERNETES_(SERVICE|PORT)' ; echo done`, func(out, _ string, _ int) error {
		if strings.TrimSpace(out) != "done" {
			return fmt.Errorf("a cluster credential or address is in the box: %q", out)
		}
		return nil
	})
	probe("NoOutsideConnect", `exec 3<>/dev/tcp/1.1.1.1/80 2>/dev/null && echo CONNECTED; echo done`, func(out, _ string, _ int) error {
		if strings.Contains(out, "CONNECTED") {
			return fmt.Errorf("connected outside")
		}
		return nil
	})
}

// checkKernel: a box on a gVisor runtime reports gVisor's kernel (the
// sentry, e.g. 4.19.0-gvisor), never the host's release; a box on a
// shared-kernel runtime (runc, bwrap) reports the host's.
func checkKernel(s Setup, release string) error {
	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		return err
	}
	hostRelease := unix.ByteSliceToString(host.Release[:])
	runtime := s.Runtime
	if runtime == "" {
		runtime = s.Backend.Capabilities(context.Background()).Runtime
	}
	switch runtimes.KindOf(runtime, "") {
	case runtimes.GVisor:
		if !strings.HasSuffix(release, "-gvisor") || release == hostRelease {
			return fmt.Errorf("a box on %s reports kernel %q (the host's is %q), not gVisor's", runtime, release, hostRelease)
		}
	case runtimes.Shared:
		if release != hostRelease {
			return fmt.Errorf("a box on %s reports kernel %q, not the host's %q", runtime, release, hostRelease)
		}
	}
	return nil
}

func limits(t *testing.T, s Setup) {
	caps := s.Backend.Capabilities(context.Background())
	t.Run("ForkBombStopped", func(t *testing.T) {
		if !caps.PidsLimit {
			t.Skip("this host offers no pids controller")
		}
		b := StartBox(t, s, uniqueSession("pids"), sandbox.Limits{Pids: 64}, "")
		if len(b.Notes) > 0 {
			for _, n := range b.Notes {
				if strings.Contains(n, "pids") {
					t.Fatalf("pids limit not applied: %v", b.Notes)
				}
			}
		}
		// A bounded bomb: ask for 400 processes; the limit allows 64.
		// Shells abort on a failed fork; perl counts the forks that worked
		// and stops at the first refusal. The children exit by themselves.
		const bomb = `exec perl -e 'my $n = 0; for (1..400) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 3; exit 0 } $n++ } print "$n\n"; 1 while wait() > 0'`
		if onGVisor(s) {
			wholeBoxEnds(t, s, b, bomb)
			return
		}
		out, errs, code := b.Run(t, bomb)
		if code != 0 {
			t.Fatalf("bomb: code %d out %q err %q", code, out, errs)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(lastLine(out)))
		if n == 0 || n > 64 {
			t.Fatalf("%d processes ran under a limit of 64 (%q)", n, out)
		}
		t.Logf("the bomb got %d of 400 processes under a limit of 64", n)
		// The box is still usable after the bomb.
		if _, _, err := b.Client.Ping(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("guest gone after the bomb: %v", err)
		}
		if out, _, code := b.Run(t, `echo alive`); code != 0 || out != "alive\n" {
			t.Fatalf("box unusable after the bomb: %d %q", code, out)
		}
	})
	t.Run("MemoryLimitKillsOnlyTheHog", func(t *testing.T) {
		if !caps.MemoryLimit {
			t.Skip("this host offers no memory controller")
		}
		b := StartBox(t, s, uniqueSession("mem"), sandbox.Limits{MemoryBytes: 128 << 20}, "")
		for _, n := range b.Notes {
			if strings.Contains(n, "memory") {
				t.Fatalf("memory limit not applied: %v", b.Notes)
			}
		}
		// tail -c N keeps the last N bytes in memory: 512 MiB against a 128 MiB limit.
		const hog = `head -c 536870912 /dev/zero | tail -c 536870000 > /dev/null`
		if onGVisor(s) {
			wholeBoxEnds(t, s, b, hog)
			return
		}
		_, _, code := b.Run(t, hog)
		if code == 0 {
			t.Fatal("a 512 MiB allocation succeeded under a 128 MiB limit")
		}
		out, _, code := b.Run(t, `echo alive`)
		if code != 0 || out != "alive\n" {
			t.Fatalf("the box did not survive its hog: %d %q", code, out)
		}
	})
}

// onGVisor: the suite's boxes run on a gVisor runtime.
func onGVisor(s Setup) bool { return runtimes.KindOf(s.Runtime, "") == runtimes.GVisor }

// wholeBoxEnds runs script, which passes a limit of the box, in a box on
// gVisor: gVisor enforces the box's limits on the host's cgroup of its
// sentry, so the box ends whole (the sentry can make no thread, or the
// host's OOM killer takes it) where a shared-kernel box loses only the
// process. The box must end within a minute, and start again with its
// guest answering: contained, and recoverable.
func wholeBoxEnds(t *testing.T, s Setup, b *Box, script string) {
	t.Helper()
	var out, errb bytes.Buffer
	if p, err := b.Client.Exec(channel.ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: Env, Dir: sandbox.WorkspaceDir, Stdout: &out, Stderr: &errb}); err == nil {
		code, err := p.Wait()
		t.Logf("on gVisor the script ended with %d %v (out %q err %q)", code, err, out.String(), errb.String())
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		bx, err := s.Backend.Inspect(ctx, b.ID)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if bx.State != sandbox.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the box on gVisor still runs a minute after passing its limit: the limit held nothing")
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Client.Close()
	if _, err := s.Backend.Start(ctx, b.ID); err != nil {
		t.Fatalf("start again after the limit ended it: %v", err)
	}
	b.Client = Connect(t, s.Backend, b.ID)
	if out, _, code := b.Run(t, `echo alive`); code != 0 || out != "alive\n" {
		t.Fatalf("box unusable after starting again: %d %q", code, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
