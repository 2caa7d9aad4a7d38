package credproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

func TestUpstreamDownAndRedirect(t *testing.T) {
	// Upstream that redirects to a second server: the proxy must pass the
	// 307 back and never call the second server itself.
	var second atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second.Add(1) }))
	defer target.Close()
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v1/messages", http.StatusTemporaryRedirect)
	})
	h := newHarness(t, credential.KindAPIKey, redirect, nil)
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	resp.Body.Close()
	if resp.StatusCode != 307 || second.Load() != 0 {
		t.Fatalf("redirect: %d, followed %d times", resp.StatusCode, second.Load())
	}

	h.up.Close() // now the upstream is gone
	resp = h.do("POST", "/v1/messages", smallBody, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), anthropic.APIError) {
		t.Fatalf("down: %d %s", resp.StatusCode, b)
	}
}

// sseUpstream writes a random SSE-like stream in random chunks with pauses.
func sseUpstream(seed uint64, payload []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rng := rand.New(rand.NewPCG(seed, 1))
		fl := w.(http.Flusher)
		for i := 0; i < len(payload); {
			n := 1 + rng.IntN(300)
			if i+n > len(payload) {
				n = len(payload) - i
			}
			w.Write(payload[i : i+n])
			fl.Flush()
			i += n
			if rng.IntN(10) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
}

func ssePayload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
	for i := 0; i < n; i++ {
		txt := make([]byte, rng.IntN(200))
		for j := range txt {
			txt[j] = byte(0x20 + rng.IntN(0x5e))
			if txt[j] == '"' || txt[j] == '\\' {
				txt[j] = 'q'
			}
		}
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n", txt)
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

func TestSSEByteIdentical(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		payload := ssePayload(seed, 300)
		h := newHarness(t, credential.KindOAuth, sseUpstream(seed, payload), nil)
		resp := h.do("POST", "/v1/messages?beta=true", smallBody, h.authed())
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("seed %d: stream differs (%d vs %d bytes, %v)", seed, len(got), len(payload), err)
		}
		es := waitEntries(t, h, 1)
		e := es[len(es)-1]
		if e.InputTokens != 7 || e.OutputTokens != 99 || e.Model != "claude-x" || e.BytesOut != int64(len(payload)) || e.Session != "s1" {
			t.Fatalf("decision %+v", e)
		}
	}
}

// TestSSEEventsFlushedOneByOne: each event reaches the client before the
// upstream sends the next one.
func TestSSEEventsFlushedOneByOne(t *testing.T) {
	next := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 5; i++ {
			fmt.Fprintf(w, "event: ping\ndata: {\"type\":\"ping\",\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(10 * time.Second):
				return
			}
		}
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 5; i++ {
		var got []byte
		for !bytes.HasSuffix(got, []byte("\n\n")) {
			n, err := resp.Body.Read(buf)
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Contains(got, []byte(fmt.Sprintf(`"i":%d`, i))) {
			t.Fatalf("event %d: %q", i, got)
		}
		next <- struct{}{}
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	canceled := make(chan time.Time, 1)
	started := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: ping\ndata: {}\n\n"))
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		canceled <- time.Now()
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/messages", strings.NewReader(smallBody))
	req.Header = h.authed()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	gone := time.Now()
	cancel()
	resp.Body.Close()
	select {
	case at := <-canceled:
		// Timings are not pass/fail on noisy machines: the bound is
		// generous, the measured time is logged (target: 100 ms).
		t.Logf("upstream cancelled %v after the client went away", at.Sub(gone))
		if at.Sub(gone) > time.Second {
			t.Errorf("upstream cancelled %v after the client went away", at.Sub(gone))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	es := waitEntries(t, h, 1)
	if r := es[len(es)-1].Reason; r != "client went away" {
		t.Fatalf("reason %q", r)
	}
}

// TestUpstreamAnswersBeforeBody is golang/go#40747: an upstream that answers
// before reading the request body. A plain ReverseProxy cuts some of those
// streams and churns connections; paddock, reading the body first, does not.
func TestUpstreamAnswersBeforeBody(t *testing.T) {
	fake := fakeapi.New()
	fake.AnswerEarly = true
	fake.TextDeltas = 20
	var conns atomic.Int32
	h := newHarnessConnState(t, credential.KindOAuth, fake, nil, func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	const workers, each = 8, 25
	var failures atomic.Int32
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest("POST", h.srv.URL+"/v1/messages", strings.NewReader(body))
				req.Header = h.authed()
				resp, err := tr.RoundTrip(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.HasSuffix(b, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d streams cut", f, workers*each)
	}
	// Connections are reused: a handful per worker at most, not one per request.
	if c := conns.Load(); c > 2*workers {
		t.Fatalf("%d upstream connections for %d requests: the pool churns", c, workers*each)
	}
}

// TestUpstreamRefusesLargeBodyEarly: an upstream that refuses a large body
// as soon as it sees its length (413, as the API does past its size limit)
// and reads no more of it. The client gets that refusal, not a gateway
// error (which Claude Code would retry, sending the body again), and the
// decision log records it. The upstream is Go's own server: it discards
// 256 KiB of what is left, answers with Connection: close and resets the
// connection half a second later.
func TestUpstreamRefusesLargeBodyEarly(t *testing.T) {
	const refusal = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, refusal)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 8<<20) + `"}]}`
	for i := 0; i < 2; i++ { // and again, on a fresh upstream connection
		resp := h.do("POST", "/v1/messages", body, h.authed())
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != refusal {
			t.Fatalf("request %d: %d %s; want the upstream's 413", i, resp.StatusCode, b)
		}
	}
	for _, e := range waitEntries(t, h, 2) {
		if e.Decision != "forwarded" || e.Status != http.StatusRequestEntityTooLarge || e.Reason != "" {
			t.Errorf("decision %+v; want forwarded, 413, no reason", e)
		}
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: ping\ndata: {}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // stalls until paddock gives up
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a stalled stream ended as if complete")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled stream was not ended")
	}
	resp.Body.Close()
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "sent nothing for 200ms") {
		t.Fatalf("reason %q", r)
	}
}

// TestStalledClientConnectionEnds: a client that stops reading a stream
// (the box's Claude Code frozen, or a hostile process in the box holding
// connections) has its connection closed after the stream-idle timeout,
// the upstream request is cancelled, and the decision log says why. Before,
// the proxy's write blocked for as long as the client liked.
func TestStalledClientConnectionEnds(t *testing.T) {
	upDone := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(upDone)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte("event: content_block_delta\ndata: {\"pad\":\"" + strings.Repeat("x", 16<<10) + "\"}\n\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(ev); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, v := h.cred()
	io.WriteString(c, "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\n"+k+": "+v+
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(smallBody))+"\r\n\r\n"+smallBody)
	// Read nothing until the proxy has given up.
	select {
	case <-upDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "the client read nothing for 300ms") {
		t.Fatalf("reason %q", r)
	}
	// The connection is closed: draining what was buffered ends in EOF or
	// a reset, never in a wait.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the stalled client's connection stayed open")
	}
}

// TestIdleUpstreamAndStalledClientConnectionEnds: an upstream that goes
// silent mid-way through an answer of known length, to a client that reads
// nothing: the idle timeout cuts the answer, and what the proxy had
// buffered for the client must not hold the connection either (found by
// review: the aborted response's flush had no deadline, and the decision
// was never recorded).
func TestIdleUpstreamAndStalledClientConnectionEnds(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		io.WriteString(w, `{"pad":"`+strings.Repeat("x", 100))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.StreamIdleTimeout = 300 * time.Millisecond })
	// The proxy's server with a short WriteTimeout, on one in-memory pipe
	// whose writes block until the client reads (it never does).
	srv := NewServer(h.proxy, time.Second)
	srv.WriteTimeout = 200 * time.Millisecond
	client, server := net.Pipe()
	ended := make(chan struct{})
	go func() { srv.ServeConn(server); close(ended) }()
	t.Cleanup(func() { client.Close(); srv.Close() })
	k, v := h.cred()
	io.WriteString(client, "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"+k+": "+v+
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(smallBody))+"\r\n\r\n"+smallBody)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("connection still held (decisions recorded: %d)", len(h.sink.all()))
	}
	es := waitEntries(t, h, 1)
	if r := es[0].Reason; !strings.Contains(r, "sent nothing for 300ms") {
		t.Fatalf("reason %q", r)
	}
}

// TestSlowUpstreamHeaders: an upstream that does not begin its answer
// within ResponseHeaderTimeout gets the client a 504 in the API's error
// shape, and the upstream request is cancelled.
func TestSlowUpstreamHeaders(t *testing.T) {
	canceled := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices a closed connection
		<-r.Context().Done()
		close(canceled)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ResponseHeaderTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), `"api_error"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	if es := waitEntries(t, h, 1); es[0].Status != 504 || es[0].Reason != "the upstream API did not answer in time" {
		t.Fatalf("entry %+v", es[0])
	}
}

// TestLongStreamOutlivesReadTimeout: the body read deadline must not cut a
// response that streams for longer than it.
func TestLongStreamOutlivesReadTimeout(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 8; i++ {
			fmt.Fprintf(w, "event: ping\ndata: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ReadTimeout = 200 * time.Millisecond })
	resp := h.do("POST", "/v1/messages", smallBody, h.authed())
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Contains(b, []byte(`"i":7`)) {
		t.Fatalf("stream cut: %v %q", err, b)
	}
}
