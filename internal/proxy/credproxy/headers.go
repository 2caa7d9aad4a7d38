package credproxy

import (
	"bytes"
	"net/http"
	"strings"
)

// normName lowercases a header name and folds '_' to '-', because some
// servers and proxies treat X_Api_Key as X-Api-Key.
func normName(k string) string {
	return strings.ReplaceAll(strings.ToLower(k), "_", "-")
}

// strippedExact are removed from every forwarded request whatever their case
// or '_' spelling: credentials, what a client could use to lie about where
// the request came from or to change the method, and the hop-by-hop
// headers. forward also drops the headers a request's Connection names.
var strippedExact = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"x-api-key":           true,
	"api-key":             true,
	"cookie":              true,
	"forwarded":           true,
	"x-real-ip":           true,
	"via":                 true,
	"connection":          true,
	"proxy-connection":    true,
	"keep-alive":          true,
	"te":                  true,
	"trailer":             true,
	"transfer-encoding":   true,
	"upgrade":             true,
	"expect":              true, // the body is already read; no 100-continue upstream
	"content-length":      true, // set by paddock from the buffered body
	"http2-settings":      true,
	// Method overrides: the route allows one method; an upstream (or a
	// proxy in front of it) that honours these could be made to run another.
	"x-http-method-override": true,
	"x-http-method":          true,
	"x-method-override":      true,
}

// isStripped reports whether a request header never reaches the upstream.
// Besides the exact list: every X-Forwarded-*, and any name that looks like
// it carries a credential (…-token, …-secret, …auth…, …api-key…). It runs
// for every header of every request, so it normalises into a stack buffer
// instead of allocating; FuzzIsStripped holds it to the plain spelling.
func isStripped(k string) bool {
	var buf [64]byte
	if len(k) > len(buf) {
		return strippedName([]byte(normName(k)))
	}
	n := buf[:len(k)]
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 0x80: // not a token byte (the server refuses it); as normName would
			return strippedName([]byte(normName(k)))
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '_':
			c = '-'
		}
		n[i] = c
	}
	return strippedName(n)
}

// strippedName is isStripped for a name already normalised by normName.
func strippedName(n []byte) bool {
	if strippedExact[string(n)] {
		return true
	}
	if bytes.HasPrefix(n, []byte("x-forwarded-")) || bytes.HasPrefix(n, []byte("proxy-")) {
		return true
	}
	return bytes.Contains(n, []byte("auth")) || bytes.Contains(n, []byte("api-key")) || bytes.Contains(n, []byte("apikey")) ||
		bytes.HasSuffix(n, []byte("-token")) || bytes.HasSuffix(n, []byte("-secret")) || bytes.Contains(n, []byte("cookie"))
}

// connectionNominated returns the header names a message lists in its
// Connection header.
func connectionNominated(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// wantsUpgrade reports an Upgrade attempt (h2c, websocket, anything).
func wantsUpgrade(r *http.Request) bool {
	if len(r.Header.Values("Upgrade")) > 0 || len(r.Header.Values("Http2-Settings")) > 0 {
		return true
	}
	for _, f := range connectionNominated(r.Header) {
		if strings.EqualFold(f, "upgrade") {
			return true
		}
	}
	return false
}
