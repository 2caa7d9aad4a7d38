package egress

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
)

// SplitHostPort reads the authority of a CONNECT ("name:port") or of an
// absolute URL's host (port defaulting to defPort). It refuses user info,
// empty parts, IP literals (the policy speaks of names) and bad ports.
func SplitHostPort(authority string, defPort int) (string, int, error) {
	if authority == "" || len(authority) > 260 {
		return "", 0, fmt.Errorf("empty or too long authority: %w", errdefs.ErrInvalid)
	}
	if strings.ContainsAny(authority, "@/\\ \t\r\n?#%") {
		return "", 0, fmt.Errorf("authority %q holds characters a host never has: %w", clip(authority), errdefs.ErrInvalid)
	}
	if strings.HasPrefix(authority, "[") {
		return "", 0, fmt.Errorf("authority %q is an IPv6 literal; only names may be reached: %w", clip(authority), errdefs.ErrInvalid)
	}
	host, port := authority, defPort
	if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		p, err := strconv.Atoi(authority[i+1:])
		if err != nil || p < 1 || p > 65535 || authority[i+1:] != strconv.Itoa(p) {
			return "", 0, fmt.Errorf("authority %q: bad port: %w", clip(authority), errdefs.ErrInvalid)
		}
		host, port = authority[:i], p
	} else if defPort == 0 {
		return "", 0, fmt.Errorf("authority %q has no port: %w", clip(authority), errdefs.ErrInvalid)
	}
	if strings.Contains(host, ":") {
		return "", 0, fmt.Errorf("authority %q: an IPv6 literal must be bracketed, and only names are allowed: %w", clip(authority), errdefs.ErrInvalid)
	}
	n, err := Normalize(host)
	if err != nil {
		return "", 0, err
	}
	return n, port, nil
}

// clip cuts a box's value for an error message or a record.
func clip(s string) string { return logkey.Clip(s, 80) }
