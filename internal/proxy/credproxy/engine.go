package credproxy

import (
	"net/http"
	"time"

	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
)

// NewServer returns the HTTP/1.1 server the proxy is served with (package
// h1), with the given header read timeout and the defaults for the rest;
// the requests it refuses itself (a malformed head, HTTP/1.0, …) are
// answered in the Anthropic error shape, which Claude Code shows.
func NewServer(h http.Handler, readHeaderTimeout time.Duration) *h1.Server {
	s := h1.NewServer(h, readHeaderTimeout)
	s.WriteRefusal = writeRefusal
	return s
}

// writeRefusal is h1.Server.WriteRefusal: the error in the Anthropic shape,
// a head too large as request_too_large.
func writeRefusal(w http.ResponseWriter, status int, reason string) {
	typ := anthropic.InvalidRequest
	if status == http.StatusRequestHeaderFieldsTooLarge {
		typ = anthropic.RequestTooLarge
	}
	anthropic.WriteError(w, status, typ, reason, "")
}
