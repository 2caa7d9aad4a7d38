// Package sandboxbench measures boxes side by side with the bare backend
// in one run: create → guest ready against a bare bwrap /bin/true and a
// bare container of the same image running /bin/true, and (kubernetes, on
// the test cluster) a bare pod of that image running /bin/true; and the channel's
// round trip and throughput against a direct loopback TCP connection.
package sandboxbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/docker"
	"github.com/paddockhq/paddock/internal/box/sandbox/kubernetes"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/k8stest"
	"github.com/paddockhq/paddock/internal/testkit/perf"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

const rounds = 8

// TestMain stops the test cluster BenchmarkBoxStart starts.
func TestMain(m *testing.M) { k8stest.Main(m) }

// paddockStart creates and starts a box and waits for its guest's answer.
func paddockStart(b *testing.B, be sandbox.Backend, session string) (time.Duration, func()) {
	d, _, _, done := paddockStartOpts(b, be, sandbox.CreateOptions{Session: session})
	return d, done
}

// paddockStartOpts is paddockStart with its options, returning the box's
// id and its open channel too.
func paddockStartOpts(b *testing.B, be sandbox.Backend, o sandbox.CreateOptions) (time.Duration, string, *channel.Client, func()) {
	ctx := context.Background()
	t0 := time.Now()
	bx, err := be.Create(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	// A benchmark that fails before done still removes the box (its
	// mounts, its processes); Remove of a removed box is nothing.
	b.Cleanup(func() { _ = be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}) })
	if _, err := be.Start(ctx, bx.ID); err != nil {
		b.Fatal(err)
	}
	cl := connect(b, be, bx.ID)
	d := time.Since(t0)
	return d, bx.ID, cl, func() { cl.Close(); _ = be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}) }
}

// connect opens a channel to a running box and waits for the guest.
func connect(b *testing.B, be sandbox.Backend, id string) *channel.Client {
	conn, err := be.Connect(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := channel.NewClient(conn)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := cl.Ping(time.Now().Add(30 * time.Second)); err != nil {
		b.Fatal(err)
	}
	return cl
}

func BenchmarkBoxStart(b *testing.B) {
	testenv.Root(b)
	testenv.LookPath(b, "bwrap")
	lb, err := local.New(local.Config{Root: filepath.Join(testenv.TraversableTempDir(b), "local"), GuestBinary: testenv.GuestBinary(b)})
	if err != nil {
		b.Fatal(err)
	}
	cli := imagetest.Docker(b)
	img := imagetest.BoxImage(b, cli)
	db, err := docker.New(context.Background(), docker.Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(b), "docker"), Owner: testenv.UniqueOwner(b)})
	if err != nil {
		b.Fatal(err)
	}
	// The kubernetes backend on the test cluster, the image imported into
	// its containerd (pulled Never), in a namespace of the run's own.
	kc := k8stest.Start(b)
	kc.ImportImage(b, imagetest.Tag)
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := kc.Clientset().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer kc.Clientset().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) //nolint:errcheck
	kb, err := kubernetes.NewFromREST(context.Background(), kubernetes.Config{Namespace: ns, Owner: testenv.UniqueOwner(b), Image: imagetest.Tag,
		ImagePullPolicy: corev1.PullNever, UnsafeUnenforcedNetworkPolicy: true}, kc.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	var bareL, padL, bareD, padD, bareK, padK []time.Duration
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			bareL = append(bareL, sandboxtest.BareBwrap(b))
			d, done := paddockStart(b, lb, fmt.Sprintf("bench-l-%d-%d", i, r))
			padL = append(padL, d)
			done()
			bareD = append(bareD, sandboxtest.BareDocker(b, cli, img, ""))
			d, done = paddockStart(b, db, fmt.Sprintf("bench-d-%d-%d", i, r))
			padD = append(padD, d)
			done()
			bareK = append(bareK, sandboxtest.BareKube(b, kc.Clientset(), ns, imagetest.Tag))
			d, done = paddockStart(b, kb, fmt.Sprintf("bench-k-%d-%d", i, r))
			padK = append(padK, d)
			done()
		}
	}
	t := perf.Table{Title: "Box create → guest ready vs bare backend start (ms)", Header: []string{"backend", "bare p50", "paddock p50", "added p50", "bare p90", "paddock p90"}}
	for _, row := range []struct {
		name      string
		bare, pad []time.Duration
	}{{"local (bwrap)", bareL, padL}, {"docker", bareD, padD}, {"kubernetes (test cluster)", bareK, padK}} {
		b50, p50 := perf.Pct(row.bare, .5), perf.Pct(row.pad, .5)
		t.Add(row.name, perf.MS(b50), perf.MS(p50), perf.MS(p50-b50), perf.MS(perf.Pct(row.bare, .9)), perf.MS(perf.Pct(row.pad, .9)))
		b.ReportMetric(float64((p50-b50).Microseconds())/1000, "added-ms/"+row.name[:5])
	}
	t.Write(os.Stderr)
}

// BenchmarkChannel compares the channel (round trip: a ping stream;
// throughput: 64 MiB of a process's stdout) with a loopback TCP connection
// on the same host.
func BenchmarkChannel(b *testing.B) {
	testenv.Root(b)
	testenv.LookPath(b, "bwrap")
	lb, err := local.New(local.Config{Root: filepath.Join(testenv.TraversableTempDir(b), "local"), GuestBinary: testenv.GuestBinary(b)})
	if err != nil {
		b.Fatal(err)
	}
	_, done := paddockStart(b, lb, "bench-chan")
	defer done()
	recs, _ := lb.List(context.Background())
	var id string
	for _, o := range recs {
		if o.Kind == sandbox.KindBox && o.Session == "bench-chan" {
			id = o.ID
		}
	}
	conn, err := lb.Connect(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	cl, _ := channel.NewClient(conn)
	defer cl.Close()

	// Loopback TCP echo for comparison.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
	tc, _ := net.Dial("tcp", ln.Addr().String())
	defer tc.Close()
	buf := make([]byte, 64)

	var chRTT, tcpRTT []time.Duration
	var chTP, tcpTP []float64
	const size = 64 << 20
	for i := 0; i < b.N; i++ {
		for r := 0; r < 200; r++ {
			_, d, err := cl.Ping(time.Now().Add(5 * time.Second))
			if err != nil {
				b.Fatal(err)
			}
			chRTT = append(chRTT, d)
			t0 := time.Now()
			tc.Write(buf[:16])
			io.ReadFull(tc, buf[:16])
			tcpRTT = append(tcpRTT, time.Since(t0))
		}
		for r := 0; r < 3; r++ {
			var n countWriter
			t0 := time.Now()
			p, err := cl.Exec(channel.ExecOptions{Argv: []string{"head", "-c", fmt.Sprint(size), "/dev/zero"}, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &n})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Wait(); err != nil || n != size {
				b.Fatalf("%v %d", err, n)
			}
			chTP = append(chTP, float64(size)/time.Since(t0).Seconds()/(1<<20))
			t0 = time.Now()
			go func() { tc.Write(bytes.Repeat([]byte{0}, size)) }()
			io.CopyN(io.Discard, tc, size)
			tcpTP = append(tcpTP, float64(size)/time.Since(t0).Seconds()/(1<<20))
		}
	}
	t := perf.Table{Title: "Channel vs loopback TCP", Header: []string{"measure", "loopback TCP", "channel"}}
	t.Add("round trip p50 (ms)", perf.MS(perf.Pct(tcpRTT, .5)), perf.MS(perf.Pct(chRTT, .5)))
	t.Add("round trip p99 (ms)", perf.MS(perf.Pct(tcpRTT, .99)), perf.MS(perf.Pct(chRTT, .99)))
	t.Add("throughput (MiB/s, best of 3)", fmt.Sprintf("%.0f", maxOf(tcpTP)), fmt.Sprintf("%.0f", maxOf(chTP)))
	t.Write(os.Stderr)
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// BenchmarkRuntimes: boxes on a shared kernel and on gVisor side by side
// in one run, on both backends that run gVisor here: local (bwrap, and
// runsc run directly) and docker (runc, and runsc as `make deps GVISOR=1`
// registers it; both with --directfs=false). For each: create → guest
// ready against the bare runtime running /bin/true; the channel's round
// trip (what a key's echo rides on); the idle box's memory (the PSS of
// every host process of its cgroup); and, once per runtime, work in the
// box's /workspace: find over /usr (the host's on local, the image's on
// docker), and git status over a repository of 50,000 small files in 250
// directories, in the box after a restart (a new sandbox: gVisor's inode
// numbers are new), with
// core.checkStat=minimal as paddock sets it in gVisor boxes, and with
// git's default, first and second; and go build of a small program with a
// cold cache where the box has a Go toolchain. PADDOCK_BENCH_KINDS (comma-separated,
// e.g. local/bwrap,local/runsc) runs only those.
func BenchmarkRuntimes(b *testing.B) {
	testenv.Root(b)
	ctx := context.Background()
	cli := imagetest.Docker(b)
	img := imagetest.BoxImage(b, cli)
	db, err := docker.New(ctx, docker.Config{Image: img, Dir: filepath.Join(testenv.TraversableTempDir(b), "docker"), Owner: testenv.UniqueOwner(b)})
	if err != nil {
		b.Fatal(err)
	}
	if !slices.Contains(db.Capabilities(ctx).Runtimes, "runsc") {
		testenv.Missing(b, "the Docker daemon has no runtime runsc; `make deps GVISOR=1` builds and registers it")
	}
	lb, err := local.New(local.Config{Root: filepath.Join(testenv.TraversableTempDir(b), "local"), GuestBinary: testenv.GuestBinary(b)})
	if err != nil {
		b.Fatal(err)
	}
	if !slices.Contains(lb.Capabilities(ctx).Runtimes, runtimes.Runsc) {
		testenv.Missing(b, "no runsc at "+runtimes.RunscPath()+"; `make deps GVISOR=1` builds it")
	}
	type row struct {
		bare, start, rtt []time.Duration
		pss              []int64
		work             map[string]time.Duration
		files            string
	}
	kinds := []string{"local/bwrap", "local/runsc", "docker/runc", "docker/runsc"}
	if only := os.Getenv("PADDOCK_BENCH_KINDS"); only != "" {
		kinds = strings.Split(only, ",")
	}
	rows := map[string]*row{}
	for _, k := range kinds {
		rows[k] = &row{work: map[string]time.Duration{}}
	}
	rounds := perf.Rounds(5)
	n := 0
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, kind := range kinds {
				backend, rt, _ := strings.Cut(kind, "/")
				rw := rows[kind]
				n++
				var be sandbox.Backend = db
				switch {
				case backend == "local" && rt == runtimes.Runsc:
					be = lb
					rw.bare = append(rw.bare, sandboxtest.BareRunsc(b, runtimes.RunscPath()))
				case backend == "local":
					be = lb
					rw.bare = append(rw.bare, sandboxtest.BareBwrap(b))
				default:
					rw.bare = append(rw.bare, sandboxtest.BareDocker(b, cli, img, rt))
				}
				d, id, cl, done := paddockStartOpts(b, be, sandbox.CreateOptions{Session: fmt.Sprintf("bench-rt-%s-%s-%d", backend, rt, n), Runtime: rt})
				rw.start = append(rw.start, d)
				for k := 0; k < 50; k++ {
					_, d, err := cl.Ping(time.Now().Add(5 * time.Second))
					if err != nil {
						b.Fatal(err)
					}
					rw.rtt = append(rw.rtt, d)
				}
				time.Sleep(time.Second) // idle
				if backend == "local" {
					pss, err := perf.CgroupPSS(lb.CgroupProcs(id))
					if err != nil {
						b.Fatal(err)
					}
					rw.pss = append(rw.pss, pss)
				} else {
					rw.pss = append(rw.pss, sandboxtest.DockerBoxPSS(b, cli, id))
				}
				if r == 0 && i == 0 {
					cl = workInBox(b, be, id, cl, rt == runtimes.Runsc, rw.work, &rw.files)
				}
				cl.Close()
				done()
			}
		}
	}
	t := perf.Table{Title: "Boxes on a shared kernel and on gVisor (runsc): start, channel, idle memory (p50)",
		Header: []string{"backend/runtime", "bare start (ms)", "create → guest ready (ms)", "channel round trip (ms)", "idle box PSS (MiB)"}}
	for _, kind := range kinds {
		rw := rows[kind]
		slices.Sort(rw.pss)
		t.Add(kind, perf.MS(perf.Pct(rw.bare, .5)), perf.MS(perf.Pct(rw.start, .5)), perf.MS(perf.Pct(rw.rtt, .5)), fmt.Sprintf("%.1f", float64(rw.pss[len(rw.pss)/2])/(1<<20)))
	}
	t.Write(os.Stderr)
	w := perf.Table{Title: "Work in the box after a restart (ms, one run each)", Header: []string{"backend/runtime", "files", "find /usr", "go build (cold cache)", "git status (checkStat=minimal)", "git status (default), first", "git status (default), second"}}
	for _, kind := range kinds {
		rw := rows[kind]
		gb := "-" // no Go toolchain in the box
		if rw.work["build"] >= 0 {
			gb = perf.MS(rw.work["build"])
		}
		w.Add(kind, rw.files, perf.MS(rw.work["find"]), gb, perf.MS(rw.work["minimal"]), perf.MS(rw.work["first"]), perf.MS(rw.work["second"]))
	}
	w.Write(os.Stderr)
}

// workInBox fills the box's /workspace with a git repository, restarts
// the box, and times the work in it (in the box's own clock, without the
// channel's exec). It returns the new channel.
func workInBox(b *testing.B, be sandbox.Backend, id string, cl *channel.Client, gvisor bool, work map[string]time.Duration, files *string) *channel.Client {
	env := sandboxtest.Env
	if gvisor { // with the git settings paddock gives claude there (runner.GVisorGitConfig)
		env = append(slices.Clip(env), "GIT_CONFIG_PARAMETERS='core.createobject'='rename'")
	}
	run := func(cl *channel.Client, script string) string {
		var out, errb bytes.Buffer
		p, err := cl.Exec(channel.ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: env, Dir: sandbox.WorkspaceDir, Stdout: &out, Stderr: &errb})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); code != 0 || err != nil {
			b.Fatalf("%q: %d %v %s", script, code, err, errb.String())
		}
		return out.String()
	}
	run(cl, `mkdir r && cd r && for d in $(seq 250); do mkdir d$d; for f in $(seq 200); do echo "$d $f" > d$d/f$f; done; done && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm x`)
	*files = strings.TrimSpace(run(cl, `cd r && git ls-files | wc -l`))
	cl.Close()
	ctx := context.Background()
	if err := be.Stop(ctx, id, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil {
		b.Fatal(err)
	}
	if _, err := be.Start(ctx, id); err != nil {
		b.Fatal(err)
	}
	cl = connect(b, be, id)
	const timed = `t() { s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }; `
	// The build: a program of package main importing fmt, with an empty
	// build cache (the runtime and fmt's dependencies compiled from the
	// toolchain's source), where the box has a Go toolchain (local boxes
	// see the host's /usr/local/go); -1 where it has none.
	const build = `gobuild() { [ -x /usr/local/go/bin/go ] || { echo -1; return; }; mkdir -p /tmp/m && printf 'package main\nimport "fmt"\nfunc main() { fmt.Println(1) }\n' > /tmp/m/m.go && ` +
		`t env -C /tmp/m GOCACHE=/tmp/gocache GOPATH=/tmp/gopath GO111MODULE=off GOTOOLCHAIN=local /usr/local/go/bin/go build -o m m.go; }; `
	out := run(cl, timed+build+`t find /usr; gobuild; cd r; t git -c core.checkstat=minimal status; t git status; t git status`)
	f := strings.Fields(out)
	if len(f) != 5 {
		b.Fatalf("timings: %q", out)
	}
	for k, name := range []string{"find", "build", "minimal", "first", "second"} {
		us, _ := strconv.ParseInt(f[k], 10, 64)
		work[name] = time.Duration(us) * time.Microsecond
	}
	return cl
}
