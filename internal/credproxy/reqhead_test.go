package credproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// realHead is the head of a model request as Claude Code 2.1.328 sends it
// (docs: ../shared/claude-code-client.md, 4.1), lower-case names and all.
const realHead = "POST /v1/messages?beta=true HTTP/1.1\r\n" +
	"Accept: application/json\r\n" +
	"Content-Type: application/json\r\n" +
	"User-Agent: claude-cli/2.1.328 (external, sdk-cli)\r\n" +
	"X-Claude-Code-Session-Id: 0b0f3c52-3f8e-4a59-9e36-0c6a3d1d2e11\r\n" +
	"X-Stainless-Arch: x64\r\n" +
	"X-Stainless-Lang: js\r\n" +
	"X-Stainless-OS: Linux\r\n" +
	"X-Stainless-Package-Version: 0.128.0\r\n" +
	"X-Stainless-Retry-Count: 0\r\n" +
	"X-Stainless-Runtime: node\r\n" +
	"X-Stainless-Runtime-Version: v26.12.1\r\n" +
	"X-Stainless-Timeout: 600\r\n" +
	"anthropic-beta: claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14\r\n" +
	"anthropic-dangerous-direct-browser-access: true\r\n" +
	"anthropic-version: 2023-06-01\r\n" +
	"Authorization: Bearer pdk-session-token\r\n" +
	"x-app: cli\r\n" +
	"Connection: keep-alive\r\n" +
	"Host: 127.0.0.1:18080\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Content-Length: 11\r\n\r\n"

// requestHeadSeeds are heads the fast path must take and heads it must
// leave to net/http, valid and not.
var requestHeadSeeds = []string{
	realHead + `{"a":"b"}` + "\r\n",
	"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
	"POST /v1/messages HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\nabc",
	"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET /x HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
	"GET /x HTTP/1.1\nHost: a\n\n",
	"GET /x HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
	"GET /x HTTP/1.1\r\nHost : a\r\n\r\n",
	"GET /x HTTP/1.1\r\nX-A:  spaced \t \r\nx-a: again\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nX:\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nX: a\x00b\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nX: a\rb\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nX: caf\xc3\xa9\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET http://evil/x HTTP/1.1\r\nHost: a\r\n\r\n",
	"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
	"G(T /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1 \r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nPragma: no-cache\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nTrailer: X\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nexpect: 100-continue\r\nHost: a\r\n\r\n",
	"\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /x HTTP/1.1\r\nHost: a\r\n",
}

// FuzzRequestHead holds parseRequestHead to http.ReadRequest: whatever
// bytes a client sends, a head the fast path takes is one net/http takes
// too, into the same request (method, target, URL, header, host, length,
// close), and the two leave the same bytes after it (the body, then the
// next request). A head the fast path does not take is left unconsumed.
func FuzzRequestHead(f *testing.F) {
	for _, s := range requestHeadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fastBR := bufio.NewReaderSize(bytes.NewReader(in), 8<<10)
		fast := parseRequestHead(fastBR)
		if fast == nil {
			rest, _ := io.ReadAll(fastBR)
			if !bytes.Equal(rest, in) {
				t.Fatalf("a head left to net/http was consumed: %q left of %q", rest, in)
			}
			return
		}
		ref, err := http.ReadRequest(bufio.NewReaderSize(bytes.NewReader(in), 8<<10))
		if err != nil {
			t.Fatalf("fast path took a head net/http refuses (%v): %q", err, in)
		}
		sameRequest(t, fast, ref, in)
	})
}

// sameRequest fails t unless the requests are the same as far as the
// proxy can see, their bodies included.
func sameRequest(t *testing.T, fast, ref *http.Request, in []byte) {
	t.Helper()
	type view struct {
		Method, RequestURI, URL, Proto, Host string
		ProtoMajor, ProtoMinor               int
		Header                               http.Header
		ContentLength                        int64
		Close                                bool
		TransferEncoding                     []string
		Trailer                              http.Header
		NoBody                               bool
	}
	see := func(r *http.Request) view {
		return view{r.Method, r.RequestURI, r.URL.String(), r.Proto, r.Host, r.ProtoMajor, r.ProtoMinor,
			r.Header, r.ContentLength, r.Close, r.TransferEncoding, r.Trailer, r.Body == http.NoBody}
	}
	if a, b := see(fast), see(ref); !reflect.DeepEqual(a, b) {
		t.Fatalf("for %q:\nfast:     %+v\nnet/http: %+v", in, a, b)
	}
	if !reflect.DeepEqual(fast.URL, ref.URL) {
		t.Fatalf("for %q: URL %#v, net/http %#v", in, fast.URL, ref.URL)
	}
	fb, ferr := io.ReadAll(fast.Body)
	rb, rerr := io.ReadAll(ref.Body)
	if !bytes.Equal(fb, rb) || !errors.Is(ferr, rerr) && (ferr == nil) != (rerr == nil) {
		t.Fatalf("for %q: body %q (%v), net/http %q (%v)", in, fb, ferr, rb, rerr)
	}
	if ferr != nil && ferr.Error() != rerr.Error() {
		t.Fatalf("for %q: body error %v, net/http %v", in, ferr, rerr)
	}
}

// TestRequestHeadFastPath checks which heads take the fast path, and that
// each of them, and the rest, read as net/http reads them.
func TestRequestHeadFastPath(t *testing.T) {
	takes := map[string]bool{
		realHead + `{"a":"b"}` + "\r\n":              true,
		"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n": true,
		"GET / HTTP/1.1\r\n\r\n":                     true,
		"POST /v1/messages HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\nconnection: close\r\n\r\n":         true,
		"GET /x HTTP/1.1\r\nX-A:  spaced \t \r\nx-a: again\r\nHost: a\r\n\r\n":                            true,
		"GET /x HTTP/1.1\r\nX: caf\xc3\xa9\r\nHost: a\r\n\r\n":                                            true,
		"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc":                          true,
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc":                false,
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n": false,
		"GET /x HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n":                                                false,
		"GET /x HTTP/1.1\nHost: a\n\n":                                                                    false,
		"GET /x HTTP/1.1\r\nHost : a\r\n\r\n":                                                             false,
		"GET /x HTTP/1.0\r\nHost: a\r\n\r\n":                                                              false,
		"GET http://evil/x HTTP/1.1\r\nHost: a\r\n\r\n":                                                   false,
		"GET /x HTTP/1.1\r\nPragma: no-cache\r\nHost: a\r\n\r\n":                                          false,
		"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n":                                                   false,
	}
	for in, want := range takes {
		fast := parseRequestHead(bufio.NewReader(strings.NewReader(in)))
		if (fast != nil) != want {
			t.Errorf("fast path took %q: %v, want %v", in, fast != nil, want)
		}
		if fast == nil {
			continue
		}
		ref, err := http.ReadRequest(bufio.NewReader(strings.NewReader(in)))
		if err != nil {
			t.Fatalf("net/http refuses %q: %v", in, err)
		}
		sameRequest(t, fast, ref, []byte(in))
	}

	// The real head: every name canonical, the body and what follows it
	// where net/http leaves them.
	br := bufio.NewReader(strings.NewReader(realHead + `{"a":"bcd"}` + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	req, err := readRequest(br)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Anthropic-Beta"); !strings.HasPrefix(got, "claude-code-20250219,") {
		t.Errorf("anthropic-beta = %q", got)
	}
	if req.Host != "127.0.0.1:18080" || req.ContentLength != 11 || req.Close || req.URL.RawQuery != "beta=true" {
		t.Errorf("host %q, length %d, close %v, query %q", req.Host, req.ContentLength, req.Close, req.URL.RawQuery)
	}
	if b, err := io.ReadAll(req.Body); string(b) != `{"a":"bcd"}` || err != nil {
		t.Errorf("body %q, %v", b, err)
	}
	next, err := readRequest(br)
	if err != nil || next.Method != "GET" || next.URL.Path != "/" {
		t.Fatalf("next request: %v, %v", next, err)
	}
}

// TestRequestHeadArrivesInParts: a head whose first bytes came alone is
// still read whole, by one path or the other.
func TestRequestHeadArrivesInParts(t *testing.T) {
	for _, cut := range []int{1, 10, 40, len(realHead) - 1} {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(realHead[:cut]))
			pw.Write([]byte(realHead[cut:] + `{"a":"bcd"}`))
			pw.Close()
		}()
		br := bufio.NewReader(pr)
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		req, err := readRequest(br)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if b, _ := io.ReadAll(req.Body); string(b) != `{"a":"bcd"}` {
			t.Fatalf("cut at %d: body %q", cut, b)
		}
	}
}

// BenchmarkReadRequestHead compares the fast path with http.ReadRequest on
// the head Claude Code sends.
func BenchmarkReadRequestHead(b *testing.B) {
	in := []byte(realHead + `{"a":"bcd"}`)
	for _, bc := range []struct {
		name string
		read func(*bufio.Reader) (*http.Request, error)
	}{{"fast", readRequest}, {"net/http", http.ReadRequest}} {
		b.Run(bc.name, func(b *testing.B) {
			r := bytes.NewReader(in)
			br := bufio.NewReaderSize(r, 8<<10)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(in)
				br.Reset(r)
				req, err := bc.read(br)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, req.Body)
			}
		})
	}
}
