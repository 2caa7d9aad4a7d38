package credproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/perf"
)

// loadUpstream streams events 10 ms apart, each stamped with its send
// time; X-Load-Events says how many (a held-open stream sends one, then
// waits for the client to leave).
func loadUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.Header.Get("X-Load-Events"))
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < max(n, 1); i++ {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"t\":%d}\n\n", time.Now().UnixNano())
			fl.Flush()
			if n > 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if n == 0 {
			<-r.Context().Done()
		}
	})
}

// rssKB reads a process's resident set size.
func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// TestLoad drives N concurrent streaming sessions through paddock's proxy,
// in its own process as the Runner runs it, to the fake upstream on
// loopback for a fixed time: every stream must complete with all its
// events and no error. It reports throughput, event delay and the proxy
// process's memory per open stream. CI runs 200 streams for 10 s;
// PADDOCK_LOAD="200x60,1000x60" runs the full sizes.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test; -short given")
	}
	sizes := os.Getenv("PADDOCK_LOAD")
	if sizes == "" {
		sizes = "200x10"
	}
	up := httptest.NewServer(loadUpstream())
	defer up.Close()
	tab := perf.Table{Title: "Load: concurrent streaming sessions through paddock's proxy (own process), loopback",
		Header: []string{"streams", "seconds", "requests", "errors", "events/s", "event delay p50 ms", "event delay p99 ms", "proxy RSS idle MB", "proxy KB per open stream"}}
	for _, size := range strings.Split(sizes, ",") {
		ns, ds, _ := strings.Cut(size, "x")
		n, _ := strconv.Atoi(ns)
		secs, _ := strconv.Atoi(ds)
		if n <= 0 || secs <= 0 {
			t.Fatalf("PADDOCK_LOAD: bad size %q (want NxSECONDS)", size)
		}
		// A fresh proxy process per size, so its memory is measured from idle.
		base, hdr, pid := startProxyProcessPID(t, up.URL, http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}})
		cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxIdleConns: n, DisableCompression: true}}
		stream := func(ctx context.Context, events int, delays *[]time.Duration) (int, error) {
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/messages?beta=true", strings.NewReader(smallBody))
			req.Header = hdr.Clone()
			req.Header.Set("X-Load-Events", strconv.Itoa(events))
			resp, err := cl.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				return 0, fmt.Errorf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			got := 0
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					if err == io.EOF {
						return got, nil
					}
					return got, err
				}
				if i := bytes.Index(line, []byte(`"t":`)); i >= 0 {
					ns, _ := strconv.ParseInt(string(bytes.TrimRight(line[i+4:], "}\n")), 10, 64)
					got++
					if delays != nil {
						*delays = append(*delays, time.Since(time.Unix(0, ns)))
					}
					if events == 0 {
						return got, nil // held open: the caller keeps it until done
					}
				}
			}
		}
		// Phase 1: n streams held open at once; the proxy's memory per stream.
		if _, err := stream(context.Background(), 1, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		idle := rssKB(pid)
		ctx, cancel := context.WithCancel(context.Background())
		var open sync.WaitGroup
		var opened atomic.Int64
		held := make(chan struct{})
		for i := 0; i < n; i++ {
			open.Add(1)
			go func() {
				defer open.Done()
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/messages?beta=true", strings.NewReader(smallBody))
				req.Header = hdr.Clone()
				req.Header.Set("X-Load-Events", "0")
				resp, err := cl.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				if _, err := bufio.NewReader(resp.Body).ReadSlice('\n'); err == nil {
					opened.Add(1)
				}
				<-held
			}()
		}
		for i := 0; opened.Load() < int64(n) && i < 300; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if opened.Load() != int64(n) {
			t.Errorf("only %d of %d streams opened at once", opened.Load(), n)
		}
		time.Sleep(200 * time.Millisecond)
		busy := rssKB(pid)
		close(held)
		cancel()
		open.Wait()
		cl.CloseIdleConnections()
		// Phase 2: n sessions, each streaming 20-event answers back to back.
		var reqs, errs, events atomic.Int64
		var mu sync.Mutex
		var delays []time.Duration
		var firstErr atomic.Value
		deadline := time.Now().Add(time.Duration(secs) * time.Second)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for time.Now().Before(deadline) {
					got, err := stream(context.Background(), 20, &local)
					reqs.Add(1)
					events.Add(int64(got))
					if err == nil && got != 20 {
						err = fmt.Errorf("%d of 20 events", got)
					}
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
				mu.Lock()
				delays = append(delays, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(t0)
		if errs.Load() != 0 {
			t.Errorf("%d streams: %d errors of %d requests, first: %v", n, errs.Load(), reqs.Load(), firstErr.Load())
		}
		perStream := "n/a"
		if opened.Load() > 0 {
			perStream = fmt.Sprintf("%.1f", float64(busy-idle)/float64(opened.Load()))
		}
		tab.Add(strconv.Itoa(n), strconv.Itoa(secs), strconv.FormatInt(reqs.Load(), 10), strconv.FormatInt(errs.Load(), 10),
			fmt.Sprintf("%.0f", float64(events.Load())/elapsed.Seconds()), perf.MS(perf.Pct(delays, .5)), perf.MS(perf.Pct(delays, .99)),
			fmt.Sprintf("%.1f", float64(idle)/1024), perStream)
	}
	var b strings.Builder
	tab.Write(&b)
	t.Log(b.String())
}
