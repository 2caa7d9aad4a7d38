package credproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
)

// TestStreamWatchDisarmedAfterEachRequest: a finished request leaves no
// stream-idle watch armed (found by review: forward closed the upstream body
// instead of the tap, and each watch stayed for StreamIdleTimeout).
func TestStreamWatchDisarmedAfterEachRequest(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	for i := 0; i < 20; i++ {
		resp := h.do("POST", "/v1/messages", smallBody, h.authed())
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	h.proxy.Drain()
	if n := h.proxy.wd.Armed(); n != 0 {
		t.Fatalf("%d watches still armed on the proxy's watchdog after 20 finished requests", n)
	}
}

// TestCancelledRequestGetsNoSuccess: a request cancelled before the upstream
// answered (the client half-closed) gets no response at all, never an empty
// 200 that reads as a success (found by review).
func TestCancelledRequestGetsNoSuccess(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	c := rawMessages(t, h, "HTTP/1.1")
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Logf("no response (acceptable): %v", err)
		return
	}
	b, err := io.ReadAll(resp.Body)
	t.Logf("got %d %q body=%q err=%v", resp.StatusCode, resp.Header, b, err)
	if resp.StatusCode == 200 && err == nil {
		t.Fatalf("the cancelled request got a complete 200 with body %q (upstream hits: %d)", b, h.hits())
	}
}

// TestHTTP10NeverForwarded: HTTP/1.0, whose responses of unknown length
// are framed by the connection's end (a cut stream would look whole on a
// channel stream, which has no reset; found by review), gets a 505 and
// nothing goes upstream.
func TestHTTP10NeverForwarded(t *testing.T) {
	var hits atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	h := newHarness(t, credential.KindOAuth, up, nil)
	c := rawMessages(t, h, "HTTP/1.0")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusHTTPVersionNotSupported || hits.Load() != 0 {
		t.Fatalf("status %d, upstream hits %d", resp.StatusCode, hits.Load())
	}
}

// TestServerCloseCutsStream: a stream running when the server is closed (the
// Runner's grace period ran out) reaches the client cut, not whole, and its
// decision is recorded once the server has been waited for (found by
// review: Drain used to return before the cancelled handler had finished).
func TestServerCloseCutsStream(t *testing.T) {
	started := make(chan struct{}, 1)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	h := newHarness(t, credential.KindOAuth, up, nil)
	c := rawMessages(t, h, "HTTP/1.1")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if h.srv.Server.Shutdown(ctx) == nil {
		t.Fatal("Shutdown returned with a stream running")
	}
	h.srv.Server.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := h.srv.Server.Shutdown(wctx); err != nil {
		t.Fatalf("the closed server's handlers did not end: %v", err)
	}
	h.proxy.Drain()
	if n := len(h.sink.all()); n != 1 {
		t.Fatalf("%d decisions recorded when Drain returned, want 1", n)
	}
	if b, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("a stream cut by Close read as whole: %q", b)
	}
}

// rawMessages sends an authenticated POST /v1/messages in the given protocol
// version on a fresh connection and returns it.
func rawMessages(t *testing.T, h *harness, proto string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	k, v := h.cred()
	fmt.Fprintf(c, "POST /v1/messages %s\r\nHost: x\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", proto, k, v, len(smallBody), smallBody)
	return c
}
