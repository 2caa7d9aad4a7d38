package credproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credential"
)

// recorder is an upstream that keeps every request it is sent.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, uri string
	header      http.Header
	body        string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.RequestURI, r.Header.Clone(), string(b)})
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"m","model":"rec","usage":{"input_tokens":1,"output_tokens":1}}`)
}

func (rc *recorder) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

// sentinel ends every attack: a refused request that closes the
// connection, so rawAll knows when the server has answered everything
// before it without closing its side first (a half-closed client is a
// client that went away, and its request is cancelled).
const sentinel = "GET /paddock-attack-sentinel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

// rawAll writes req and the sentinel on a fresh connection and reads every
// response until the server closes the connection. It returns the
// responses before the sentinel's.
func rawAll(t *testing.T, addr, req string) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	go io.WriteString(c, req+sentinel) // the server may stop reading early
	br := bufio.NewReader(c)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		out = append(out, resp)
	}
	if n := len(out); n > 0 && out[n-1].StatusCode == http.StatusNotFound && out[n-1].Close {
		out = out[:n-1] // the sentinel's
	}
	return out
}

// checkForwarded holds the proxy's promise over every request the upstream
// saw: one of the three routes with its method, the owner's credential
// exactly once in its header, and nothing of the box's secrets or of the
// attack's smuggled headers.
func checkForwarded(t *testing.T, rc *recorder, kind credential.Kind, real string, forbidden ...string) {
	t.Helper()
	allowed := map[string]bool{"POST /v1/messages": true, "POST /v1/messages/count_tokens": true, "GET /v1/models": true}
	for _, r := range rc.all() {
		path, _, _ := strings.Cut(r.uri, "?")
		if !allowed[r.method+" "+path] {
			t.Errorf("upstream saw %s %s", r.method, r.uri)
		}
		n := 0
		for name, vs := range r.header {
			for _, v := range vs {
				if strings.Contains(v, real) {
					n++
					if name != kind.Header() {
						t.Errorf("owner's credential in %s", name)
					}
				}
				for _, f := range forbidden {
					if strings.Contains(v, f) || strings.Contains(strings.ToLower(name), strings.ToLower(f)) {
						t.Errorf("upstream saw %q in %s: %q", f, name, v)
					}
				}
			}
		}
		if n != 1 || len(r.header.Values(kind.Header())) != 1 {
			t.Errorf("%s %s: owner's credential %d times upstream, %d values in %s; want exactly 1", r.method, r.uri, n, len(r.header.Values(kind.Header())), kind.Header())
		}
		for _, f := range forbidden {
			if strings.Contains(r.body, f) && !strings.Contains(smallBody, f) {
				t.Errorf("upstream body carries %q", f)
			}
		}
	}
}

// TestAttackSuite sends, for each class of issue #8's list, raw bytes to the
// proxy's listener with a live token, and checks after every attack that
// the upstream saw nothing outside the routes and exactly one credential on
// whatever it was sent. Each case also says what the client must get: a
// refusal, or (where the attack is normalised away) the one legitimate
// request forwarded.
func TestAttackSuite(t *testing.T) {
	const junk = "sk-junk-credential-from-the-box"
	for _, kind := range []credential.Kind{credential.KindAPIKey, credential.KindOAuth} {
		t.Run(string(kind), func(t *testing.T) {
			rc := &recorder{}
			h := newHarness(t, kind, rc, func(o *Options) { o.MaxRequestBytes = 64 << 10 })
			addr := h.srv.Listener.Addr().String()
			k, v := h.cred()
			// The credential header of the other kind.
			otherHeader, otherPrefix := "Authorization", "Bearer "
			if kind != credential.KindAPIKey {
				otherHeader, otherPrefix = "X-Api-Key", ""
			}
			auth := k + ": " + v + "\r\n"
			body := smallBody
			post := func(target, extra string) string {
				return "POST " + target + " HTTP/1.1\r\nHost: api.anthropic.com\r\n" + auth + extra +
					fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
			}
			good := post("/v1/messages", "")
			admin := "GET /v1/organizations/me HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"
			// want: the number of upstream requests the case may cause
			// (0: all refused; 1: the legitimate one only).
			cases := []struct {
				name string
				req  string
				want int
			}{
				// Path tricks beyond TestPathTricksRefused.
				{"encoded dot segment", post("/v1/%2e%2e/v1/messages", ""), 0},
				{"encoded dot", post("/v1/%2e/messages", ""), 0},
				{"fragment", post("/v1/messages#frag", ""), 0},
				{"backslash", post("/v1\\messages", ""), 0},
				{"overlong utf8 slash", post("/v1%c0%afmessages", ""), 0},
				{"tab in target", post("/v1/messages\t/x", ""), 0},
				// Methods and overrides.
				{"override to DELETE on allowed route", post("/v1/messages", "X-HTTP-Method-Override: DELETE\r\nX-HTTP-Method: DELETE\r\nX-Method-Override: DELETE\r\n"), 1},
				{"override POST to GET models", post("/v1/models", "X-HTTP-Method-Override: GET\r\n"), 0},
				{"lower-case method", strings.Replace(good, "POST", "post", 1), 0},
				{"unknown method", strings.Replace(good, "POST", "PROPFIND", 1), 0},
				// Host tricks: the upstream host is paddock's choice.
				{"host evil", strings.Replace(good, "Host: api.anthropic.com", "Host: evil.test", 1), 1},
				{"two hosts", strings.Replace(good, "Host: api.anthropic.com\r\n", "Host: a\r\nHost: b\r\n", 1), 0},
				{"no host http/1.1", strings.Replace(good, "Host: api.anthropic.com\r\n", "", 1), 0},
				{"host with userinfo", strings.Replace(good, "Host: api.anthropic.com", "Host: user:pass@evil.test", 1), 0},
				// Credentials in other places.
				{"credential in connection", post("/v1/messages", "Connection: "+otherHeader+"\r\n"+otherHeader+": "+otherPrefix+junk+"\r\n"), 1},
				{"own credential header nominated in connection", post("/v1/messages", "Connection: "+k+"\r\n"), 1},
				{"x-forwarded", post("/v1/messages", "X-Forwarded-Host: evil.test\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Authorization: Bearer "+junk+"\r\n"), 1},
				// Smuggling.
				// CL and TE: TE wins (RFC 9112 §6.3), the empty body is forwarded
				// re-framed with its own Content-Length, and the request
				// smuggled behind it is parsed as a request of its own: refused.
				{"CL and TE", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + admin, 1},
				{"TE obfuscated space", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + admin, 0},
				{"TE xchunked", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0},
				{"TE chunked, identity", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 0},
				{"TE twice", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", 0},
				{"CL twice differing", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 0},
				{"CL negative", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: -1\r\n\r\n{}", 0},
				{"CL plus sign", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: +2\r\n\r\n{}", 0},
				{"CL hex", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 0x2\r\n\r\n{}", 0},
				{"CL huge", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 99999999999999999999\r\n\r\n{}", 0},
				{"CL over limit", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 1000000\r\n\r\n{}", 0},
				{"chunk size overflow", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff1\r\n{}\r\n0\r\n\r\n", 0},
				{"chunk size with junk", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n2 x\r\n{}\r\n0\r\n\r\n", 0},
				{"chunk bare LF", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n2\n{}\n0\n\n" + admin, 0},
				// obs-fold is normalised (RFC 9112 §5.2: replaced by a space):
				// the folded line stays inside X-Thing's value, never a header.
				{"obs-fold", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "X-Thing: a\r\n " + otherHeader + ": " + otherPrefix + "folded\r\nContent-Length: 2\r\n\r\n{}", 1},
				{"bare CR in header", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "X-Thing: a\rAuthorization: Bearer " + junk + "\r\nContent-Length: 2\r\n\r\n{}", 0},
				{"bare LF line ends", strings.ReplaceAll(good, "\r\n", "\n"), 1},
				{"NUL in header", post("/v1/messages", "X-Thing: a\x00b\r\n"), 0},
				{"space before colon", post("/v1/messages", "X-Api-Key : "+junk+"\r\n"), 0},
				{"pipelined disallowed", good + admin + "POST /v1/messages/batches HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}", 1},
				{"pipelined after refused", admin + good, 1},
				// Upgrades and expectations.
				{"expect 100-continue", post("/v1/messages", "Expect: 100-continue\r\n"), 1},
				{"expect other", post("/v1/messages", "Expect: 200-ok\r\n"), 0},
				{"h2c on POST", post("/v1/messages", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"), 0},
				// Size.
				{"oversized header", post("/v1/messages", "X-Big: "+strings.Repeat("a", 80<<10)+"\r\n"), 0},
				{"oversized URL", post("/v1/messages?beta="+strings.Repeat("a", 80<<10), ""), 0},
				{"many headers", post("/v1/messages", strings.Repeat("X-A: b\r\n", 10000)), 0},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := len(rc.all())
					resps := rawAll(t, addr, tc.req)
					got := len(rc.all()) - before
					if got != tc.want {
						var codes []int
						for _, r := range resps {
							codes = append(codes, r.StatusCode)
						}
						t.Errorf("upstream saw %d requests, want %d (responses %v)", got, tc.want, codes)
					}
					// Exactly one response may be 200: the forwarded one.
					ok := 0
					for _, r := range resps {
						if r.StatusCode >= 200 && r.StatusCode < 300 {
							ok++
						}
					}
					if ok != tc.want {
						t.Errorf("%d successful responses, want %d", ok, tc.want)
					}
				})
			}
			checkForwarded(t, rc, kind, h.real, junk, h.token.Reveal(), "evil.test", "10.0.0.1", "Method", "X-Forwarded")
		})
	}
}

// TestSlowloris: clients that send their headers a byte at a time are cut
// off by the header timeout, and meanwhile another client is served.
func TestSlowloris(t *testing.T) {
	rc := &recorder{}
	h := newHarness(t, credential.KindAPIKey, rc, nil)
	srv := httptest.NewUnstartedServer(h.proxy)
	srv.Config = NewServer(h.proxy, 300*time.Millisecond)
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	var conns []net.Conn
	for i := 0; i < 50; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHo")
		conns = append(conns, c)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(smallBody))
	req.Header = h.authed()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("legitimate request: %d", resp.StatusCode)
	}
	// Each slow client keeps trickling; the server must close it.
	for i, c := range conns {
		closed := false
		for start := time.Now(); time.Since(start) < 5*time.Second; {
			if _, err := c.Write([]byte("s")); err != nil {
				closed = true
				break
			}
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, err := c.Read(make([]byte, 512))
			if err != nil && !isTimeout(err) {
				closed = true
				break
			}
		}
		if !closed {
			t.Fatalf("slow client %d still open after 5 s", i)
		}
	}
	if n := len(rc.all()); n != 1 {
		t.Fatalf("upstream saw %d requests, want 1", n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
