package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// unitFile is paddock's systemd unit, as `make install` installs it.
const unitFile = "../../../contrib/systemd/paddock.service"

// unit is a parsed systemd unit file: "Section.Key" to its values, in order.
type unit map[string][]string

func readUnit(t testing.TB, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[' && l[len(l)-1] == ']':
			section = l[1 : len(l)-1]
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: not a key=value line: %q", path, l)
			}
			u[section+"."+strings.TrimSpace(k)] = append(u[section+"."+strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns a key's last value (systemd's rule for single-valued keys),
// or def.
func (u unit) get(key, def string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// serviceManager runs the Runner the way systemd runs paddock.service,
// for a machine whose PID 1 is not systemd: ExecStart's command line (with
// the test's binary and state directory), started inside a cgroup of the
// unit's own in the unified hierarchy, Type=notify through NOTIFY_SOCKET,
// and stopped as KillMode, KillSignal and TimeoutStopSec say.
type serviceManager struct {
	t      testing.TB
	e      *env
	u      unit
	cg     string // the unit's cgroup directory in the unified hierarchy
	rel    string // the same, as /proc/PID/cgroup names it
	notify *net.UnixConn
	main   *exec.Cmd // the unit's main process, while it runs
}

func newServiceManager(t testing.TB, e *env, u unit) *serviceManager {
	t.Helper()
	mnt := ""
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if pre, post, ok := strings.Cut(l, " - "); ok && strings.HasPrefix(post, "cgroup2 ") {
				mnt = strings.Fields(pre)[4]
			}
		}
	}
	if mnt == "" {
		testenv.Missing(t, "no unified (v2) cgroup hierarchy is mounted")
	}
	self := "/"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				self = p
			}
		}
	}
	rel := filepath.Join(self, fmt.Sprintf("paddock-e2e-%d.service", os.Getpid()))
	m := &serviceManager{t: t, e: e, u: u, cg: filepath.Join(mnt, rel), rel: rel}
	if err := os.Mkdir(m.cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupTree(m.cg) })
	sock := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m.notify = c
	return m
}

// removeCgroupTree removes a cgroup directory and its (empty) children.
func removeCgroupTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// argv is ExecStart's command line with the test's binary and state
// directory in place of the installed ones.
func (m *serviceManager) argv() []string {
	m.t.Helper()
	f := strings.Fields(m.u.get("Service.ExecStart", ""))
	if len(f) == 0 {
		m.t.Fatal("the unit has no ExecStart")
	}
	f[0] = m.e.bin
	for i := range f {
		if f[i] == "--state-dir" && i+1 < len(f) {
			f[i+1] = m.e.dir
		}
	}
	return f
}

// start is `systemctl start`: fork into the unit's cgroup, then wait for
// READY=1 (Type=notify) within TimeoutStartSec.
func (m *serviceManager) start() {
	m.t.Helper()
	if typ := m.u.get("Service.Type", "simple"); typ != "notify" {
		m.t.Fatalf("Type=%s: this test expects Type=notify", typ)
	}
	fd, err := syscall.Open(m.cg, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	defer syscall.Close(fd)
	argv := m.argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	// systemd's environment for a system service; the owner's credential
	// comes from the test's environment (a real install stores it with
	// `paddock credential set`, never in the unit).
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"NOTIFY_SOCKET=" + m.notify.LocalAddr().String(), "INVOCATION_ID=0123456789abcdef0123456789abcdef",
		"CLAUDE_CODE_OAUTH_TOKEN=" + ownerToken}
	log := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.e.mu.Lock()
	m.e.serve, m.e.log, m.main = cmd, log, cmd
	m.e.mu.Unlock()
	if got := m.recv(30 * time.Second); !strings.Contains(got, "READY=1\n") {
		m.t.Fatalf("the Runner sent %q, not READY=1; log:\n%s", got, log.String())
	}
	// Ready means ready: the CLI is answered at once.
	if out, code := m.e.pdCode("ls"); code != 0 {
		m.t.Fatalf("READY=1 sent, but `paddock ls` says (exit %d): %s", code, out)
	}
}

// recv returns the next notification datagram.
func (m *serviceManager) recv(timeout time.Duration) string {
	m.t.Helper()
	buf := make([]byte, 4096)
	_ = m.notify.SetReadDeadline(time.Now().Add(timeout))
	n, err := m.notify.Read(buf)
	if err != nil {
		m.t.Fatalf("no notification from the Runner within %v: %v", timeout, err)
	}
	return string(buf[:n])
}

// procsIn lists the processes in a cgroup and all below it.
func procsIn(dir string) []int {
	var out []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return nil
	})
	return out
}

// stop is `systemctl stop` as systemd.kill(5) describes it: KillSignal to
// the main process (KillMode=process, mixed) or to every process of the
// unit's cgroup (control-group); after TimeoutStopSec, SIGKILL to the same;
// with mixed and control-group, SIGKILL to whatever is left once the main
// process has gone.
func (m *serviceManager) stop() {
	m.t.Helper()
	mode := m.u.get("Service.KillMode", "control-group")
	sig := syscall.SIGTERM
	if s := m.u.get("Service.KillSignal", "SIGTERM"); s != "SIGTERM" {
		m.t.Fatalf("KillSignal=%s: the Runner stops on SIGTERM", s)
	}
	timeout, err := time.ParseDuration(m.u.get("Service.TimeoutStopSec", "90s"))
	if err != nil {
		m.t.Fatal(err)
	}
	m.e.mu.Lock()
	main := m.main
	m.e.serve, m.main = nil, nil
	m.e.mu.Unlock()
	signal := func(s syscall.Signal) {
		switch mode {
		case "process", "mixed":
			_ = main.Process.Signal(s)
		case "control-group":
			for _, p := range procsIn(m.cg) {
				_ = syscall.Kill(p, s)
			}
		default:
			m.t.Fatalf("KillMode=%s", mode)
		}
	}
	signal(sig)
	if got := m.recv(10 * time.Second); !strings.Contains(got, "STOPPING=1\n") {
		m.t.Fatalf("the Runner sent %q on SIGTERM, not STOPPING=1", got)
	}
	done := make(chan error, 1)
	go func() { done <- main.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		m.t.Errorf("the Runner did not stop within TimeoutStopSec=%v; SIGKILL", timeout)
		signal(syscall.SIGKILL)
		<-done
	}
	if mode != "process" {
		for _, p := range procsIn(m.cg) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// objectSet is a list of objects in a stable order (Docker lists volumes
// in no fixed order).
func objectSet(objs []sandbox.Object) string {
	ss := make([]string, len(objs))
	for i, o := range objs {
		ss[i] = fmt.Sprintf("%+v", o)
	}
	sort.Strings(ss)
	return strings.Join(ss, "\n")
}

// TestUnitFileVerifies: systemd itself accepts paddock.service, with no
// warning (systemd-analyze prints unknown keys and bad values but still
// exits 0, so the output must be empty).
func TestUnitFileVerifies(t *testing.T) {
	analyze := testenv.LookPath(t, "systemd-analyze")
	bin := testenv.PaddockBinary(t)
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("ExecStart=/usr/local/bin/paddock ")) {
		t.Fatal("ExecStart does not run /usr/local/bin/paddock, where `make install` puts it")
	}
	// systemd-analyze checks that ExecStart's binary exists: the test's.
	dir := t.TempDir()
	p := filepath.Join(dir, "paddock.service")
	if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/usr/local/bin/paddock"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// And that it would complain: a misspelt key is caught.
	if err := os.WriteFile(p, bytes.Replace(b, []byte("KillMode="), []byte("KilMode="), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", p).CombinedOutput(); !bytes.Contains(out, []byte("KilMode")) {
		t.Fatalf("systemd-analyze did not report a misspelt key: %s", out)
	}
}

// TestServiceRestartKeepsBoxes restarts the Runner as paddock.service does
// (`systemctl restart`): local and Docker boxes keep running through it,
// the restarted Runner re-adopts them, and their conversations go on. A
// local box is never in the Runner's own cgroup, where the unit's main
// process runs.
func TestServiceRestartKeepsBoxes(t *testing.T) {
	u := readUnit(t, unitFile)
	e := newEnv(t)
	e.stop(syscall.SIGTERM) // the Runner newEnv started; the unit's takes over
	m := newServiceManager(t, e, u)
	t.Cleanup(func() {
		// However the test ended: the unit's Runner stopped, so its cgroup
		// can go, and a Runner of the test's own for newEnv's clean-up.
		e.mu.Lock()
		ours := m.main != nil && e.serve == m.main
		e.mu.Unlock()
		if ours {
			m.stop()
		}
		e.mu.Lock()
		none := e.serve == nil
		e.mu.Unlock()
		if none {
			e.start()
		}
	})
	m.start()
	type box struct{ name, id, backend string }
	var boxes []box
	for _, backend := range []string{"local", "docker"} {
		name := "svc-" + backend
		id, _ := e.chat(name, backend)
		boxes = append(boxes, box{name, id, backend})
	}
	before := map[string][]sandbox.Object{}
	for _, b := range boxes {
		before[b.name] = e.objectsOf(b.id)
	}
	// The local box's processes: in the unit's tree (systemd sees them
	// as the unit's), but in a cgroup of their own below it.
	var localPids []int
	for _, o := range before["svc-local"] {
		if o.Kind == sandbox.KindProcess {
			pid, _ := strconv.Atoi(o.ID)
			localPids = append(localPids, pid)
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if p, ok := strings.CutPrefix(l, "0::"); ok && (p == m.rel || !strings.HasPrefix(p, m.rel+"/paddock/")) {
					t.Fatalf("local box process %d is in %q, not a group of its own below the unit's %s", pid, p, m.rel)
				}
			}
		}
	}
	if len(localPids) == 0 {
		t.Fatal("no process of the local box found")
	}

	// systemctl restart: stop, then start.
	m.stop()
	for _, pid := range localPids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("local box process %d did not survive the Runner's stop", pid)
		}
	}
	m.start()
	for _, b := range boxes {
		deadline := time.Now().Add(30 * time.Second)
		for e.inspect(b.name).Observed != session.Running {
			if time.Now().After(deadline) {
				t.Fatalf("%s not re-adopted: %s", b.name, e.pd("ls"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if after := e.objectsOf(b.id); objectSet(after) != objectSet(before[b.name]) {
			t.Fatalf("%s: the box was replaced, not re-adopted:\nbefore %v\nafter  %v", b.name, before[b.name], after)
		}
		if out := e.pd("exec", b.name, "--", "echo", "alive"); out != "alive\n" {
			t.Fatalf("%s: exec after restart: %q", b.name, out)
		}
		e.typeLine(b.name, "still there")
		e.waitScreen(b.name, "hi from the fake server (turn 2)", 60*time.Second)
	}
	for _, b := range boxes {
		e.pd("rm", "-f", b.name)
	}
}
