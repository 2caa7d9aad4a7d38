package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// testInternet is "the internet" of a test: a network namespace the test
// makes, joined to the host by a veth pair whose only route is to it, with
// a TLS server for the given names inside. Its address is an ordinary
// public one (the egress proxy refuses private and documentation ranges),
// but it is assigned inside that namespace, so nothing sent to it leaves
// the machine.
type testInternet struct {
	addr  string // the server's address (port 443)
	caPEM []byte // the CA its certificate chains to
}

const internetAddr, internetHost = "198.20.77.2", "198.20.77.1"

func newTestInternet(t *testing.T, names ...string) *testInternet {
	t.Helper()
	return newTestInternetWith(t, testenv.WebHost(), names...)
}

// newTestInternetWith is newTestInternet with the server's handler.
func newTestInternetWith(t *testing.T, h http.Handler, names ...string) *testInternet {
	t.Helper()
	testenv.LookPath(t, "ip")
	testenv.LookPath(t, "unshare")
	testenv.LookPath(t, "nsenter")
	suffix := fmt.Sprint(os.Getpid() % 100000)
	hostIf, nsIf := "pdkA"+suffix, "pdkB"+suffix
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// The namespace is held by a process of its own, not made with `ip
	// netns add`: that bind-mounts /run/netns on itself for good, a
	// change to the host that outlives the test (and made k8stest's
	// sweep find its own directory busy).
	holder := exec.Command("unshare", "--net", "sleep", "infinity")
	if err := holder.Start(); err != nil {
		t.Fatalf("unshare --net: %v", err)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", hostIf).Run() // its peer goes with it
		holder.Process.Kill()
		holder.Wait()
	})
	nsPath := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// unshare has made the namespace once its link differs from ours.
		mine, _ := os.Readlink("/proc/self/ns/net")
		if theirs, err := os.Readlink(nsPath); err == nil && theirs != mine {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare --net made no network namespace within 10s")
		}
	}
	ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	ip("link", "set", nsIf, "netns", fmt.Sprint(holder.Process.Pid))
	ip("addr", "add", internetHost+"/30", "dev", hostIf)
	ip("link", "set", hostIf, "up")
	inNS := func(args ...string) {
		t.Helper()
		cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath, "ip"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ip %s (in the namespace): %v: %s", strings.Join(args, " "), err, out)
		}
	}
	inNS("addr", "add", internetAddr+"/30", "dev", nsIf)
	inNS("link", "set", nsIf, "up")
	inNS("link", "set", "lo", "up")
	// Only ever through the veth: never toward any other network.
	if out, err := exec.Command("ip", "route", "get", internetAddr).CombinedOutput(); err != nil || !strings.Contains(string(out), "dev "+hostIf) {
		t.Fatalf("the route to %s does not go to the test's namespace: %s %v", internetAddr, out, err)
	}

	caPEM, leaf := testenv.CA(t, names...)
	ln := listenIn(t, nsPath, internetAddr+":443")
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &testInternet{addr: internetAddr, caPEM: caPEM}
}

// listenIn opens a TCP listener inside the network namespace at nsPath:
// the socket is made on a thread that joined it, then the thread returns.
func listenIn(t *testing.T, nsPath, addr string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		panic("cannot return to the test's network namespace: " + err.Error()) // the thread stays locked and dies
	}
	runtime.UnlockOSThread()
	if lerr != nil {
		t.Fatal(lerr)
	}
	return ln
}

// TestAskModeWithClaude: the real Claude Code in an ask-mode session runs
// curl through its Bash tool to a TLS host of the test's own "internet".
// The connection waits and shows in `paddock egress pending`; approved
// from the CLI, the same connection goes through and curl gets the page.
// A second host is denied from the web page in Chromium, and curl gets the
// 403. Then `paddock set --egress offline` cuts an open tunnel while claude
// keeps running.
func TestAskModeWithClaude(t *testing.T) {
	chromium := testenv.LookPath(t, "chromium")
	const one, two = "one.ask-test.example", "two.ask-test.example"
	inet := newTestInternet(t, one, two)
	e := newEnvOpts(t, envOpts{hosts: map[string]string{one: inet.addr, two: inet.addr}})
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), inet.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "ask"
	e.pd("run", "-d", "--name", name, "--backend", "local", "--workspace", ws, "--egress", "allowlist", "--ask")
	defer e.pdRun("rm", "-f", name)
	e.waitScreen(name, promptReady, 60*time.Second)
	panePID := func() string {
		return strings.TrimSpace(e.pd("exec", name, "--", "tmux", "-L", "paddock", "display", "-p", "-t", "claude", "#{pane_pid}"))
	}
	pid := panePID()

	waitPending := func(host string) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if out = e.pd("egress", "pending"); strings.Contains(out, host+":443") {
				return out
			}
		}
		t.Fatalf("%s never waited for approval: %q\n%s", host, out, e.screen(name))
		return ""
	}
	waitFile := func(file, want string) string {
		t.Helper()
		var b []byte
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if b, _ = os.ReadFile(filepath.Join(ws, file)); strings.Contains(string(b), want) {
				return string(b)
			}
		}
		ps, _, _ := e.pdRun("exec", name, "--", "ps", "-eo", "pid,ppid,etimes,args")
		t.Fatalf("%s never held %q: %q\n%s\n%s\nprocesses in the box:\n%s\negress decisions:\n%s", file, want, b, e.screen(name), e.pd("logs", name), ps, e.pd("logs", "--egress", name))
		return ""
	}

	// 1. Claude's Bash tool: curl waits; the CLI approves; it goes through.
	curlStep := func(host, file string) {
		e.fake.SetSteps([]fakeapi.Step{{Name: "Bash", Input: map[string]any{
			"command":     "curl -sS --max-time 120 --cacert /workspace/ca.pem https://" + host + "/ > /workspace/" + file + " 2>&1; echo rc=$? >> /workspace/" + file,
			"description": "fetch " + host}}})
	}
	defer e.fake.SetSteps(nil)
	curlStep(one, "one.txt")
	e.typeLine(name, fakeapi.StepsKeyword+" fetch one")
	if out := waitPending(one); !strings.Contains(out, name) {
		t.Fatalf("pending: %s", out)
	}
	if out := e.pd("egress", "approve", name, one); !strings.Contains(out, "1 waiting connection(s) let through") {
		t.Fatalf("approve: %s", out)
	}
	if got := waitFile("one.txt", "rc="); !strings.Contains(got, "hello from "+one) || !strings.Contains(got, "rc=0") {
		t.Fatalf("curl after approval: %q", got)
	}
	e.waitScreen(name, fakeapi.StepsDone, 60*time.Second)

	// 2. The second host, denied from the web page.
	curlStep(two, "two.txt")
	e.typeLine(name, fakeapi.StepsKeyword+" fetch two")
	waitPending(two)
	login := strings.TrimSpace(e.pd("web"))
	ctx := newBrowser(t, chromium)
	row := `#pending tr[data-host="` + two + `:443"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(row+` button.deny`))); err != nil {
		t.Fatalf("the pending row on the web page: %v", err)
	}
	screenshot(t, ctx, "web-egress-pending.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+` button.deny`))); err != nil {
		t.Fatal(err)
	}
	if got := waitFile("two.txt", "rc="); strings.Contains(got, "rc=0") || strings.Contains(got, "hello from") {
		t.Fatalf("curl after the denial: %q", got)
	}
	if logs := e.pd("logs", "--egress", name); !strings.Contains(logs, "denied by root") || !strings.Contains(logs, "approved by root") {
		t.Fatalf("the decision log lacks the answers:\n%s", logs)
	}

	// 3. Offline cuts an open tunnel; claude runs on.
	done := make(chan string, 1)
	go func() {
		out, errs, code := e.pdRun("exec", name, "--", "sh", "-c",
			"HTTPS_PROXY=http://127.0.0.1:3128 curl -sS --max-time 120 --cacert /workspace/ca.pem https://"+one+"/slow")
		done <- fmt.Sprintf("exit %d: %s%s", code, out, errs)
	}()
	time.Sleep(2 * time.Second)
	if out := e.pd("set", name, "--egress", "offline"); !strings.Contains(out, "egress offline") {
		t.Fatalf("set: %s", out)
	}
	select {
	case got := <-done:
		if strings.HasPrefix(got, "exit 0") || !strings.Contains(got, "tick") {
			t.Fatalf("the cut tunnel: %s", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("going offline left the tunnel open")
	}
	if logs := e.pd("logs", "--egress", name); !strings.Contains(logs, "cut") {
		t.Fatalf("the decision log lacks the cut:\n%s", logs)
	}
	if now := panePID(); now != pid {
		t.Fatalf("claude was restarted (pane pid %s, then %s)", pid, now)
	}
}
