package credproxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credential"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/perf"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/sessiontoken"
	"github.com/paddockhq/paddock/internal/store"
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
	ps := httptest.NewUnstartedServer(p)
	ps.Config = NewServer(p, 10*time.Second)
	ps.Start()
	return &benchEnv{
		direct: upSrv.URL, proxy: ps.URL,
		auth:  http.Header{"Authorization": {"Bearer " + tok.Reveal()}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}},
		close: func() { ps.Close(); p.Drain(); dl.Close(); upSrv.Close() },
	}
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

// BenchmarkProxyVsDirect measures, in one run with rounds interleaved, the
// latency the credential proxy adds to a small request (concurrency 1 and
// 32) and to each SSE event (1 and 64 concurrent streams), against calling
// the same fake upstream directly. It prints a table and reports the added
// p50s as metrics. Run it with `make bench`.
func BenchmarkProxyVsDirect(b *testing.B) {
	rounds := 6
	if s := os.Getenv("PADDOCK_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	env := newBenchEnv(b, benchUpstream(40, 2*time.Millisecond))
	defer env.close()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256, DisableCompression: true}}
	type row struct {
		name       string
		direct, px []time.Duration
	}
	rows := []*row{{name: "small request, c=1"}, {name: "small request, c=32"}, {name: "SSE event, 1 stream"}, {name: "SSE event, 64 streams"}}
	// Warm both paths (connections, pools).
	latencies(b, cl, env.direct, env.auth, 32, 200)
	latencies(b, cl, env.proxy, env.auth, 32, 200)
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			targets := []string{env.direct, env.proxy}
			if r%2 == 1 {
				targets = []string{env.proxy, env.direct} // interleave the order too
			}
			for _, base := range targets {
				isProxy := base == env.proxy
				add := func(rw *row, d []time.Duration) {
					if isProxy {
						rw.px = append(rw.px, d...)
					} else {
						rw.direct = append(rw.direct, d...)
					}
				}
				add(rows[0], latencies(b, cl, base, env.auth, 1, 400))
				add(rows[1], latencies(b, cl, base, env.auth, 32, 1600))
				add(rows[2], eventDelays(b, cl, base, env.auth, 1))
				add(rows[3], eventDelays(b, cl, base, env.auth, 64))
			}
		}
	}
	t := perf.Table{Title: "Credential proxy vs direct (ms)", Header: []string{"case", "direct p50", "proxy p50", "direct p99", "proxy p99", "added p50", "added p99"}}
	for _, rw := range rows {
		d50, p50, d99, p99 := perf.Pct(rw.direct, .5), perf.Pct(rw.px, .5), perf.Pct(rw.direct, .99), perf.Pct(rw.px, .99)
		t.Add(rw.name, perf.MS(d50), perf.MS(p50), perf.MS(d99), perf.MS(p99), perf.MS(p50-d50), perf.MS(p99-d99))
		metric := strings.NewReplacer(" ", "", ",", "_", "=", "").Replace(rw.name)
		b.ReportMetric(float64((p50-d50).Microseconds())/1000, "added-p50-ms/"+metric)
	}
	t.Write(os.Stderr)
}
