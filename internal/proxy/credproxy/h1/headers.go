package h1

import (
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// hopByHop are a response's headers that describe its connection, not the
// response (RFC 9110 7.6.1, and what net/http drops): the server drops any
// a handler sets and writes its own.
var hopByHop = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// IsHopByHop reports whether a response header, by its canonical name,
// describes the connection rather than the response (RFC 9110 7.6.1): a
// proxy does not pass it on.
func IsHopByHop(name string) bool { return hopByHop[name] }

// invalidField finds a header field of h that HTTP/1.1 does not allow: a
// name that is not a token, or a value with a control byte (CR, LF, NUL…)
// that could end the field early. It returns its name and whether the
// name, or else the value, is at fault.
func invalidField(h http.Header) (name string, badName, found bool) {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return k, true, true
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return k, false, true
			}
		}
	}
	return "", false, false
}
