package credproxy

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// rawUpstream answers every request on its connections with a canned small
// JSON answer, parsing only what it must (the head's end and the body's
// length) so that it allocates nearly nothing: BenchmarkProxyRequest's
// allocations are then the proxy's.
func rawUpstream(tb testing.TB) *url.URL {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}`
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nRequest-Id: req_1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	addr := testenv.ServeConns(tb, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			n, err := readRawHead(br)
			if err != nil {
				return
			}
			if _, err := br.Discard(n); err != nil {
				return
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	})
	return &url.URL{Scheme: "http", Host: addr}
}

// readRawHead reads one message head from br and returns its
// Content-Length (0 if none).
func readRawHead(br *bufio.Reader) (int, error) {
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			return n, nil
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
}

// BenchmarkProxyRequest is one small request after another on one
// keep-alive connection through the proxy's server, from a raw client to a
// raw upstream: its allocs/op and B/op are the proxy's own per request, and
// cpu-µs/op is the whole process's CPU (the raw ends add little).
func BenchmarkProxyRequest(b *testing.B) {
	reg, _ := sessiontoken.New(store.NewMemory())
	tok, _ := reg.Issue("bench", credential.KindOAuth)
	dl, err := decisionlog.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Options{Upstream: rawUpstream(b), Credential: credential.Static{Kind: credential.KindOAuth, Secret: secret.New("sk-fake-bench")},
		Tokens: reg, Decisions: dl, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ps := startTestServer(b, p, 10*time.Second)
	defer func() { ps.Close(); p.Drain(); dl.Close() }()
	u, _ := url.Parse(ps.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("POST /v1/messages?beta=true HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + tok.Reveal() +
		"\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\nUser-Agent: claude-cli/2.1.328 (external, cli)\r\nContent-Length: " +
		strconv.Itoa(len(benchBody)) + "\r\n\r\n" + benchBody)
	br := bufio.NewReader(c)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		status, err := br.Peek(12)
		if err != nil {
			b.Fatal(err)
		}
		if string(status[9:12]) != "200" {
			b.Fatalf("status %q", status)
		}
		n, err := readRawHead(br)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.Discard(n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
