// Package attacks is the credential proxy's attack suite as data: raw
// HTTP/1.1 request bytes, one per trick of the hardening list, each with
// how many requests it may cause upstream. The proxy's own tests send them
// to its listener; the end-to-end tests send them from inside a real box.
package attacks

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Junk is the credential an attacker in the box tries to smuggle in.
const Junk = "sk-junk-credential-from-the-box"

// Body is the legitimate request body the cases carry.
const Body = `{"model":"claude-opus-5-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"say hi"}]}`

// Case is one attack.
type Case struct {
	Name string
	// Req is the raw bytes, sent on a fresh connection.
	Req string
	// Want is how many requests it may cause upstream: 0 (refused) or 1
	// (the one legitimate request, the trick normalised away).
	Want int
}

// Sentinel ends every attack on the wire: a refused request that closes
// the connection, so a client knows when the server has answered all that
// came before without half-closing (a half-closed client is a client that
// went away, and its request is cancelled).
const Sentinel = "GET /paddock-attack-sentinel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

// Cases returns the suite for a token that travels in header k with value
// v; other and otherPrefix name the other credential kind's header and
// value prefix ("Authorization", "Bearer " or "X-Api-Key", "").
func Cases(k, v, otherHeader, otherPrefix string) []Case {
	auth := k + ": " + v + "\r\n"
	junk := Junk
	body := Body
	post := func(target, extra string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: api.anthropic.com\r\n" + auth + extra +
			fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	good := post("/v1/messages", "")
	admin := "GET /v1/organizations/me HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"
	chunked := func(extra, trailer string) string {
		return "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + extra + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n", len(body), body) + trailer + "\r\n"
	}
	cases := []Case{}
	// Path tricks: none is one of the three routes, byte for byte.
	for _, target := range []string{
		"/v1/messages/", "/v1//messages", "//v1/messages", "/V1/messages", "/v1/Messages",
		"/v1/%6Dessages", "/v1%2Fmessages", "/v1%2fmessages", "/v1/messages%00", "/v1/./messages",
		"/v1/x/../messages", "/v1/../v1/messages", "/v1/messages;x=1", "/v1/messages/.", "/./v1/messages",
		"/v1/messages%2F", "/v1/messages%23x", "/v1/messages/count_tokens/../../models",
	} {
		cases = append(cases, Case{"path " + target, post(target, ""), 0})
	}
	// Query tricks: only the policy's keys, once each, re-encoded.
	for _, q := range []string{"?beta=false", "?beta=true&beta=true", "?beta=true&x=1", "?beta=true;x=1", "?%zz", "?beta=true%00"} {
		cases = append(cases, Case{"query " + q, post("/v1/messages"+q, ""), 0})
	}
	cases = append(cases, Case{"query encoded value", post("/v1/messages?beta=%74rue", ""), 1})
	cases = append(cases, []Case{
		// Request-target forms and protocols.
		{"absolute-form", strings.Replace(good, "POST /v1/messages ", "POST http://api.anthropic.com/v1/messages ", 1), 0},
		{"absolute-form https elsewhere", "GET https://evil.test/v1/models HTTP/1.1\r\nHost: evil.test\r\n" + auth + "\r\n", 0},
		{"authority-form CONNECT", "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n" + auth + "\r\n", 0},
		{"asterisk-form OPTIONS", "OPTIONS * HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 0},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0},
		{"websocket upgrade", "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + auth + "\r\n", 0},
		{"h2c upgrade on GET", "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n" + auth + "\r\n", 0},
		{"GET with a body", "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}", 0},
		// Credentials in every spelling: stripped, the request forwarded
		// with the owner's credential alone.
		{"other kind's header", post("/v1/messages", otherHeader+": "+otherPrefix+junk+"\r\n"), 1},
		{"other kind's header lower case", post("/v1/messages", strings.ToLower(otherHeader)+": "+otherPrefix+junk+"\r\n"), 1},
		{"underscore spellings", post("/v1/messages", "x_api_key: "+junk+"\r\nProxy_Authorization: Basic "+junk+"\r\n"), 1},
		{"proxy-authorization and cookie", post("/v1/messages", "Proxy-Authorization: Basic "+junk+"\r\nCookie: s="+junk+"\r\n"), 1},
		{"token copied into another header", post("/v1/messages", "X-Custom: prefix "+strings.TrimPrefix(v, "Bearer ")+"\r\n"), 1},
		{"own header twice", post("/v1/messages", auth), 0},
		{"credentials in trailers", chunked("Trailer: "+otherHeader+", "+k+"\r\n", otherHeader+": "+otherPrefix+junk+"\r\n"+k+": "+otherPrefix+junk+"\r\n"), 1},
		{"forwarded and via", post("/v1/messages", "Forwarded: for=10.0.0.1;host=evil.test\r\nVia: 1.1 evil.test\r\n"), 1},
	}...)
	cases = append(cases, []Case{
		// Path tricks (more above).
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
		{"CL over the default 32 MiB limit", "POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 40000000\r\n\r\n{}", 0},
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
	}...)
	return cases
}

// ReadResponses reads the responses to an attack and its Sentinel until
// the connection ends, and returns those before the sentinel's, without
// interim 1xx answers.
func ReadResponses(r io.Reader) []*http.Response {
	br := bufio.NewReader(r)
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

// Successes counts the 2xx responses.
func Successes(rs []*http.Response) int {
	n := 0
	for _, r := range rs {
		if r.StatusCode >= 200 && r.StatusCode < 300 {
			n++
		}
	}
	return n
}
