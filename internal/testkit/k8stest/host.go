package k8stest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prefix names everything a run makes on the host: its directory, its
// cgroup subtree (prefix+id) and its links (linkPrefix+id+"h"/"p").
const (
	prefix     = "paddock-k8stest-"
	linkPrefix = "pdk8s"
)

// shadowed are the host paths containerd and the kubelet write whatever
// their flags say; in their mount namespace each is an empty tmpfs.
var shadowed = []string{
	"/var/lib/kubelet",    // device-plugins/, even with --root-dir
	"/var/log/pods",       // in case podLogsDir is not honoured somewhere
	"/var/log/containers", // the kubelet's symlinks to container logs
	"/var/lib/cni",        // libcni's result cache
	"/run/containerd",     // the shims' sockets (s/), runc's state, fifos
	"/var/run/netns",      // the pods' network namespaces
}

// kernelTunables are the settings the kubelet sets at start when they
// differ from what it wants (pkg/kubelet/cm setupKernelTunables), with
// those values; in its mount namespace each reads back what it wants.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hierarchy is one mounted cgroup hierarchy.
type hierarchy struct {
	mount  string
	cpuset bool // v1 cpuset: a new group needs cpus and mems set
}

// hierarchies lists the host's cgroup hierarchies (v1 and v2).
func hierarchies() ([]hierarchy, error) {
	ms, err := mounts()
	if err != nil {
		return nil, err
	}
	var hs []hierarchy
	for _, m := range ms {
		switch m.fstype {
		case "cgroup":
			hs = append(hs, hierarchy{mount: m.point, cpuset: hasOpt(m.super, "cpuset")})
		case "cgroup2":
			hs = append(hs, hierarchy{mount: m.point})
		}
	}
	if len(hs) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return hs, nil
}

func hasOpt(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, fstype, super string }

// mounts reads the calling process's mount table.
func mounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		ms = append(ms, mount{point: unescape(a[4]), fstype: b[0], super: b[2]})
	}
	return ms, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// makeCgroups makes /<name> and /<name>/host in every hierarchy: the
// kubelet's cgroupRoot, and the group of the processes the run starts.
func makeCgroups(hs []hierarchy, name string) error {
	for _, h := range hs {
		for _, d := range []string{filepath.Join(h.mount, name), filepath.Join(h.mount, name, "host")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			if !h.cpuset {
				continue
			}
			// A v1 cpuset group starts empty and takes no process.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// joinCgroups moves pid into /<name>/host in every hierarchy.
func joinCgroups(hs []hierarchy, name string, pid int) error {
	for _, h := range hs {
		f := filepath.Join(h.mount, name, "host", "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %w", f, err)
		}
	}
	return nil
}

// cgroupPids lists the processes in /<name>'s subtree, in every hierarchy.
func cgroupPids(hs []hierarchy, name string) []int {
	seen := map[int]bool{}
	var pids []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h.mount, name), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// killCgroups SIGKILLs every process in /<name>'s subtree until none is
// left (a process forking meanwhile is caught on the next round).
func killCgroups(hs []hierarchy, name string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		pids := cgroupPids(hs, name)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup /%s survive SIGKILL", pids, name)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes /<name> and everything under it (the kubelet's
// kubepods tree), deepest first, in every hierarchy. Its processes must be
// gone; an emptied group can stay busy for a moment, so it retries.
func removeCgroups(hs []hierarchy, name string) error {
	var dirs []string
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h.mount, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	// A cgroup with children cannot go: deepest first.
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var errs []error
	for _, d := range dirs {
		var err error
		for i := 0; i < 50; i++ {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// holderScript is run by the process that holds the mount namespace
// containerd and the kubelet share (and the network namespace the veth's
// far end lives in). It hides the shadowed paths and tunables, says ready,
// and waits on stdin: the test process keeps the other end and never
// writes, so EOF means it died without stopping the cluster, and the
// holder then kills the run's whole cgroup subtree, itself last.
func holderScript(dir string, shadows []string, tunables map[string]string, cgroups []string) string {
	var b strings.Builder
	// Every path is the run's own or a fixed host path: none needs quoting.
	b.WriteString("set -e\n")
	for _, s := range shadows {
		fmt.Fprintf(&b, "mount -t tmpfs -o mode=0755 paddock-k8stest %s\n", s)
	}
	keys := make([]string, 0, len(tunables))
	for k := range tunables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// A file bound over a /proc/sys entry: reads give the file, and the
	// kubelet, seeing the value it wants, writes nothing.
	for _, k := range keys {
		fmt.Fprintf(&b, "mount --bind %s /proc/sys/%s\n", filepath.Join(dir, "sysctl", strings.ReplaceAll(k, "/", ".")), k)
	}
	fmt.Fprintf(&b, `echo ready
read -r _ || :
set +e
while :; do
  n=0
  for f in $(find %s -name cgroup.procs 2>/dev/null); do
    for p in $(cat "$f" 2>/dev/null); do
      if [ "$p" != "$$" ]; then kill -9 "$p" 2>/dev/null && n=1; fi
    done
  done
  [ "$n" = 0 ] && exit 0
  sleep 0.2
done
`, strings.Join(cgroups, " "))
	return b.String()
}

// shadowDirs makes the shadowed paths the host lacks (a tmpfs needs a
// mount point) and returns what it made, parents first, for
// removeMadeDirs; the list is also kept in <dir>/made-dirs for a later
// sweepStale.
func shadowDirs(dir string) ([]string, error) {
	var made []string
	for _, s := range shadowed {
		// The path's missing ancestors, outermost first (Lstat: a symlink
		// such as /var/run counts as there).
		var missing []string
		for p := s; p != "/"; p = filepath.Dir(p) {
			if _, err := os.Lstat(p); err == nil {
				break
			}
			missing = append([]string{p}, missing...)
		}
		for _, p := range missing {
			if err := os.Mkdir(p, 0o755); err != nil {
				return made, err
			}
			made = append(made, p)
		}
	}
	return made, os.WriteFile(filepath.Join(dir, "made-dirs"), []byte(strings.Join(made, "\n")), 0o644)
}

// removeMadeDirs removes the directories shadowDirs made, children first,
// each only if empty (something else may have put files there since: it
// stays). A mount point in a namespace being torn down is busy for a
// moment, so that is retried.
func removeMadeDirs(made []string) error {
	var errs []error
	for i := len(made) - 1; i >= 0; i-- {
		var err error
		for try := 0; try < 100; try++ {
			if err = syscall.Rmdir(made[i]); !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if errors.Is(err, syscall.EBUSY) && isMountPoint(made[i]) {
			// Something else mounted on it since (`ip netns add` binds
			// /run/netns on itself for good): no longer the run's alone.
			continue
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", made[i], err))
		}
	}
	return errors.Join(errs...)
}

// isMountPoint reports whether path (its symlinks resolved) is a mount
// point in this mount namespace.
func isMountPoint(path string) bool {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	ms, err := mounts()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.point == p {
			return true
		}
	}
	return false
}

// tunableFiles writes <dir>/sysctl/<name> for each kernel tunable whose
// host value differs from what the kubelet wants, and returns those.
func tunableFiles(dir string) (map[string]string, error) {
	out := map[string]string{}
	if err := os.MkdirAll(filepath.Join(dir, "sysctl"), 0o755); err != nil {
		return nil, err
	}
	for k, want := range kernelTunables {
		cur, err := os.ReadFile("/proc/sys/" + k)
		if err != nil || strings.TrimSpace(string(cur)) == want {
			continue // absent here, or already as the kubelet wants
		}
		if err := os.WriteFile(filepath.Join(dir, "sysctl", strings.ReplaceAll(k, "/", ".")), []byte(want+"\n"), 0o644); err != nil {
			return nil, err
		}
		out[k] = want
	}
	return out, nil
}

// ip runs the ip(8) command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// linkExists reports whether the host's network namespace has a link name.
func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// makeLinks makes the veth pair the pods' macvlan interfaces sit on: host
// stays here (macvlan's master), its peer goes into the holder's network
// namespace, so the pair goes when the holder does. Both are up, and
// neither has an address.
func makeLinks(host, peer string, holder int) error {
	if err := ip("link", "add", host, "type", "veth", "peer", "name", peer, "netns", strconv.Itoa(holder)); err != nil {
		return err
	}
	if err := ip("link", "set", host, "up"); err != nil {
		return err
	}
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(holder), "--net", "ip", "link", "set", peer, "up").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link set %s up (holder's namespace): %v: %s", peer, err, out)
	}
	return nil
}

// removeLink waits for link to go (it goes with the holder's network
// namespace, which the kernel frees asynchronously) and deletes it if it
// stays.
func removeLink(link string) error {
	for i := 0; i < 50 && linkExists(link); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if !linkExists(link) {
		return nil
	}
	return ip("link", "del", link)
}

// unmountUnder detaches whatever the host's mount table has under dir
// (nothing, normally: every mount of a run is in its own namespace).
func unmountUnder(dir string) error {
	ms, err := mounts()
	if err != nil {
		return err
	}
	var under []string
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			under = append(under, m.point)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	var errs []error
	for _, p := range under {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("umount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// sweepStale removes what runs that did not stop left behind: their
// processes and cgroups, links, directories, and the host directories they
// made. It runs under LockFile, so no other cluster is running: anything
// named with prefix is stale.
func sweepStale(hs []hierarchy) error {
	var errs []error
	// Stale runs by their cgroups, in any hierarchy.
	names := map[string]bool{}
	for _, h := range hs {
		ents, _ := os.ReadDir(h.mount)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				names[e.Name()] = true
			}
		}
	}
	for name := range names {
		if err := killCgroups(hs, name, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
		if err := removeCgroups(hs, name); err != nil {
			errs = append(errs, err)
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if strings.HasPrefix(l.Name(), linkPrefix) {
			if err := ip("link", "del", l.Name()); err != nil && linkExists(l.Name()) {
				errs = append(errs, err)
			}
		}
	}
	// Their directories, and the host directories each recorded it made.
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "made-dirs")); err == nil && len(b) > 0 {
			if err := removeMadeDirs(strings.Split(string(b), "\n")); err != nil {
				errs = append(errs, err)
			}
		}
		if err := unmountUnder(d); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
