package credproxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/perf"
	"github.com/paddockhq/paddock/internal/runtimepolicy"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/sessiontoken"
	"github.com/paddockhq/paddock/internal/store"
	"github.com/paddockhq/paddock/internal/testenv"
)

// benchUpstream answers a small JSON body, or for /v1/messages with
// "stream" in the query an SSE stream whose events carry their send time.
func benchUpstream(events int, gap time.Duration) http.Handler {
	small := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("beta") == "" || r.Header.Get("X-Bench-Stream") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(small)))
			w.Write(small)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < events; i++ {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"t\":%d}\n\n", time.Now().UnixNano())
			fl.Flush()
			time.Sleep(gap)
		}
	})
}

type benchEnv struct {
	direct, proxy string
	auth          http.Header
	close         func()
}

func newBenchEnv(tb testing.TB, up http.Handler) *benchEnv {
	upSrv := httptest.NewServer(up)
	u, _ := url.Parse(upSrv.URL)
	reg, _ := sessiontoken.New(store.NewMemory())
	tok, _ := reg.Issue("bench", credential.KindOAuth)
	dir := tb.TempDir()
	dl, err := decisionlog.OpenDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	// The real logging path: JSON log lines and the per-session file.
	p, err := New(Options{Upstream: u, Credential: credential.Static{Kind: credential.KindOAuth, Secret: secret.New("sk-fake-bench")},
		Tokens: reg, Decisions: dl, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	ps := startTestServer(tb, p, 10*time.Second)
	return &benchEnv{
		direct: upSrv.URL, proxy: ps.URL,
		auth:  http.Header{"Authorization": {"Bearer " + tok.Reveal()}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}},
		close: func() { ps.Close(); p.Drain(); dl.Close(); upSrv.Close() },
	}
}

// benchChildEnv, when set in the environment of this test binary, makes it
// a stand-alone credential proxy to the upstream it names (see TestMain).
const benchChildEnv = "PADDOCK_BENCH_PROXY_UPSTREAM"

// TestMain lets the benchmark run paddock's proxy in its own process, as the
// Runner does, so it does not share a Go runtime with the load it measures.
func TestMain(m *testing.M) {
	if v := os.Getenv(goFloorEnv); v != "" {
		up, cred, _ := strings.Cut(v, " ")
		if err := runGoFloor(up, cred); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if up := os.Getenv(benchChildEnv); up != "" {
		if err := runProxyChild(up); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runProxyChild serves the proxy on a loopback port, prints "addr token" on
// stdout and serves until its stdin closes.
func runProxyChild(upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	runtimepolicy.Apply(os.Getenv) // as the Runner does
	reg, _ := sessiontoken.New(store.NewMemory())
	tok, _ := reg.Issue("bench", credential.KindOAuth)
	dir, err := os.MkdirTemp("", "paddock-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dl, err := decisionlog.OpenDir(dir)
	if err != nil {
		return err
	}
	p, err := New(Options{Upstream: u, Credential: credential.Static{Kind: credential.KindOAuth, Secret: secret.New("sk-fake-bench")},
		Tokens: reg, Decisions: dl, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := NewServer(p, 10*time.Second)
	go srv.Serve(l)
	// To see where the proxy's own process spends its time under the
	// benchmark: PADDOCK_BENCH_PROXY_CPUPROFILE=/tmp/proxy.prof.
	if f := os.Getenv("PADDOCK_BENCH_PROXY_CPUPROFILE"); f != "" {
		w, _ := os.Create(f)
		pprof.StartCPUProfile(w)
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("%s %s\n", l.Addr(), tok.Reveal())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	p.Drain()
	return dl.Close()
}

// startProxyProcessPID runs runProxyChild in a child process and returns its
// base URL, the headers that carry its session token, and its pid.
func startProxyProcessPID(tb testing.TB, upstream string, hdr http.Header) (string, http.Header, int) {
	tb.Helper()
	line, pid := startBenchChild(tb, benchChildEnv+"="+upstream)
	addr, tok, ok := strings.Cut(line, " ")
	if !ok {
		tb.Fatalf("proxy child: %q", line)
	}
	h := hdr.Clone()
	h.Set("Authorization", "Bearer "+tok)
	return "http://" + addr, h, pid
}

// startBenchChild runs this test binary again with env added, as one of
// the benchmark's proxies (see TestMain), and returns the first line it
// prints and its pid. The child gets the Runner's runtime settings: GODEBUG
// as runtimepolicy.Reexec sets it (GOGC and the memory limit it applies
// itself). It ends when tb does: its stdin closes.
func startBenchChild(tb testing.TB, env string) (string, int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env, _ = runtimepolicy.Env(append(os.Environ(), env))
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("bench child: %q %v", line, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

const benchBody = `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

// latencies runs n small requests at concurrency c against base and returns
// each request's latency.
func latencies(tb testing.TB, cl *http.Client, base string, hdr http.Header, c, n int) []time.Duration {
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(benchBody))
				req.Header = hdr.Clone()
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err != nil {
					tb.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				out[i] = time.Since(t0)
				if resp.StatusCode != 200 {
					tb.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// eventDelays opens c streams at once and returns every event's delay from
// the upstream's write to the client's read.
func eventDelays(tb testing.TB, cl *http.Client, base string, hdr http.Header, c int) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", base+"/v1/messages?beta=true", strings.NewReader(benchBody))
			req.Header = hdr.Clone()
			req.Header.Set("X-Bench-Stream", "1")
			resp, err := cl.Do(req)
			if err != nil {
				tb.Error(err)
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			var local []time.Duration
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					break
				}
				if i := bytes.Index(line, []byte(`"t":`)); i >= 0 {
					ns, _ := strconv.ParseInt(string(bytes.TrimRight(line[i+4:], "}\n")), 10, 64)
					local = append(local, time.Since(time.Unix(0, ns)))
				}
			}
			mu.Lock()
			out = append(out, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// BenchmarkProxyVsDirect measures, in one run with rounds interleaved, what
// paddock's credential proxy and two references, nginx (nginx_test.go) and
// the Go floor (gofloor_test.go), each add over calling the same fake
// upstream directly: a small request's latency at concurrency 1, 32 and 64,
// each SSE event's delay with 1, 32 and 64 concurrent streams, small
// requests per second, and each proxy process's CPU per small request. It
// prints four tables and reports paddock's added p50s as metrics. Run it
// with `make bench`; without nginx installed the nginx columns are empty.
func BenchmarkProxyVsDirect(b *testing.B) {
	rounds := 6
	if s := os.Getenv("PADDOCK_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	env := newBenchEnv(b, benchUpstream(40, 2*time.Millisecond))
	defer env.close()
	type target struct {
		name, base string
		hdr        http.Header
		pid        int // the proxy's own process (nginx: its master), or 0
	}
	pbase, phdr, ppid := startProxyProcessPID(b, env.direct, env.auth)
	targets := []target{{"direct", env.direct, env.auth, 0}, {"paddock", pbase, phdr, ppid}, {"paddock in-process", env.proxy, env.auth, 0}}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil || os.Getenv(testenv.RequireEnv) != "" {
		nbase, npid := startNginxPID(b, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
		targets = append(targets, target{"nginx", nbase, env.auth, npid})
	} else {
		b.Log("nginx is not installed; its columns stay empty (make deps installs it)")
	}
	fbase, fpid := startGoFloorPID(b, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
	targets = append(targets, target{"Go floor", fbase, env.auth, fpid})
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 512, DisableCompression: true}}
	type row struct {
		name    string
		c       int
		sse     bool
		samples map[string][]time.Duration
		reqs    map[string]int
		elapsed map[string]time.Duration
		cpu     map[string]time.Duration // the proxy process's, over the small requests
	}
	var rows []*row
	for _, c := range []int{1, 32, 64} {
		rows = append(rows, &row{name: fmt.Sprintf("small request, c=%d", c), c: c})
	}
	for _, c := range []int{1, 32, 64} {
		rows = append(rows, &row{name: fmt.Sprintf("SSE event, %d streams", c), c: c, sse: true})
	}
	for _, rw := range rows {
		rw.samples, rw.reqs, rw.elapsed, rw.cpu = map[string][]time.Duration{}, map[string]int{}, map[string]time.Duration{}, map[string]time.Duration{}
	}
	for _, tg := range targets { // warm connections and pools
		latencies(b, cl, tg.base, tg.hdr, 64, 400)
	}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range targets {
				tg := targets[(k+r)%len(targets)] // rotate the order each round
				for _, rw := range rows {
					t0 := time.Now()
					var d []time.Duration
					if rw.sse {
						d = eventDelays(b, cl, tg.base, tg.hdr, rw.c)
					} else {
						cpu0 := treeCPU(tg.pid)
						d = latencies(b, cl, tg.base, tg.hdr, rw.c, max(400, 50*rw.c))
						rw.reqs[tg.name] += len(d)
						rw.elapsed[tg.name] += time.Since(t0)
						rw.cpu[tg.name] += treeCPU(tg.pid) - cpu0
					}
					rw.samples[tg.name] = append(rw.samples[tg.name], d...)
				}
			}
		}
	}
	var names []string
	for _, tg := range targets {
		names = append(names, tg.name)
	}
	var tables []*perf.Table
	for _, p := range []float64{.5, .99} {
		t := &perf.Table{Title: fmt.Sprintf("Latency p%.0f, ms: paddock's proxy (own process, as the Runner runs it; and in the benchmark's process), nginx and the Go floor (gofloor_test.go) against a direct call", p*100)}
		t.Header = append([]string{"case"}, names...)
		for _, n := range names[1:] {
			t.Header = append(t.Header, n+" added")
		}
		for _, rw := range rows {
			base := perf.Pct(rw.samples["direct"], p)
			cells := []string{rw.name}
			for _, n := range names {
				cells = append(cells, perf.MS(perf.Pct(rw.samples[n], p)))
			}
			for _, n := range names[1:] {
				cells = append(cells, perf.MS(perf.Pct(rw.samples[n], p)-base))
			}
			t.Add(cells...)
		}
		tables = append(tables, t)
	}
	rps := &perf.Table{Title: "Small requests per second (client, proxy and upstream share the machine)", Header: append([]string{"concurrency"}, names...)}
	for _, rw := range rows {
		metric := strings.NewReplacer(" ", "", ",", "_", "=", "").Replace(rw.name)
		b.ReportMetric(float64((perf.Pct(rw.samples["paddock"], .5)-perf.Pct(rw.samples["direct"], .5)).Microseconds())/1000, "added-p50-ms/"+metric)
		if !rw.sse {
			cells := []string{strconv.Itoa(rw.c)}
			for _, n := range names {
				cells = append(cells, fmt.Sprintf("%.0f", float64(rw.reqs[n])/rw.elapsed[n].Seconds()))
			}
			rps.Add(cells...)
		}
	}
	cpu := &perf.Table{Title: "Proxy CPU per small request, µs: the proxy's own processes, user and kernel time (from /proc/<pid>/task/*/schedstat)", Header: []string{"concurrency"}}
	var cpuNames []string
	for _, tg := range targets {
		if tg.pid != 0 {
			cpuNames = append(cpuNames, tg.name)
		}
	}
	cpu.Header = append(cpu.Header, cpuNames...)
	for _, rw := range rows {
		if rw.sse {
			continue
		}
		cells := []string{strconv.Itoa(rw.c)}
		for _, n := range cpuNames {
			cells = append(cells, fmt.Sprintf("%.1f", float64(rw.cpu[n].Nanoseconds())/1000/float64(rw.reqs[n])))
		}
		cpu.Add(cells...)
	}
	for _, t := range append(tables, rps, cpu) {
		t.Write(os.Stderr)
	}
}

// treeCPU is the on-CPU time so far of process pid, its threads and its
// children's (nginx's workers), from the scheduler's nanosecond counts;
// 0 for pid 0.
func treeCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	pids := []int{pid}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; it ends at the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(strings.Split(st, "/")[2])
			pids = append(pids, child)
		}
	}
	var total time.Duration
	for _, p := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				total += time.Duration(ns)
			}
		}
	}
	return total
}
