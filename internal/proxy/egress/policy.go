// Package egress is the Runner's egress proxy and its decisions: which
// names and ports a box may reach, which addresses may ever be dialed, and
// the TLS ClientHello check that a tunnel goes where its CONNECT said.
//
// Decision code (policy.go, addr.go, hostport.go, clienthello.go) does no
// I/O and is covered by table tests and fuzz targets; proxy.go does the I/O.
package egress

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Rule matches a name and a port. Host is normalized; a leading "*."
// matches any name below the rest (not the rest itself).
type Rule struct {
	Host string
	Port int
}

func (r Rule) String() string { return r.Host + ":" + strconv.Itoa(r.Port) }

// DefaultPort is the port of a rule that names none.
const DefaultPort = 443

var lookup = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(true), idna.BidiRule())

// Normalize makes a name comparable: lower case, no trailing dot, IDNA
// (Unicode to punycode). It refuses empty labels, IP literals and
// anything that is not a DNS name.
func Normalize(host string) (string, error) {
	h := strings.TrimSuffix(host, ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("%q is not a host name: %w", host, errdefs.ErrInvalid)
	}
	if !utf8.ValidString(h) {
		return "", fmt.Errorf("%q is not UTF-8: %w", host, errdefs.ErrInvalid)
	}
	a, err := lookup.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid host name: %w", host, errdefs.ErrInvalid)
	}
	a = strings.ToLower(a)
	// The result must be a fixed point: a punycode label that does not
	// decode back to valid IDNA is refused, so one name has one spelling.
	if again, err := lookup.ToASCII(a); err != nil || again != a {
		return "", fmt.Errorf("%q does not normalize to a stable name: %w", host, errdefs.ErrInvalid)
	}
	for _, l := range strings.Split(a, ".") {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("%q has an empty or too long label: %w", host, errdefs.ErrInvalid)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("%q holds %q, not allowed in a host name: %w", host, c, errdefs.ErrInvalid)
			}
		}
	}
	if isNumeric(a) {
		return "", fmt.Errorf("%q is an address, not a name; policies allow names only: %w", host, errdefs.ErrInvalid)
	}
	return a, nil
}

// isNumeric reports names whose last label is all digits (an IPv4 literal,
// or a decimal/octal trick like 2130706433) or a hex number.
func isNumeric(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseRule reads "name[:port]" or "*.name[:port]"; the port defaults to 443.
func ParseRule(s string) (Rule, error) {
	host, port := s, DefaultPort
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 1 || p > 65535 {
			return Rule{}, fmt.Errorf("rule %q: bad port: %w", s, errdefs.ErrInvalid)
		}
		host, port = s[:i], p
	}
	wild := strings.HasPrefix(host, "*.")
	if wild {
		host = host[2:]
	}
	if host == "*" || host == "" || strings.Contains(host, "*") {
		return Rule{}, fmt.Errorf("rule %q: only a leading \"*.\" wildcard is allowed, never \"*\" alone (no box gets a wide-open posture): %w", s, errdefs.ErrInvalid)
	}
	n, err := Normalize(host)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	if wild {
		// "*.com", "*.co.uk", "*.github.io": every name below a public
		// suffix belongs to someone else; a wildcard needs a registrable
		// name (example.co.uk) or one below it.
		if suffix, _ := publicsuffix.PublicSuffix(n); !strings.Contains(n, ".") || suffix == n {
			return Rule{}, fmt.Errorf("rule %q: %q is a public suffix, under which anyone may register a name; a wildcard must sit on a registrable name (like *.example.%s) or below one: %w", s, n, n, errdefs.ErrInvalid)
		}
		n = "*." + n
	}
	return Rule{Host: n, Port: port}, nil
}

// matches reports whether the rule covers a normalized name and port.
func (r Rule) matches(host string, port int) bool {
	if r.Port != port {
		return false
	}
	if rest, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == r.Host
}

// Policy is one session's egress policy. Deny wins over Allow, and over
// Approved.
type Policy struct {
	Posture string // "anthropic" or "allowlist" (offline has no policy)
	Allow   []Rule
	Deny    []Rule
	// Ask holds a connection to a name no rule decides until a person
	// approves or denies it (or a timeout denies it), instead of refusing
	// it at once.
	Ask bool
	// Approved are rules people approved while the session ran; each may
	// expire.
	Approved []Approval
}

// Approval is a rule a person approved, until a time (zero: no end).
type Approval struct {
	Rule  Rule
	Until time.Time
	By    string
}

// AnthropicRules is the anthropic posture: the API and nothing else.
var AnthropicRules = []Rule{{Host: "api.anthropic.com", Port: 443}}

// NewPolicy builds a policy from rule strings.
func NewPolicy(posture string, allow, deny []string) (*Policy, error) {
	return Spec{Posture: posture, Allow: allow, Deny: deny}.Policy()
}

// Spec is what a session's policy is made of: its posture, its rules as
// written, whether it asks, and what people approved.
type Spec struct {
	Posture     string
	Allow, Deny []string
	Ask         bool
	Approved    []Approval
}

// Policy builds the policy. It refuses a bad rule, and an allowlist that
// could let nothing through and asks for nothing.
func (sp Spec) Policy() (*Policy, error) {
	p := &Policy{Posture: sp.Posture, Ask: sp.Ask, Approved: sp.Approved}
	switch sp.Posture {
	case "anthropic":
		p.Allow = append(p.Allow, AnthropicRules...)
		p.Ask = false // the API only
	case "allowlist":
	default:
		return nil, fmt.Errorf("egress posture %q has no policy (anthropic or allowlist): %w", sp.Posture, errdefs.ErrInvalid)
	}
	for _, s := range sp.Allow {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, r)
	}
	for _, s := range sp.Deny {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		p.Deny = append(p.Deny, r)
	}
	if len(p.Allow) == 0 && len(p.Approved) == 0 && !p.Ask {
		return nil, fmt.Errorf("egress allowlist is empty: give --allow NAME[:PORT], --ask (to approve names as the box asks for them), or use --egress offline: %w", errdefs.ErrInvalid)
	}
	return p, nil
}

// Decision is the outcome for one name and port.
type Decision struct {
	Allow bool
	// Rule is the rule that decided, or "" when none matched.
	Rule string
	// Reason says why, for the log line and the 403 body.
	Reason string
	// Askable: no rule decided a valid name, and the policy asks a person.
	Askable bool
}

// Decide applies the policy to a raw host (normalized here) and port, now.
func (p *Policy) Decide(rawHost string, port int) Decision {
	return p.DecideAt(rawHost, port, time.Now())
}

// DecideAt is Decide at a given time (for approvals that expire).
func (p *Policy) DecideAt(rawHost string, port int, now time.Time) Decision {
	host, err := Normalize(rawHost)
	if err != nil {
		return Decision{Reason: err.Error()}
	}
	for _, r := range p.Deny {
		if r.matches(host, port) {
			return Decision{Rule: "deny " + r.String(), Reason: fmt.Sprintf("%s:%d is denied by rule %s", host, port, r)}
		}
	}
	for _, r := range p.Allow {
		if r.matches(host, port) {
			return Decision{Allow: true, Rule: "allow " + r.String(), Reason: "allowed by rule " + r.String()}
		}
	}
	for _, a := range p.Approved {
		if a.Rule.matches(host, port) && (a.Until.IsZero() || now.Before(a.Until)) {
			rule := "approved " + a.Rule.String()
			if a.By != "" {
				rule += " by " + a.By
			}
			return Decision{Allow: true, Rule: rule, Reason: rule}
		}
	}
	return Decision{Reason: fmt.Sprintf("%s:%d is not on the %s allowlist of this session", host, port, p.Posture), Askable: p.Ask}
}
