package runner

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestForwardsCapped: a box cannot open connections to the Runner's
// services without bound (each holds a stream, buffers and goroutines in
// the Runner): past maxForwards the guest's stream is refused with the
// reason; a connection closed makes room for another.
func TestForwardsCapped(t *testing.T) {
	defer func(n int32) { maxForwards = n }(maxForwards)
	maxForwards = 8
	a, b := net.Pipe()
	guest, err := channel.NewServer(b)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := channel.NewClient(a)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer guest.Close()
	logs := &testenv.Buffer{}
	r := &Runner{log: slog.New(slog.NewTextHandler(logs, nil)), boxConns: newChanListener(), egressConns: newChanListener()}
	defer r.boxConns.Close()
	defer r.egressConns.Close()
	got := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := r.boxConns.Accept()
			if err != nil {
				return
			}
			got <- c
		}
	}()
	go r.serveForwards(&Link{Session: "s1", Client: cl})

	for i := 0; i < 8; i++ {
		if _, _, err := guest.OpenForward(ServiceAnthropic); err != nil {
			t.Fatalf("forward %d: %v", i, err)
		}
	}
	_, _, err = guest.OpenForward(ServiceAnthropic)
	if err == nil || !strings.Contains(err.Error(), "connections open") {
		t.Fatalf("forward past the limit: %v, want the limit's refusal", err)
	}
	// One closed on the Runner's side makes room.
	(<-got).Close()
	if _, _, err := guest.OpenForward(ServiceAnthropic); err != nil {
		t.Fatalf("forward after a close: %v", err)
	}
	// Unknown services are refused, and logged once, however often asked.
	for i := 0; i < 50; i++ {
		if _, _, err := guest.OpenForward(strings.Repeat("x", 1000)); err == nil {
			t.Fatal("an unknown service was answered")
		}
	}
	if n := strings.Count(logs.String(), "unknown service"); n != 1 {
		t.Fatalf("%d log lines for 50 unknown services, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), strings.Repeat("x", 100)) {
		t.Fatal("the box's service name is logged whole")
	}
}

// TestEgressIdleConnectionCloses: a box's kept-alive connection to the
// egress proxy that sends no next request is closed after egressIdle,
// not held for ever.
func TestEgressIdleConnectionCloses(t *testing.T) {
	defer func(d time.Duration) { egressIdle = d }(egressIdle)
	egressIdle = 300 * time.Millisecond
	srv := newEgressServer(egress.New(egress.Options{Policy: func(string) *egress.Policy { return nil }}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the refusal closed the connection: nothing left to test")
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("unexpected bytes")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the idle connection was still open after 20 s")
	}
}
