package guest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestSelfTestSeesLeaks runs the self-test in network namespaces made for
// the test: one as closed as a box (passes), one with an extra interface
// and a route (fails, naming both). The routes point nowhere real, so no
// packet can leave the machine.
func TestSelfTestSeesLeaks(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "unshare")
	testenv.LookPath(t, "ip")
	bin := testenv.GuestBinary(t)
	t.Run("process", func(t *testing.T) {
		seesLeaks(t, func(setup string) (map[string]Check, int) { return runSelfTest(t, bin, setup, "") })
	})
	// What the Runner does: the running guest answers over the channel.
	t.Run("channel", func(t *testing.T) {
		seesLeaks(t, func(setup string) (map[string]Check, int) { return selfTestOverChannel(t, bin, setup) })
	})
}

// selfTestOverChannel starts the guest binary in a new network namespace
// after the shell commands setup, asks it for the self-test over a channel
// and returns the checks by name, and 1 if any failed (as the process's
// exit code would be).
func selfTestOverChannel(t *testing.T, bin, setup string) (map[string]Check, int) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	cmd := exec.Command("unshare", "--net", "sh", "-c", setup+`; exec "$0" guest --socket "$1"`, bin, sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	out, err := dialGuest(t, sock).SelfTest("", time.Now().Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]Check{}
	for _, c := range ParseChecks(out) {
		checks[c.Name] = c
	}
	code := 0
	if !Passed(out) {
		code = 1
	}
	return checks, code
}

func seesLeaks(t *testing.T, run func(setup string) (map[string]Check, int)) {
	closed, code := run("ip link set lo up")
	if code != 0 || !closed["only-loopback"].OK || !closed["no-route"].OK || !closed["no-resolver"].OK || !closed["connect-fails-locally"].OK {
		t.Fatalf("a closed namespace failed the self-test: %d %+v", code, closed)
	}
	// A veth pair with both ends in the namespace: an interface and a route
	// that lead nowhere outside it.
	leaky, code := run("ip link set lo up; ip link add pdk0 type veth peer name pdk1; ip addr add 10.99.77.1/24 dev pdk0; ip link set pdk0 up; ip link set pdk1 up")
	if code != 1 || leaky["only-loopback"].OK || leaky["no-route"].OK || leaky["connect-fails-locally"].OK {
		t.Fatalf("a leaky namespace passed: %d %+v", code, leaky)
	}
	if !strings.Contains(leaky["only-loopback"].Detail, "pdk0") {
		t.Fatalf("the failure does not name the interface: %+v", leaky["only-loopback"])
	}
}

// TestSelfTestPodSeesReach runs the pod self-test in a network namespace
// made for the test with an interface, as a pod has: an address that
// answers (a listener on the namespace's own interface) fails it, one that
// cannot be reached passes.
func TestSelfTestPodSeesReach(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "unshare")
	testenv.LookPath(t, "ip")
	bin := testenv.PaddockBinary(t)
	setup := "ip link set lo up; ip link add pdk0 type veth peer name pdk1; ip addr add 10.99.78.1/24 dev pdk0; ip link set pdk0 up; ip link set pdk1 up"
	run := func(args string) (map[string]Check, int) { return runSelfTest(t, bin, setup, "--pod-network "+args) }
	// Nothing listens at 10.99.78.1:9: refused, so reached.
	reach, code := run("--unreachable 10.99.78.1:9")
	if code != 1 || reach["unreachable 10.99.78.1:9"].OK || !reach["unreachable 192.0.2.1:80"].OK || !reach["no-resolver"].OK {
		t.Fatalf("an address that answers passed: %d %+v", code, reach)
	}
	closed, code := run("--unreachable 192.0.2.7:443")
	if code != 0 || !closed["unreachable 192.0.2.7:443"].OK || !closed["interfaces"].OK {
		t.Fatalf("a pod that reaches nothing failed: %d %+v", code, closed)
	}
}

// runSelfTest runs `paddock guest selftest args` in a new network
// namespace after the shell commands setup, and returns its checks by name
// and its exit code.
func runSelfTest(t *testing.T, bin, setup, args string) (map[string]Check, int) {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "sh", "-c", setup+`; exec "$0" guest selftest `+args, bin)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	checks := map[string]Check{}
	for _, c := range ParseChecks(string(out)) {
		checks[c.Name] = c
	}
	return checks, code
}

func TestFailed(t *testing.T) {
	out := `{"name":"no-resolver","ok":true,"detail":"x"}
{"name":"unreachable 10.0.0.1:443","ok":false,"detail":"10.0.0.1:443 answered (refused): the pod reaches it"}`
	if got := Failed(out); got != "unreachable 10.0.0.1:443: 10.0.0.1:443 answered (refused): the pod reaches it" {
		t.Fatalf("%q", got)
	}
	if got := Failed("guest: unknown flag --pod-network\n"); got != "guest: unknown flag --pod-network" {
		t.Fatalf("%q", got)
	}
}
