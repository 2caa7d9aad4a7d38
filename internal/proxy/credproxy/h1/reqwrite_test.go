package h1

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// parsedRequest is what a server makes of a request's bytes.
type parsedRequest struct {
	method, target, host string
	header               http.Header
	body                 string
}

func parseWritten(t *testing.T, b []byte) parsedRequest {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("written request does not parse: %v\n%q", err, b)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("written body: %v\n%q", err, b)
	}
	h := r.Header.Clone()
	if r.ContentLength >= 0 && r.Method != "GET" {
		h.Del("Content-Length") // compared as the body
	}
	return parsedRequest{r.Method, r.RequestURI, r.Host, h, string(body)}
}

// FuzzWriteRequest holds writeRequest to Request.Write: whatever it
// writes parses to the same method, target, host, header fields and body,
// and what it refuses has a field net/http's Transport refuses too (or a
// body without a length, which a proxy never builds).
func FuzzWriteRequest(f *testing.F) {
	f.Add("POST", "/v1/messages", "beta=true", "api.example", "Anthropic-Version", "2023-06-01", "claude-cli/2.1", `{"a":1}`)
	f.Add("GET", "/v1/models", "", "api.example:8443", "X-Stainless-Os", "Linux", "", "")
	f.Add("POST", "", "", "h", "X-A", "v\r\nX-Injected: 1", "ua", "")
	f.Add("GET", "/a b", "q=1 2", "h", "Bad Name", "v", "ua", "")
	f.Add("POST", "/%2e%2e/x", "a=%20", "h", "X-Empty", "", "", "body")
	f.Fuzz(func(t *testing.T, method, path, query, host, hk, hv, ua, body string) {
		u := &url.URL{Scheme: "http", Host: host, Path: path, RawQuery: query}
		mk := func() *http.Request {
			r := &http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{hk: {hv}, "User-Agent": {ua}, "Content-Type": {"application/json"}}, Body: http.NoBody}
			if body != "" {
				r.Body, r.ContentLength = &BytesBody{b: []byte(body)}, int64(len(body))
			}
			return r
		}
		var ours bytes.Buffer
		bw := bufio.NewWriter(&ours)
		err := writeRequest(bw, mk())
		bw.Flush()
		valid := httpguts_validRequest(mk())
		if err != nil {
			if valid {
				t.Fatalf("refused a request net/http would send: %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("wrote a request net/http refuses:\n%q", ours.Bytes())
		}
		var theirs bytes.Buffer
		if err := mk().Write(&theirs); err != nil {
			t.Fatalf("Request.Write failed where writeRequest did not: %v", err)
		}
		a, b := parseWritten(t, ours.Bytes()), parseWritten(t, theirs.Bytes())
		if a.method != b.method || a.target != b.target || a.host != b.host || a.body != b.body ||
			!slices.Equal(slices.Sorted(maps.Keys(a.header)), slices.Sorted(maps.Keys(b.header))) {
			t.Fatalf("ours %+v\ntheirs %+v\nours %q\ntheirs %q", a, b, ours.Bytes(), theirs.Bytes())
		}
		for k, vs := range a.header {
			if !slices.Equal(vs, b.header[k]) {
				t.Fatalf("%s: ours %q, theirs %q", k, vs, b.header[k])
			}
		}
	})
}

// httpguts_validRequest is net/http's Transport's own check of a request
// (transport.go roundTrip and validMethod), plus what a request line and
// Host need to be sent as they are.
func httpguts_validRequest(r *http.Request) bool {
	for k, vs := range r.Header {
		if !validHeaderName(k) {
			return false
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return false
			}
		}
	}
	return (r.URL.Path == "" || r.URL.Path[0] == '/') && r.Method != "" && validHeaderName(r.Method) && r.URL.Host != "" && validHost(r.URL.Host) &&
		!strings.ContainsAny(r.URL.RawQuery, " #\x7f") && !strings.ContainsFunc(r.URL.RawQuery, func(c rune) bool { return c < ' ' })
}

var (
	validHeaderName  = httpguts.ValidHeaderFieldName
	validHeaderValue = httpguts.ValidHeaderFieldValue
	validHost        = httpguts.ValidHostHeader
)
