package credproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/daemon/runtimepolicy"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/testkit/perf"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
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

// baselineEnv names another build of paddock (with its paddock-guest
// beside it), for BenchmarkProxyVsDirect to run as "baseline serve" beside
// this one's: e.g. git worktree add /tmp/old HEAD~1, then go build -o
// /tmp/old/bin/ ./cmd/... there, and PADDOCK_BENCH_BASELINE=/tmp/old/bin/paddock.
const baselineEnv = "PADDOCK_BENCH_BASELINE"

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

// conversationBody is a valid Messages API request of exactly size bytes
// (for a size of a few hundred or more): a system prompt and a conversation
// of alternating user and assistant turns ending with the user's, as Claude
// Code sends the whole conversation on every turn.
func conversationBody(size int, stream bool) []byte {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type message struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	req := struct {
		Model     string    `json:"model"`
		MaxTokens int       `json:"max_tokens"`
		Stream    bool      `json:"stream,omitempty"`
		System    string    `json:"system"`
		Messages  []message `json:"messages"`
	}{Model: "claude-x", MaxTokens: 16, Stream: stream, System: "You are Claude Code, a coding assistant."}
	// Text that looks like a session's: code and prose, nothing to escape.
	const text = "func (s *Server) handle(w http.ResponseWriter, r *http.Request) { s.mu.Lock(); defer s.mu.Unlock() } // The handler takes the lock for the map. "
	enc := func() []byte { b, _ := json.Marshal(req); return b }
	turn := strings.Repeat(text, 2000/len(text))
	for len(enc())+2*len(turn)+200 < size { // whole exchanges, then the user's last turn
		req.Messages = append(req.Messages, message{"user", []block{{"text", turn}}}, message{"assistant", []block{{"text", turn}}})
	}
	req.Messages = append(req.Messages, message{"user", []block{{"text", ""}}})
	room := max(size-len(enc()), 0)
	req.Messages[len(req.Messages)-1].Content[0].Text = strings.Repeat(text, room/len(text)) + strings.Repeat("y", room%len(text))
	return enc()
}

// latencies runs n small requests at concurrency c against base and returns
// each request's latency.
func latencies(tb testing.TB, cl *http.Client, base string, hdr http.Header, c, n int) []time.Duration {
	return latenciesBody(tb, cl, base, hdr, []byte(benchBody), c, n, 0)
}

// latenciesBody is latencies with the request body given; each client
// waits gap after each answer before its next request.
func latenciesBody(tb testing.TB, cl *http.Client, base string, hdr http.Header, body []byte, c, n int, gap time.Duration) []time.Duration {
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
				req, _ := http.NewRequest("POST", base+"/v1/messages", bytes.NewReader(body))
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
					tb.Errorf("%s: status %d", base, resp.StatusCode)
				}
				time.Sleep(gap)
			}
		}()
	}
	wg.Wait()
	return out
}

// eventDelays opens c streams at once and returns every event's delay from
// the upstream's write to the client's read.
func eventDelays(tb testing.TB, cl *http.Client, base string, hdr http.Header, c int) []time.Duration {
	return eventDelaysBody(tb, cl, base, hdr, []byte(benchBody), c)
}

// eventDelaysBody is eventDelays with the request body given.
func eventDelaysBody(tb testing.TB, cl *http.Client, base string, hdr http.Header, body []byte, c int) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", base+"/v1/messages?beta=true", bytes.NewReader(body))
			req.Header = hdr.Clone()
			req.Header.Set("X-Bench-Stream", "1")
			resp, err := cl.Do(req)
			if err != nil {
				tb.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				tb.Errorf("%s: stream status %d", base, resp.StatusCode)
			}
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
// paddock's credential proxy and the references, nginx (nginx_test.go) and
// the Go floor (gofloor_test.go), each add over calling the same fake
// upstream directly. paddock is measured as it really runs: the real
// `paddock serve` binary with its defaults (decision log, metrics), on its
// host listener, with the token of a live session on the local backend
// (serve_bench_test.go); where that cannot run (not root, no bubblewrap,
// tmux or pinned Claude Code) the proxy in a child process of this test
// binary stands in, and the log says so. Beside it, the same proxy in the
// benchmark's own process.
//
// The rows: a small request's latency at concurrency 1, 32 and 64; requests
// with a whole conversation as body (10 KB, 100 KB, 1 MB) at concurrency
// 1, back to back and 3 ms apart (as turns come); each SSE event's delay with 1, 32 and 64 concurrent streams, and with
// 100 KB and 1 MB request bodies; requests per second; and each proxy
// process's CPU per request. It prints the tables, then the targets of
// issue 21 with what was measured (reported, never asserted), and reports
// the main ratios as metrics. Run it with `make bench`; without nginx
// installed the nginx columns are empty. PADDOCK_BENCH_CHILD=1 adds the
// child-process proxy as a column beside the Runner, to show what the
// Runner adds around it.
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
		cpu        func() schedCount // the proxy's own processes' CPU and context switches so far, or nil
	}
	mainName := "paddock serve"
	targets := []target{{"direct", env.direct, env.auth, nil}}
	if claude, missing := servePrereqs(); missing == "" {
		base, hdr, pid := startPaddockServe(b, "", env.direct, claude, "sk-fake-bench", env.auth)
		// The Runner's own process only: its boxes' processes are not the proxy's.
		targets = append(targets, target{mainName, base, hdr, func() schedCount { return procSched(pid) }})
		if bin := os.Getenv(baselineEnv); bin != "" {
			for _, f := range []string{bin, filepath.Join(filepath.Dir(bin), "paddock-guest")} {
				why := "not an executable file"
				if fi, err := os.Stat(f); err != nil {
					why = err.Error()
				} else if !fi.IsDir() && fi.Mode()&0o111 != 0 {
					continue
				}
				b.Fatalf("%s=%s: %s: %s; build the older commit's paddock and paddock-guest into one directory: git worktree add /tmp/old <commit> && cd /tmp/old && go build -o /tmp/old/bin/ ./cmd/...", baselineEnv, bin, f, why)
			}
			// A change measured against the code before it, interleaved in
			// one run: the machine's hour moves both alike.
			base, hdr, pid := startPaddockServe(b, bin, env.direct, claude, "sk-fake-bench", env.auth)
			targets = append(targets, target{"baseline serve", base, hdr, func() schedCount { return procSched(pid) }})
		}
	} else {
		if os.Getenv(testenv.RequireEnv) != "" {
			b.Fatalf("the real Runner cannot run a session here: %s", missing)
		}
		b.Logf("the real Runner cannot run a session here (%s); paddock's proxy in a child process stands in", missing)
		mainName = "paddock (child)"
		pbase, phdr, ppid := startProxyProcessPID(b, env.direct, env.auth)
		targets = append(targets, target{mainName, pbase, phdr, func() schedCount { return treeSched(ppid) }})
	}
	if mainName != "paddock (child)" && os.Getenv("PADDOCK_BENCH_CHILD") != "" {
		// What the Runner adds around the proxy: the same proxy alone in a
		// child process of this test binary.
		pbase, phdr, ppid := startProxyProcessPID(b, env.direct, env.auth)
		targets = append(targets, target{"paddock (child)", pbase, phdr, func() schedCount { return treeSched(ppid) }})
	}
	targets = append(targets, target{"paddock in-process", env.proxy, env.auth, nil})
	hasNginx := false
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil || os.Getenv(testenv.RequireEnv) != "" {
		nbase, npid := startNginxPID(b, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
		targets = append(targets, target{"nginx", nbase, env.auth, func() schedCount { return treeSched(npid) }})
		hasNginx = true
	} else {
		b.Log("nginx is not installed; its columns stay empty (make deps installs it)")
	}
	fbase, fpid := startGoFloorPID(b, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
	targets = append(targets, target{"Go floor", fbase, env.auth, func() schedCount { return treeSched(fpid) }})
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 512, DisableCompression: true}}

	type row struct {
		name    string
		c, n    int           // concurrency (streams), requests per round
		gap     time.Duration // a pause after each answer
		body    []byte
		sse     bool
		samples map[string][]time.Duration
		reqs    map[string]int
		elapsed map[string]time.Duration
		cpu     map[string]time.Duration // the proxy process's, over the requests
		ins     map[string]int64         // the times its threads were put on a CPU
	}
	var rows []*row
	small := []byte(benchBody)
	// Under nginx's default client_max_body_size of 1 MiB.
	kb10, kb100, mb1 := conversationBody(10_000, false), conversationBody(100_000, false), conversationBody(1_000_000, false)
	kb100s, mb1s := conversationBody(100_000, true), conversationBody(1_000_000, true)
	for _, c := range []int{1, 32, 64} {
		rows = append(rows, &row{name: fmt.Sprintf("small request, c=%d", c), c: c, n: max(400, 50*c), body: small})
	}
	rows = append(rows, &row{name: "10 KB request, c=1", c: 1, n: 400, body: kb10},
		&row{name: "100 KB request, c=1", c: 1, n: 200, body: kb100},
		&row{name: "1 MB request, c=1", c: 1, n: 60, body: mb1},
		// As Claude Code sends them: a turn's request follows the last
		// answer after a pause (here 3 ms), not back to back.
		&row{name: "100 KB request, c=1, 3 ms apart", c: 1, n: 100, body: kb100, gap: 3 * time.Millisecond},
		&row{name: "1 MB request, c=1, 3 ms apart", c: 1, n: 60, body: mb1, gap: 3 * time.Millisecond})
	for _, c := range []int{1, 32, 64} {
		rows = append(rows, &row{name: fmt.Sprintf("SSE event, %d streams", c), c: c, sse: true, body: small})
	}
	rows = append(rows, &row{name: "SSE event, 1 streams, 100 KB request", c: 1, sse: true, body: kb100s},
		&row{name: "SSE event, 32 streams, 100 KB request", c: 32, sse: true, body: kb100s},
		&row{name: "SSE event, 1 streams, 1 MB request", c: 1, sse: true, body: mb1s})
	byName := map[string]*row{}
	for _, rw := range rows {
		rw.samples, rw.reqs, rw.elapsed, rw.cpu, rw.ins = map[string][]time.Duration{}, map[string]int{}, map[string]time.Duration{}, map[string]time.Duration{}, map[string]int64{}
		byName[rw.name] = rw
	}
	for _, tg := range targets { // warm connections, pools and buffers
		latencies(b, cl, tg.base, tg.hdr, 64, 400)
		latenciesBody(b, cl, tg.base, tg.hdr, mb1, 4, 16, 0)
	}
	cpuOf := func(tg target) schedCount {
		if tg.cpu == nil {
			return schedCount{}
		}
		return tg.cpu()
	}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range targets {
				tg := targets[(k+r)%len(targets)] // rotate the order each round
				for _, rw := range rows {
					t0 := time.Now()
					var d []time.Duration
					if rw.sse {
						d = eventDelaysBody(b, cl, tg.base, tg.hdr, rw.body, rw.c)
					} else {
						cpu0 := cpuOf(tg)
						d = latenciesBody(b, cl, tg.base, tg.hdr, rw.body, rw.c, rw.n, rw.gap)
						rw.reqs[tg.name] += len(d)
						rw.elapsed[tg.name] += time.Since(t0)
						cpu1 := cpuOf(tg)
						rw.cpu[tg.name] += cpu1.cpu - cpu0.cpu
						rw.ins[tg.name] += cpu1.ins - cpu0.ins
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
	fmt.Fprintf(os.Stderr, "Request bodies: small %d B; 10 KB %d B; 100 KB %d B; 1 MB %d B.\n\n", len(small), len(kb10), len(kb100), len(mb1))
	var tables []*perf.Table
	for _, p := range []float64{.5, .99} {
		t := &perf.Table{Title: fmt.Sprintf("Latency p%.0f, ms: %s, the same proxy in the benchmark's process, nginx and the Go floor (gofloor_test.go) against a direct call", p*100, mainName)}
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
	added := func(rw *row, n string, p float64) time.Duration {
		return perf.Pct(rw.samples[n], p) - perf.Pct(rw.samples["direct"], p)
	}
	rps := &perf.Table{Title: "Requests per second (client, proxy and upstream share the machine)", Header: append([]string{"case"}, names...)}
	for _, rw := range rows {
		metric := strings.NewReplacer(" ", "", ",", "_", "=", "").Replace(rw.name)
		b.ReportMetric(float64(added(rw, mainName, .5).Microseconds())/1000, "added-p50-ms/"+metric)
		b.ReportMetric(float64(added(rw, mainName, .99).Microseconds())/1000, "added-p99-ms/"+metric)
		if !rw.sse {
			cells := []string{rw.name}
			for _, n := range names {
				cells = append(cells, fmt.Sprintf("%.0f", float64(rw.reqs[n])/(rw.elapsed[n]-time.Duration(rw.reqs[n])*rw.gap/time.Duration(rw.c)).Seconds()))
			}
			rps.Add(cells...)
		}
	}
	cpu := &perf.Table{Title: "Proxy CPU per request, µs: the proxy's own processes, user and kernel time (from /proc/<pid>/task/*/schedstat; paddock serve: the Runner's process only, not its boxes)", Header: []string{"case"}}
	var cpuNames []string
	for _, tg := range targets {
		if tg.cpu != nil {
			cpuNames = append(cpuNames, tg.name)
		}
	}
	cpu.Header = append(cpu.Header, cpuNames...)
	cpuPer := func(rw *row, n string) float64 { return float64(rw.cpu[n].Nanoseconds()) / 1000 / float64(rw.reqs[n]) }
	for _, rw := range rows {
		if rw.sse {
			continue
		}
		cells := []string{rw.name}
		for _, n := range cpuNames {
			cells = append(cells, fmt.Sprintf("%.1f", cpuPer(rw, n)))
		}
		cpu.Add(cells...)
	}
	// On a machine where a context switch is dear (a PVM guest, where each
	// is a hypercall), this is where a proxy's extra work costs twice: a
	// thread that runs past its slice is preempted by the client or the
	// upstream its own write woke.
	ins := &perf.Table{Title: "Context switches per request: the times the proxy's threads were put on a CPU (schedstat's third field), over the requests", Header: append([]string{"case"}, cpuNames...)}
	for _, rw := range rows {
		if rw.sse {
			continue
		}
		cells := []string{rw.name}
		for _, n := range cpuNames {
			cells = append(cells, fmt.Sprintf("%.2f", float64(rw.ins[n])/float64(rw.reqs[n])))
		}
		ins.Add(cells...)
	}

	// Issue 21's targets, side by side with what this run measured.
	goals := &perf.Table{Title: "Targets (issue 21), reported, not asserted: " + mainName, Header: []string{"target", "measured", "limit", "met"}}
	verdict := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	for _, c := range []int{1, 32} {
		rw := byName[fmt.Sprintf("small request, c=%d", c)]
		for _, p := range []float64{.5, .99} {
			if !hasNginx {
				break
			}
			got, ref := added(rw, mainName, p), added(rw, "nginx", p)
			ratio := ms(got) / ms(ref)
			goals.Add(fmt.Sprintf("small request c=%d, added p%.0f vs nginx's", c, p*100), fmt.Sprintf("%s vs %s ms (%.2f×)", perf.MS(got), perf.MS(ref), ratio), "≤ 1.25×", verdict(got <= ref*5/4))
			b.ReportMetric(ratio, fmt.Sprintf("x-nginx-added-p%.0f/smallrequest_c%d", p*100, c))
		}
	}
	for _, c := range []int{1, 32, 64} {
		rw := byName[fmt.Sprintf("SSE event, %d streams", c)]
		if !hasNginx {
			break
		}
		got, ref := added(rw, mainName, .5), added(rw, "nginx", .5)
		// "Level": no more than 20 µs above nginx's added delay.
		goals.Add(fmt.Sprintf("SSE event, %d streams, added p50 vs nginx's", c), fmt.Sprintf("%s vs %s ms", perf.MS(got), perf.MS(ref)), "level (≤ +0.020 ms)", verdict(got-ref <= 20*time.Microsecond))
	}
	for _, name := range []string{"100 KB request, c=1", "1 MB request, c=1", "100 KB request, c=1, 3 ms apart", "1 MB request, c=1, 3 ms apart"} {
		got := added(byName[name], mainName, .5)
		goals.Add(name+", added p50 vs direct", perf.MS(got)+" ms", "≤ 0.200 ms", verdict(got <= 200*time.Microsecond))
	}
	for _, name := range []string{"SSE event, 1 streams, 100 KB request", "SSE event, 32 streams, 100 KB request", "SSE event, 1 streams, 1 MB request"} {
		got := added(byName[name], mainName, .99)
		goals.Add(name+", added p99 vs direct", perf.MS(got)+" ms", "≤ 1.000 ms", verdict(got <= time.Millisecond))
	}
	for _, name := range []string{"small request, c=1", "small request, c=32", "1 MB request, c=1"} {
		rw := byName[name]
		floor := cpuPer(rw, "Go floor")
		goals.Add(name+", CPU per request vs the Go floor", fmt.Sprintf("%.1f vs %.1f µs (%.2f×)", cpuPer(rw, mainName), floor, cpuPer(rw, mainName)/floor), "reported", "")
		b.ReportMetric(cpuPer(rw, mainName)/floor, "x-gofloor-cpu/"+strings.NewReplacer(" ", "", ",", "_", "=", "").Replace(name))
	}
	if _, ok := byName["small request, c=32"].reqs["baseline serve"]; ok {
		for _, name := range []string{"small request, c=1", "small request, c=32", "1 MB request, c=1"} {
			rw := byName[name]
			base := cpuPer(rw, "baseline serve")
			goals.Add(name+", CPU per request vs the baseline build", fmt.Sprintf("%.1f vs %.1f µs (%.2f×)", cpuPer(rw, mainName), base, cpuPer(rw, mainName)/base), "reported", "")
		}
	}
	for _, t := range append(tables, rps, cpu, ins, goals) {
		t.Write(os.Stderr)
	}
}

// schedCount is what the scheduler counted of a process's threads so far:
// their time on a CPU, and the times they were put on one.
type schedCount struct {
	cpu time.Duration
	ins int64
}

// procSched is the scheduler's counts so far for process pid's own
// threads, from /proc/<pid>/task/*/schedstat (nanoseconds on a CPU, time
// waiting, times run).
func procSched(pid int) schedCount {
	var total schedCount
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		if f := strings.Fields(string(b)); len(f) == 3 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			n, _ := strconv.ParseInt(f[2], 10, 64)
			total.cpu += time.Duration(ns)
			total.ins += n
		}
	}
	return total
}

// treeSched is procSched of process pid and its children (nginx's
// workers); zero for pid 0.
func treeSched(pid int) schedCount {
	if pid == 0 {
		return schedCount{}
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
	var total schedCount
	for _, p := range pids {
		c := procSched(p)
		total.cpu += c.cpu
		total.ins += c.ins
	}
	return total
}

// TestConversationBody: the benchmark's large bodies are valid Messages API
// requests of the size asked, ending with the user's turn.
func TestConversationBody(t *testing.T) {
	for _, n := range []int{10_000, 1_000_000} {
		b := conversationBody(n, true)
		var v struct {
			Stream   bool
			Messages []struct{ Role string }
		}
		if err := json.Unmarshal(b, &v); err != nil || len(b) != n || !v.Stream || v.Messages[len(v.Messages)-1].Role != "user" {
			t.Fatalf("%d: %d bytes, %+v, %v", n, len(b), v, err)
		}
	}
}
