package credproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/attacks"
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

// rawAll writes req and the sentinel on a fresh connection and returns
// the responses before the sentinel's.
func rawAll(t *testing.T, addr, req string) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	go io.WriteString(c, req+attacks.Sentinel) // the server may stop reading early
	return attacks.ReadResponses(c)
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
	junk := attacks.Junk
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
			for _, tc := range attacks.Cases(k, v, otherHeader, otherPrefix) {
				t.Run(tc.Name, func(t *testing.T) {
					before := len(rc.all())
					resps := rawAll(t, addr, tc.Req)
					got := len(rc.all()) - before
					if got != tc.Want {
						var codes []int
						for _, r := range resps {
							codes = append(codes, r.StatusCode)
						}
						t.Errorf("upstream saw %d requests, want %d (responses %v)", got, tc.Want, codes)
					}
					// Only the forwarded request may succeed.
					if ok := attacks.Successes(resps); ok != tc.Want {
						t.Errorf("%d successful responses, want %d", ok, tc.Want)
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
	srv := startTestServer(t, h.proxy, 300*time.Millisecond)
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
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
