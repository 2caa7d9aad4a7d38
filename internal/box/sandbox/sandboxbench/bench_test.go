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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/image/imagetest"
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
	ctx := context.Background()
	t0 := time.Now()
	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: session})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := be.Start(ctx, bx.ID); err != nil {
		b.Fatal(err)
	}
	conn, err := be.Connect(ctx, bx.ID)
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
	d := time.Since(t0)
	return d, func() { cl.Close(); _ = be.Remove(ctx, bx.ID, sandbox.RemoveOptions{}) }
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
			bareD = append(bareD, sandboxtest.BareDocker(b, cli, img))
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
