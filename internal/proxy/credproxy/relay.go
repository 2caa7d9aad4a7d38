package credproxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/daemon/config"
)

// Relay is a further route of the credential proxy: requests under Prefix
// go to Upstream (the rest of the path appended), with the session's
// secret for this relay in Header. Everything else is as for the API: the
// session token, the header stripping, streaming, logging.
type Relay struct {
	Name     string
	Prefix   string // "/mod/": starts and ends with '/'
	Upstream *url.URL
	Header   string
}

// NewRelay checks a relay's settings.
func NewRelay(name, prefix, upstream, header string) (Relay, error) {
	u, err := config.ParseUpstream(upstream)
	if err != nil {
		return Relay{}, err
	}
	return Relay{Name: name, Prefix: prefix, Upstream: u, Header: http.CanonicalHeaderKey(header)}, nil
}

func (p *Proxy) matchRelay(rawPath string) (*Relay, string, bool) {
	for i := range p.opts.Relays {
		rl := &p.opts.Relays[i]
		if rest, ok := strings.CutPrefix(rawPath, rl.Prefix); ok {
			return rl, rest, true
		}
	}
	return nil, "", false
}

func (p *Proxy) relayNote() string {
	if len(p.opts.Relays) == 0 {
		return ""
	}
	var ps []string
	for _, rl := range p.opts.Relays {
		ps = append(ps, rl.Prefix+"*")
	}
	return ", and the relay routes " + strings.Join(ps, ", ")
}

// checkRelayRequest allows the ordinary methods and a clean path: no
// empty, "." or ".." segment, no escaped slash, dot, NUL or backslash, so
// the path the upstream sees is exactly the one checked.
func checkRelayRequest(method, suffix string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return "method " + logkey.Clip(method, 20) + " is not relayed"
	}
	if suffix == "" {
		return ""
	}
	low := strings.ToLower(suffix)
	for _, bad := range []string{"%2f", "%2e", "%00", "%5c", "\\", "#"} {
		if strings.Contains(low, bad) {
			return "the relay path holds an escaped separator or a dot"
		}
	}
	for _, seg := range strings.Split(suffix, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "the relay path has an empty, . or .. segment"
		}
	}
	if _, err := url.PathUnescape(suffix); err != nil {
		return "the relay path has a bad escape"
	}
	return ""
}

// checkRelayQuery parses the query strictly and re-encodes it.
func checkRelayQuery(raw string) (string, string) {
	vals, why := parseQuery(raw)
	if why != "" || vals == nil {
		return "", why
	}
	return vals.Encode(), ""
}
