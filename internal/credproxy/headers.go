package credproxy

import (
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
// it carries a credential (…-token, …-secret, …auth…, …api-key…).
func isStripped(k string) bool {
	n := normName(k)
	if strippedExact[n] {
		return true
	}
	if strings.HasPrefix(n, "x-forwarded-") || strings.HasPrefix(n, "proxy-") {
		return true
	}
	return strings.Contains(n, "auth") || strings.Contains(n, "api-key") || strings.Contains(n, "apikey") ||
		strings.HasSuffix(n, "-token") || strings.HasSuffix(n, "-secret") || strings.Contains(n, "cookie")
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
