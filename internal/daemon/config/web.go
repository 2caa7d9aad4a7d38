package config

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Web configures the Runner's web page.
type Web struct {
	// Listen is a host:port, or "off": a loopback one, or any with TLS
	// (validate, below).
	Listen string `toml:"listen"`
	// TLS is "" (plain HTTP: loopback only) or "self-signed" (paddock
	// makes a certificate and prints its fingerprint); Cert and Key are
	// the owner's certificate and key instead.
	TLS  string `toml:"tls"`
	Cert string `toml:"tls_cert"`
	Key  string `toml:"tls_key"`
	// Hosts are the names (or addresses) the page is reached by, beside
	// its listen address: the only Host headers it answers, and the
	// self-signed certificate's names.
	Hosts []string `toml:"hosts"`
}

// TLSSelfSigned is web.tls's value for a certificate paddock makes.
const TLSSelfSigned = "self-signed"

// TLSOn says the page is served over TLS.
func (w Web) TLSOn() bool { return w.TLS == TLSSelfSigned || w.Cert != "" }

// hostName is a DNS name as web.hosts takes it.
var hostName = regexp.MustCompile(`^(?i)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)

// validate checks [web]: a listen address that is loopback, or any with
// TLS; the TLS settings; the hosts.
func (w Web) validate() error {
	switch {
	case w.TLS != "" && w.TLS != TLSSelfSigned:
		return &Error{Key: "web.tls", Msg: fmt.Sprintf("%q is not %q (or leave it out and set tls_cert and tls_key)", w.TLS, TLSSelfSigned)}
	case w.TLS == TLSSelfSigned && (w.Cert != "" || w.Key != ""):
		return &Error{Key: "web.tls", Msg: "self-signed, or tls_cert and tls_key: not both"}
	case (w.Cert == "") != (w.Key == ""):
		return &Error{Key: "web.tls_cert", Msg: "tls_cert and tls_key go together"}
	case w.Cert != "" && (!strings.HasPrefix(w.Cert, "/") || !strings.HasPrefix(w.Key, "/")):
		return &Error{Key: "web.tls_cert", Msg: "tls_cert and tls_key must be absolute paths"}
	}
	for _, h := range w.Hosts {
		if _, err := netip.ParseAddr(h); err != nil && (len(h) > 253 || !hostName.MatchString(h)) {
			return &Error{Key: "web.hosts", Msg: fmt.Sprintf("%q is not a host name or an address (no port, no scheme)", h)}
		}
	}
	if w.Listen == "off" {
		return nil
	}
	host, port, err := net.SplitHostPort(w.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return &Error{Key: "web.listen", Msg: fmt.Sprintf("%q is not a host:port or off", w.Listen)}
	}
	if IsLoopbackHost(host) {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil && host != "" {
		return &Error{Key: "web.listen", Msg: fmt.Sprintf("%q: listen on an address (0.0.0.0, or one of this host's), not a name", w.Listen)}
	}
	if !w.TLSOn() {
		return &Error{Key: "web.listen", Msg: fmt.Sprintf("%q is not a loopback address, and the page is served to a network only over TLS: set web.tls = %q, or web.tls_cert and web.tls_key", w.Listen, TLSSelfSigned)}
	}
	return nil
}
