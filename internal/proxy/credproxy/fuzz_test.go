package credproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// recordingTransport answers every upstream request itself and keeps it.
type recordingTransport struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	rt.mu.Lock()
	rt.reqs = append(rt.reqs, r)
	rt.mu.Unlock()
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n"
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1}, nil
}

func (rt *recordingTransport) take() []*http.Request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r := rt.reqs
	rt.reqs = nil
	return r
}

// FuzzProxyRequest feeds arbitrary bytes, as what a client sent on one
// connection, to the proxy's Server. Whatever they are: no panic, the
// output is a sequence of well-framed HTTP/1.1 responses, and any request
// that reaches the upstream is on one of the three routes with its method
// and carries exactly one credential, the real one, and no client secret.
func FuzzProxyRequest(f *testing.F) {
	reg, _ := sessiontoken.New(store.NewMemory())
	tokOAuth, _ := reg.Issue("s1", credential.KindOAuth)
	tokKey, _ := reg.Issue("s2", credential.KindAPIKey)
	const real = "sk-fake-real-credential-for-fuzzing"
	rt := &recordingTransport{}
	up, _ := url.Parse("https://upstream.invalid/base")
	p, err := New(Options{Upstream: up, Credential: credential.Static{Kind: credential.KindOAuth, Secret: secret.New(real)},
		Tokens: reg, Transport: rt})
	if err != nil {
		f.Fatal(err)
	}
	var methods []string // of the requests the handler saw, in order
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		p.ServeHTTP(w, r)
	}), time.Second)
	bearer := "Authorization: Bearer " + tokOAuth.Reveal() + "\r\n"
	apikey := "X-Api-Key: " + tokKey.Reveal() + "\r\n"
	for _, s := range []string{
		"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\n" + bearer + "Content-Length: 2\r\n\r\n{}",
		"POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\n" + apikey + "Content-Length: 2\r\n\r\n{}",
		"GET /v1/models?limit=3 HTTP/1.1\r\nHost: x\r\n" + bearer + "\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + bearer + "X-Api-Key: junk\r\nx_api_key: junk\r\nCookie: a=b\r\n\r\n",
		"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + bearer + "Transfer-Encoding: chunked\r\nTrailer: Authorization\r\n\r\n2\r\n{}\r\n0\r\nAuthorization: Bearer junk\r\n\r\n",
		"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + bearer + "Connection: X-Foo\r\nX-Foo: junk\r\nContent-Length: 2\r\n\r\n{}",
		"POST http://evil/v1/messages HTTP/1.1\r\nHost: evil\r\n" + bearer + "\r\n",
		"CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n" + bearer + "\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n" + bearer + "\r\n",
		"POST /v1/%6Dessages HTTP/1.1\r\nHost: x\r\n" + bearer + "Content-Length: 0\r\n\r\n",
		"HEAD /api/hello HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/messages?beta=true&beta=true HTTP/1.1\r\nHost: x\r\n" + bearer + "\r\n",
		"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n" + bearer + "\r\n{}",
	} {
		f.Add([]byte(s))
	}
	routeOK := map[string]bool{"POST /base/v1/messages": true, "POST /base/v1/messages/count_tokens": true, "GET /base/v1/models": true}
	f.Fuzz(func(t *testing.T, data []byte) {
		methods = methods[:0]
		c := &testenv.MemConn{In: bytes.NewReader(data)}
		srv.ServeConn(c)
		testenv.CheckFramed(t, c.Out.Bytes(), methods)
		for _, out := range rt.take() {
			key := out.Method + " " + out.URL.Path
			if !routeOK[key] || out.URL.Host != "upstream.invalid" || out.URL.RawPath != "" {
				t.Fatalf("forwarded %s to %s", key, out.URL)
			}
			n := 0
			for name, vs := range out.Header {
				for _, v := range vs {
					if strings.Contains(v, tokOAuth.Reveal()) || strings.Contains(v, tokKey.Reveal()) || strings.Contains(v, "junk") {
						t.Fatalf("client secret forwarded in %s", name)
					}
					if strings.Contains(v, real) {
						n++
					}
				}
				if isStripped(name) && name != "Authorization" {
					t.Fatalf("stripped header %s forwarded", name)
				}
			}
			if n != 1 || out.Header.Get("Authorization") != "Bearer "+real {
				t.Fatalf("real credential %d times: %v", n, out.Header)
			}
			if len(out.Trailer) != 0 {
				t.Fatal("trailer forwarded")
			}
		}
	})
}

// FuzzIsStripped holds isStripped, which normalises a name in a stack
// buffer, to the plain spelling of the same rules on normName's string.
func FuzzIsStripped(f *testing.F) {
	for _, k := range []string{"Authorization", "X_Api_Key", "X-Forwarded-For", "Proxy-Foo", "Content-Type",
		"Anthropic-Version", "X-Session-Token", "x-my-secret", "Set-Cookie", "X-Stainless-Os", "X-Api-\u212aey", strings.Repeat("A", 70) + "_Token"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		n := normName(k)
		want := strippedExact[n] || strings.HasPrefix(n, "x-forwarded-") || strings.HasPrefix(n, "proxy-") ||
			strings.Contains(n, "auth") || strings.Contains(n, "api-key") || strings.Contains(n, "apikey") ||
			strings.HasSuffix(n, "-token") || strings.HasSuffix(n, "-secret") || strings.Contains(n, "cookie")
		if got := isStripped(k); got != want {
			t.Fatalf("isStripped(%q) = %v, want %v", k, got, want)
		}
	})
}

// FuzzCheckQuery holds checkQuery's fast path for one plain key=value to
// the general path's decision and re-encoding, on every route.
func FuzzCheckQuery(f *testing.F) {
	for _, q := range []string{"beta=true", "beta=false", "beta=", "=true", "beta=true&beta=true", "limit=20",
		"after_id=x~y.z-1", "be%74a=true", "beta=tru%65", "beta=true;x=1", "a=b=c", "limit=1000", ""} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		for _, rt := range routes {
			q1, why1 := checkQuery(rt, q)
			q2, why2 := checkQueryValues(rt, q)
			if q1 != q2 || why1 != why2 {
				t.Fatalf("%s ?%s: fast (%q, %q), general (%q, %q)", rt.path, q, q1, why1, q2, why2)
			}
		}
	})
}
