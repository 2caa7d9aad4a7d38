package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/perf"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// Size of the repository BenchmarkClone makes (issue 33's targets):
// PADDOCK_BENCH_CLONE_FILES files at its tip, and about
// PADDOCK_BENCH_CLONE_MB of history in random (incompressible) blobs.
var (
	cloneFiles     = envInt("PADDOCK_BENCH_CLONE_FILES", 100_000)
	cloneHistoryMB = envInt("PADDOCK_BENCH_CLONE_MB", 1024)
)

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// bigRepo makes a repository of the workspace owner's in dir with files
// files at its tip and about historyMB of history, through git
// fast-import: a first commit of every file (a few hundred bytes each),
// then commits each rewriting 2000 files with 10 KiB of random bytes.
func bigRepo(b testing.TB, dir string, files, historyMB int) {
	b.Helper()
	git := func(args ...string) {
		b.Helper()
		c := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
		c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	cmd := exec.Command("git", "-c", "safe.directory=*", "-C", dir, "fast-import", "--quiet")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.New(rand.NewChaCha8([32]byte{33}))
	when := 1700000000
	commit := func(msg string, changes func()) {
		when++
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@example.org> %d +0000\ndata %d\n%s\n", when, len(msg), msg)
		changes()
		w.WriteString("\n")
	}
	commit("init", func() {
		for i := range files {
			body := fmt.Sprintf("file %d\n%s\n", i, strings.Repeat(strconv.Itoa(rng.IntN(1e9))+" ", 20))
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", benchPath(i), len(body), body)
		}
	})
	blob := make([]byte, 10<<10)
	const perCommit = 2000
	for c := 0; c < historyMB<<20/(perCommit*len(blob)); c++ {
		commit(fmt.Sprintf("history %d", c), func() {
			for range perCommit {
				for j := range blob {
					blob[j] = byte(rng.Uint32())
				}
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", benchPath(rng.IntN(files)), len(blob))
				w.Write(blob)
				w.WriteString("\n")
			}
		})
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v", err)
	}
	git("reset", "-q", "--hard")
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner), dir).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v %s", err, out)
	}
}

// benchPath is the path of bigRepo's file i: 16 files a directory, as in
// the Linux kernel's tree (80,000 files in 5,000 directories), in 64
// directories of directories.
func benchPath(i int) string {
	return fmt.Sprintf("src/a%02d/b%04d/f%06d.txt", (i/16)%64, i/16, i)
}

// timed is how long the command takes, run as the workspace's owner; it
// fails b if it fails.
func timed(b testing.TB, dir string, name string, args ...string) time.Duration {
	b.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxtest.WorkspaceOwner, Gid: sandboxtest.WorkspaceOwner}}
	t0 := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(t0)
}

// duKB is what du -sk says of paths in a box.
func (e *env) duKB(name string, args ...string) int {
	out := e.pd(append([]string{"exec", name, "--", "du", "-sk"}, args...)...)
	n, _ := strconv.Atoi(strings.Fields(out + " 0")[0])
	return n
}

// BenchmarkClone (issue 33's targets): on a repository of 100,000 files
// and 1 GB of history, run --clone → claude's prompt drawn, per backend,
// beside git checkout alone, git clone --local and git worktree add; the
// clone's own disk beside its checkout; and paddock diff --stat of a
// 10-file change beside git diff --stat run in the clone.
func BenchmarkClone(b *testing.B) {
	e := newEnv(b)
	repo := sandboxtest.OwnedWorkspace(b, testenv.TraversableTempDir(b))
	t0 := time.Now()
	bigRepo(b, repo, cloneFiles, cloneHistoryMB)
	pack := timedOut(b, repo, "du", "-sh", ".git")
	b.Logf("repository: %d files, .git %s, made in %v", cloneFiles, strings.Fields(pack)[0], time.Since(t0).Round(time.Second))
	scratch := testenv.TraversableTempDir(b)
	if err := os.Chown(scratch, sandboxtest.WorkspaceOwner, sandboxtest.WorkspaceOwner); err != nil {
		b.Fatal(err)
	}
	git := func(args ...string) []string { return args }
	rounds := perf.Rounds(3)
	var checkout, local, worktree []time.Duration
	start := map[string][]time.Duration{}
	diffP, diffU, diffG := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	disk := map[string][2]int{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			x := filepath.Join(scratch, fmt.Sprintf("co-%d-%d", i, r))
			timed(b, scratch, "git", git("clone", "-q", "--no-checkout", "--shared", repo, x)...)
			checkout = append(checkout, timed(b, x, "git", git("checkout", "-q", "-f", "main")...))
			os.RemoveAll(x)
			x = filepath.Join(scratch, fmt.Sprintf("local-%d-%d", i, r))
			local = append(local, timed(b, scratch, "git", git("clone", "-q", "--local", repo, x)...))
			os.RemoveAll(x)
			x = filepath.Join(scratch, fmt.Sprintf("wt-%d-%d", i, r))
			worktree = append(worktree, timed(b, repo, "git", git("worktree", "add", "-q", "-b", fmt.Sprintf("wt-%d-%d", i, r), x, "main")...))
			timed(b, repo, "git", git("worktree", "remove", "--force", x)...)
			for _, backend := range []string{"local", "docker"} {
				name := fmt.Sprintf("clone-bench-%s-%d-%d", backend, i, r)
				t0 := time.Now()
				e.pd("run", "-d", "--name", name, "--backend", backend, "--workspace", repo, "--clone")
				start[backend] = append(start[backend], until(b, t0, 5*time.Minute, func() bool { return e.ready(name) }))
				var change strings.Builder
				for f := 1; f <= 10; f++ {
					fmt.Fprintf(&change, "echo change >> %s; ", benchPath(f))
				}
				e.pd("exec", name, "--", "sh", "-c", "cd /workspace && "+change.String())
				t0 = time.Now()
				e.pd("exec", name, "--", "git", "-C", "/workspace", "diff", "--stat")
				diffG[backend] = append(diffG[backend], time.Since(t0))
				t0 = time.Now()
				if out := e.pd("diff", name, "--stat"); !strings.Contains(out, "10 files changed") {
					b.Fatalf("diff --stat: %q", out)
				}
				diffP[backend] = append(diffP[backend], time.Since(t0))
				t0 = time.Now()
				e.pd("diff", name, "--stat", "--no-untracked")
				diffU[backend] = append(diffU[backend], time.Since(t0))
				disk[backend] = [2]int{e.duKB(name, "/workspace/.git"), e.duKB(name, "--exclude=.git", "/workspace")}
				e.pd("rm", "-f", name)
			}
		}
	}
	co := perf.Pct(checkout, .5)
	t := perf.Table{Title: fmt.Sprintf("A clone per session: %d files, .git %s; p50 (ms)", cloneFiles, strings.Fields(pack)[0]),
		Header: []string{"how", "time", "less git checkout alone"}}
	t.Add("git checkout alone", perf.MS(co), "0")
	t.Add("git clone --local", perf.MS(perf.Pct(local, .5)), perf.MS(perf.Pct(local, .5)-co))
	t.Add("git worktree add", perf.MS(perf.Pct(worktree, .5)), perf.MS(perf.Pct(worktree, .5)-co))
	for _, backend := range []string{"local", "docker"} {
		s := perf.Pct(start[backend], .5)
		t.Add("paddock run --clone → prompt ("+backend+")", perf.MS(s), perf.MS(s-co))
	}
	t.Write(os.Stderr)
	d := perf.Table{Title: "paddock diff --stat of a 10-file change, and the clone's disk (p50 ms; KiB)",
		Header: []string{"backend", "git diff --stat (exec)", "paddock diff --stat", "ratio", "--no-untracked", "ratio", "clone .git", "checkout"}}
	for _, backend := range []string{"local", "docker"} {
		g, p, u := perf.Pct(diffG[backend], .5), perf.Pct(diffP[backend], .5), perf.Pct(diffU[backend], .5)
		d.Add(backend, perf.MS(g), perf.MS(p), fmt.Sprintf("%.2f", float64(p)/float64(g)), perf.MS(u), fmt.Sprintf("%.2f", float64(u)/float64(g)),
			strconv.Itoa(disk[backend][0]), strconv.Itoa(disk[backend][1]))
	}
	d.Write(os.Stderr)
}

// timedOut is the command's output; it fails b if it fails.
func timedOut(b testing.TB, dir, name string, args ...string) string {
	b.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
