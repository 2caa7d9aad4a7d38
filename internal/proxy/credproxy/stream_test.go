package credproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// conversation is a Messages API body of about n bytes whose model is
// "claude-stream-test".
func conversation(n int) string {
	head, tail := `{"model":"claude-stream-test","max_tokens":5,"messages":[{"role":"user","content":"`, `"}]}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// rawClient is a connection to the proxy on which a test writes a request
// in pieces.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (h *harness) dialRaw() *rawClient {
	h.t.Helper()
	return h.dialRawTo(h.srv.Listener.Addr().String())
}

// dialRawTo is dialRaw to another of the proxy's listeners.
func (h *harness) dialRawTo(addr string) *rawClient {
	h.t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{t: h.t, c: c, br: bufio.NewReader(c)}
}

// head writes a POST /v1/messages head declaring a body of n bytes.
func (rc *rawClient) head(h *harness, n int) {
	k, v := h.cred()
	rc.write(fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: api\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", k, v, n))
}

func (rc *rawClient) write(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawClient) response() (*http.Response, string) {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatalf("reading the response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestLargeBodyGoesOnAsItArrives: a large body still arriving reaches
// the upstream while the client is sending it (the upstream reads its
// first half before the client has sent the second), arrives whole, and
// is still summarised whole for the record; the connection then carries
// another request.
func TestLargeBodyGoesOnAsItArrives(t *testing.T) {
	body := conversation(300 << 10)
	first, rest := body[:len(body)/2], body[len(body)/2:]
	gotFirst := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, r.ContentLength)
		if r.ContentLength > int64(len(first)) {
			if _, err := io.ReadFull(r.Body, b[:len(first)]); err != nil {
				t.Errorf("upstream: the first half: %v", err)
				return
			}
			close(gotFirst)
			if _, err := io.ReadFull(r.Body, b[len(first):]); err != nil {
				t.Errorf("upstream: the second half: %v", err)
				return
			}
		} else {
			io.ReadFull(r.Body, b)
		}
		mu.Lock()
		seen = append(seen, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","model":"claude-stream-test","content":[],"usage":{"input_tokens":7,"output_tokens":3}}`)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	rc := h.dialRaw()
	rc.head(h, len(body))
	rc.write(first)
	select {
	case <-gotFirst:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream saw nothing of the body before the client sent all of it: it was not passed on as it came")
	}
	rc.write(rest)
	resp, b := rc.response()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	e := waitEntries(t, h, 1)
	if e[0].BytesIn != int64(len(body)) || e[0].Model != "claude-stream-test" || e[0].InputTokens != 7 || e[0].Decision != "forwarded" {
		t.Fatalf("the decision: %+v", e[0])
	}
	// The same connection carries the next request.
	small := conversation(1000)
	rc.head(h, len(small))
	rc.write(small)
	if resp, b := rc.response(); resp.StatusCode != 200 {
		t.Fatalf("the next request: %d %s", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != body || seen[1] != small {
		t.Fatalf("the upstream got %d bodies, the first whole: %v", len(seen), len(seen) > 0 && seen[0] == body)
	}
}

// TestStreamedBodyBreaksOff: a client whose large body stops half way —
// it stalls past the read timeout, or hangs up — gets a 400 (or nothing,
// when it is gone); the upstream's copy is cut unfinished, so the
// upstream never has the request whole and answers nothing to it.
func TestStreamedBodyBreaksOff(t *testing.T) {
	body := conversation(300 << 10)
	for _, tc := range []struct {
		name   string
		hangUp bool
	}{{"stalls", false}, {"hangs up", true}} {
		t.Run(tc.name, func(t *testing.T) {
			upErr := make(chan error, 1)
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, err := io.ReadAll(r.Body)
				upErr <- err
				if err == nil {
					io.WriteString(w, `{}`)
				}
			})
			h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ReadTimeout = 300 * time.Millisecond })
			rc := h.dialRaw()
			rc.head(h, len(body))
			rc.write(body[:len(body)/2])
			if tc.hangUp {
				time.Sleep(50 * time.Millisecond)
				rc.c.Close()
			} else {
				resp, b := rc.response()
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "could not be read completely") {
					t.Fatalf("a stalled body: %d %s", resp.StatusCode, b)
				}
			}
			select {
			case err := <-upErr:
				if err == nil {
					t.Fatal("the upstream read a whole body the client never sent")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream's request was left open")
			}
			e := waitEntries(t, h, 1)
			if e[0].Status != http.StatusBadRequest && e[0].Status != 499 || e[0].BytesIn >= int64(len(body)) {
				t.Fatalf("the decision: %+v", e[0])
			}
		})
	}
}

// TestStreamedBodySentAgainWhole: an upstream that answers "token
// expired" before it has read a streamed body has the request sent again
// with the fresh credential and the whole body, the rest of which the
// client sent only after that answer.
func TestStreamedBodySentAgainWhole(t *testing.T) {
	const fresh = "sk-fake-fresh-oauth-token-streamed-0000"
	body := conversation(300 << 10)
	answered := make(chan struct{})
	var mu sync.Mutex
	var again string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+fresh {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired."}}`)
			w.(http.Flusher).Flush()
			select {
			case <-answered:
			default:
				close(answered)
			}
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream, sent again: %v", err)
		}
		mu.Lock()
		again = string(b)
		mu.Unlock()
		io.WriteString(w, `{"id":"m","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) {
		o.OnExpired = func(context.Context, credential.Credential) (credential.Credential, bool) {
			return credential.Credential{Kind: credential.KindOAuth, Secret: secret.New(fresh)}, true
		}
	})
	rc := h.dialRaw()
	rc.head(h, len(body))
	rc.write(body[:len(body)/4])
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream was never asked")
	}
	time.Sleep(400 * time.Millisecond) // past the write's grace: its read of the client is stopped
	rc.write(body[len(body)/4:])
	resp, b := rc.response()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	mu.Lock()
	got := again
	mu.Unlock()
	if got != body {
		t.Fatalf("sent again with %d bytes of %d", len(got), len(body))
	}
	e := waitEntries(t, h, 1)
	if e[0].BytesIn != int64(len(body)) || !strings.Contains(e[0].Reason, "sent again") {
		t.Fatalf("the decision: %+v", e[0])
	}
}

// TestEarlyAnswerToAStalledBody: an upstream that answers (413) before it
// has read a large body has its answer relayed at once, while the client
// has sent only part of the body (the client reads it before it sends the
// rest: were the answer held for the body, the read would fail at the
// connection's deadline). The proxy then reads the rest — a client still
// uploading must be able to finish, not meet a reset — and closes the
// connection, as the answer said.
func TestEarlyAnswerToAStalledBody(t *testing.T) {
	body := conversation(600 << 10)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, `{"type":"error","error":{"type":"request_too_large","message":"too large"}}`)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ReadTimeout = time.Minute })
	rc := h.dialRaw()
	rc.head(h, len(body))
	rc.write(body[:64<<10])
	resp, b := rc.response()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b, "too large") {
		t.Fatalf("the early answer: %d %s", resp.StatusCode, b)
	}
	if !resp.Close {
		t.Fatal("the connection stays open with the rest of a body unread")
	}
	rc.write(body[64<<10:]) // the rest goes in whole: no reset
	if n, err := rc.br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the body: %d bytes, %v; want the connection closed", n, err)
	}
	e := waitEntries(t, h, 1)
	if e[0].Status != http.StatusRequestEntityTooLarge || e[0].BytesIn != int64(len(body)) {
		t.Fatalf("the decision: %+v", e[0])
	}
}

// blockingSink holds the record of every request with a large body until
// released.
type blockingSink struct {
	memSink
	release chan struct{}
}

func (b *blockingSink) Record(e decisionlog.Entry) {
	if e.BytesIn >= recordAsideMin {
		<-b.release
	}
	b.memSink.Record(e)
}

// TestLargeRecordAside: the record of a large request (its body's
// summary, the logs) does not hold up the next request on its connection;
// Drain still waits for it.
func TestLargeRecordAside(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"m","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	sink := &blockingSink{release: make(chan struct{})}
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.Decisions = sink })
	big, small := conversation(200<<10), conversation(500)
	rc := h.dialRaw()
	rc.head(h, len(big))
	rc.write(big)
	if resp, b := rc.response(); resp.StatusCode != 200 {
		t.Fatalf("the large request: %d %s", resp.StatusCode, b)
	}
	done := make(chan int)
	go func() {
		rc.head(h, len(small))
		rc.write(small)
		resp, _ := rc.response()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		if code != 200 {
			t.Fatalf("the next request: %d", code)
		}
	case <-time.After(10 * time.Second):
		close(sink.release)
		t.Fatal("the next request waited for the large one's record")
	}
	drained := make(chan struct{})
	go func() { h.proxy.Drain(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("Drain returned with a record still being made")
	case <-time.After(100 * time.Millisecond):
	}
	close(sink.release)
	<-drained
	if e := sink.all(); len(e) != 2 || e[1].BytesIn != int64(len(big)) {
		t.Fatalf("the records: %+v", e)
	}
}

// TestUpstreamFailsDuringUpload: an upstream that drops the connection
// while a slow client is still sending its body is paddock's 502 — the
// upstream's failure, not a broken body of the client's (400, which
// Claude Code would not retry) — sent at once; the rest of the body is
// then read, so the client finishes its upload and reads that answer.
func TestUpstreamFailsDuringUpload(t *testing.T) {
	body := conversation(600 << 10)
	dropped := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadFull(r.Body, make([]byte, 100<<10))
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		c.Close()
		close(dropped)
	})
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) { o.ReadTimeout = time.Minute })
	rc := h.dialRaw()
	rc.head(h, len(body))
	rc.write(body[:len(body)/2])
	<-dropped
	resp, b := rc.response() // before the rest is sent
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(b, "could not be reached") {
		t.Fatalf("the upstream dropped mid-upload: %d %s", resp.StatusCode, b)
	}
	rc.write(body[len(body)/2:])
	if n, err := rc.br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the body: %d bytes, %v; want the connection closed", n, err)
	}
	e := waitEntries(t, h, 1)
	if e[0].Status != http.StatusBadGateway {
		t.Fatalf("the decision: %+v", e[0])
	}
}

// TestUpstreamHoldsTheBody: an upstream that stops reading a large body
// for longer than the read timeout, while the client is still sending it
// (held back by the proxy, which cannot pass it on), and then reads the
// rest, gets it whole and answers: the time the upstream held the body
// back is not the client's. (Before, it was counted as the client's, and
// the client got a 400 for a body it sent as fast as it could.)
//
// The body must be larger than every buffer on the way, so that the
// client is still sending when the upstream stops. The test caps the
// receive buffers of the proxy's and the upstream's sockets and the
// client's send buffer (the kernel's own caps differ by machine: with
// tcp_rmem's up to 32 MiB, even 40 MB fit in them and nothing was held),
// which leaves the proxy's send buffer to the upstream (tcp_wmem, 4 MiB)
// and the piece it holds: 12 MB is well over. The read timeout is a few
// seconds: the proxy's own reads, growing its copy of the body, take over
// a second under -race on a loaded two-core machine.
func TestUpstreamHoldsTheBody(t *testing.T) {
	const (
		readTimeout = 3 * time.Second
		sockBuf     = 64 << 10
	)
	body := conversation(12 << 20)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b[:64<<10]); err != nil {
			t.Errorf("upstream: the start: %v", err)
			return
		}
		time.Sleep(readTimeout + 2*time.Second) // longer than a read timeout
		if _, err := io.ReadFull(r.Body, b[64<<10:]); err != nil {
			t.Errorf("upstream: the rest: %v", err)
			return
		}
		if string(b) != body {
			t.Error("upstream: the body differs")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","model":"claude-stream-test","content":[],"usage":{"input_tokens":7,"output_tokens":3}}`)
	})
	smallReads := func(c net.Conn, s http.ConnState) {
		if s != http.StateNew {
			return
		}
		if err := c.(*net.TCPConn).SetReadBuffer(sockBuf); err != nil {
			t.Errorf("the upstream's receive buffer: %v", err)
		}
	}
	h := newHarnessConnState(t, credential.KindOAuth, up, func(o *Options) {
		o.ReadTimeout = readTimeout
		o.MaxRequestBytes = 64 << 20
	}, smallReads)
	// The proxy's listener, with its sockets' receive buffer capped from
	// the start (set on the listening socket, accepted ones inherit it).
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, sockBuf)
		}); err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := testenv.ServeOn(NewServer(h.proxy, 5*time.Second), l)
	t.Cleanup(ts.Close)
	rc := h.dialRawTo(l.Addr().String())
	if err := rc.c.(*net.TCPConn).SetWriteBuffer(sockBuf); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		k, v := h.cred()
		_, err := fmt.Fprintf(rc.c, "POST /v1/messages HTTP/1.1\r\nHost: api\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", k, v, len(body), body)
		sent <- err
	}()
	resp, b := rc.response()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := <-sent; err != nil {
		t.Fatalf("the client's write: %v", err)
	}
	if e := waitEntries(t, h, 1); e[0].BytesIn != int64(len(body)) || e[0].Decision != "forwarded" || e[0].InputTokens != 7 {
		t.Fatalf("the decision: %+v", e[0])
	}
}
