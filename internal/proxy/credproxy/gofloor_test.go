package credproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/runtimepolicy"
)

// The Go floor is the benchmark's third reference: the least a Go proxy
// can do for paddock's job, in its own process. Per client connection it
// keeps one upstream connection; per request it copies the head line by
// line, replacing Authorization and dropping X-Api-Key, then the body by
// Content-Length, and copies the answer back (by length, or chunk by chunk
// with a flush after each). It checks nothing, parses no header beyond
// those three, allocates nothing per request and logs nothing: what is
// left is Go's runtime (with the Runner's settings, runtimepolicy), its
// network poller and the kernel. Next to nginx
// it tells what the language costs; next to paddock, what paddock's own
// work costs. It is a measuring stick, not a proxy to use: it trusts both
// sides completely.

// goFloorEnv, when set in the environment of this test binary, makes it
// the Go floor in front of the upstream it names (see TestMain).
const goFloorEnv = "PADDOCK_BENCH_FLOOR_UPSTREAM"

// runGoFloor serves the Go floor on a loopback port, prints "addr" on
// stdout and serves until its stdin closes.
func runGoFloor(upstream, credential string) error {
	runtimepolicy.Apply(os.Getenv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go floorConn(c, upstream, credential)
		}
	}()
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
	return l.Close()
}

// floorConn relays one client connection's requests until either side
// ends it or sends what the floor does not handle.
func floorConn(c net.Conn, upstream, credential string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	auth := []byte("Authorization: Bearer " + credential + "\r\n")
	cr, cw := bufio.NewReader(c), bufio.NewWriter(c)
	ur, uw := bufio.NewReader(u), bufio.NewWriter(u)
	for {
		n, _, err := floorHead(cr, uw, auth)
		if err != nil {
			return
		}
		if _, err := io.CopyN(uw, cr, n); err != nil {
			return
		}
		if err := uw.Flush(); err != nil {
			return
		}
		n, chunked, err := floorHead(ur, cw, nil)
		if err != nil {
			return
		}
		if chunked {
			err = floorChunks(ur, cw)
		} else if _, err = io.CopyN(cw, ur, n); err == nil {
			err = cw.Flush()
		}
		if err != nil {
			return
		}
	}
}

var (
	errFloorFraming = errors.New("gofloor: no Content-Length and not chunked")
	hdrLength       = []byte("content-length:")
	hdrChunked      = []byte("transfer-encoding: chunked")
	hdrAuth         = []byte("authorization:")
	hdrAPIKey       = []byte("x-api-key:")
)

// floorHead copies one message head from r to w and returns its body's
// length or whether it is chunked. With auth (a request), Authorization
// and X-Api-Key lines are dropped and auth goes in before the blank line.
func floorHead(r *bufio.Reader, w *bufio.Writer, auth []byte) (n int64, chunked bool, err error) {
	n = -1
	for first := true; ; first = false {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		switch {
		case len(line) <= 2: // the blank line
			w.Write(auth)
			w.Write(line)
			if n < 0 && !chunked {
				if auth == nil {
					return 0, false, errFloorFraming
				}
				n = 0 // a request without a body
			}
			return n, chunked, nil
		case first:
		case hasPrefixFold(line, hdrLength):
			n, err = strconv.ParseInt(string(bytes.TrimSpace(line[len(hdrLength):])), 10, 64)
			if err != nil {
				return 0, false, err
			}
		case hasPrefixFold(line, hdrChunked):
			chunked = true
		case auth != nil && (hasPrefixFold(line, hdrAuth) || hasPrefixFold(line, hdrAPIKey)):
			continue
		}
		w.Write(line)
	}
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}

// floorChunks copies a chunked body from r to w, flushing after each
// chunk, through the last chunk and the trailer section.
func floorChunks(r *bufio.Reader, w *bufio.Writer) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		n, err := strconv.ParseInt(string(size), 16, 64)
		if err != nil {
			return err
		}
		w.Write(line)
		if n == 0 {
			break
		}
		if _, err := io.CopyN(w, r, n+2); err != nil { // data and its CRLF
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for { // trailer section, to its blank line
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		w.Write(line)
		if len(line) <= 2 {
			return w.Flush()
		}
	}
}

// startGoFloorPID runs the Go floor in front of upstream (host:port) in a
// child process and returns its base URL and pid.
func startGoFloorPID(tb testing.TB, upstream, credential string) (string, int) {
	tb.Helper()
	addr, pid := startBenchChild(tb, goFloorEnv+"="+upstream+" "+credential)
	return "http://" + addr, pid
}

// TestGoFloorReference keeps the benchmark's Go floor honest, as
// TestNginxReference does nginx: it swaps the credential, carries request
// and response bodies, and streams SSE unbuffered.
func TestGoFloorReference(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key")+"|"+string(body))
		mu.Unlock()
		benchUpstream(3, 200*time.Millisecond).ServeHTTP(w, r)
	})
	env := newBenchEnv(t, up)
	defer env.close()
	base, _ := startGoFloorPID(t, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
	hdr := env.auth.Clone()
	hdr.Set("X-Api-Key", "client-supplied")
	if d := latencies(t, http.DefaultClient, base, hdr, 2, 4); len(d) != 4 {
		t.Fatalf("latencies: %d", len(d))
	}
	// Unbuffered: each event reaches the client long before the next is
	// sent (200 ms later), so none waits for another.
	ev := eventDelays(t, http.DefaultClient, base, hdr, 2)
	if len(ev) != 6 {
		t.Errorf("SSE through the Go floor: %d events, want 6", len(ev))
	}
	for _, d := range ev {
		if d > 150*time.Millisecond {
			t.Errorf("an SSE event took %v through the Go floor: held back", d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if g != "Bearer sk-fake-bench||"+benchBody {
			t.Errorf("upstream saw %q, want only the owner's credential and the body", g)
		}
	}
	if len(got) != 6 {
		t.Errorf("upstream saw %d requests, want 6", len(got))
	}
}
