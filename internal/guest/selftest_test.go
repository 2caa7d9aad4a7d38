package guest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/testenv"
)

// TestSelfTestSeesLeaks runs the self-test in network namespaces made for
// the test: one as closed as a box (passes), one with an extra interface
// and a route (fails, naming both). The routes point nowhere real, so no
// packet can leave the machine.
func TestSelfTestSeesLeaks(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "unshare")
	testenv.LookPath(t, "ip")
	bin := testenv.PaddockBinary(t)
	run := func(setup string) (map[string]Check, int) {
		cmd := exec.Command("unshare", "--net", "sh", "-c", setup+`; exec "$0" guest selftest`, bin)
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		checks := map[string]Check{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var c Check
			if json.Unmarshal([]byte(l), &c) == nil {
				checks[c.Name] = c
			}
		}
		return checks, code
	}
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
