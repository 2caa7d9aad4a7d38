package credproxy

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/logkey"
)

// route is one forwarded endpoint.
type route struct {
	method string
	path   string
	// query checks one query parameter's value; keys not listed are refused.
	query map[string]func(string) bool
	// usageView: forwarded only with anthropic.usage_view on
	// (Options.UsageView); refused otherwise, before anything else.
	usageView bool
}

// Query policy. A request's query must parse strictly (no bare ';', valid
// escapes), name each key at most once, use only the keys its route lists,
// and give each a value the route accepts. The upstream receives the query
// re-encoded from the parsed values, never the client's raw bytes.
//
//   - POST /v1/messages and /v1/messages/count_tokens: only "beta", and only
//     "true" (the CLI sends ?beta=true).
//   - GET /v1/models: "beta" (true), "limit" (1..1000), "after_id" and
//     "before_id" (model ids: letters, digits, '-', '_', '.', ':', '@').
var routes = []route{
	{method: http.MethodPost, path: "/v1/messages", query: map[string]func(string) bool{"beta": isTrue}},
	{method: http.MethodPost, path: "/v1/messages/count_tokens", query: map[string]func(string) bool{"beta": isTrue}},
	{method: http.MethodGet, path: "/v1/models", query: map[string]func(string) bool{
		"beta": isTrue, "limit": isLimit, "after_id": isModelID, "before_id": isModelID,
	}},
}

// helloPath is the CLI's preconnect target (HEAD, no credential). paddock
// answers it itself with 200 and no body: it carries no credential, so
// forwarding it would only announce the box to the upstream, and refusing it
// would make the CLI log a connectivity error. Boxes normally run with
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 and never send it.
const helloPath = "/api/hello"

func isTrue(v string) bool { return v == "true" }

func isLimit(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1 && n <= 1000 && strconv.Itoa(n) == v
}

var modelID = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,128}$`)

func isModelID(v string) bool { return modelID.MatchString(v) }

// matchPath finds routes by the raw request-target path, byte for byte: no
// decoding, no cleaning, no case folding, so "/v1/%6Dessages", "/v1//messages",
// "/V1/messages" and "/v1/messages/" are all unknown paths.
func matchPath(rawPath string, direct bool) []route {
	var out []route
	for _, rt := range routes {
		if rt.path == rawPath {
			out = append(out, rt)
		}
	}
	if direct {
		for _, rt := range directRoutes {
			if rt.path == rawPath {
				out = append(out, rt)
			}
		}
	}
	return out
}

// directRoutes are requests Claude Code sends to the API host itself, not
// to its base URL, that paddock lets through for a feature it wins back
// (docs/DIRECT-REQUESTS.md says what each is, how it was measured, and
// why it may pass). They are served only on connections whose TLS the
// Runner terminated for that host (WithDirect), with the session token
// swapped for the credential like any other route; every other path the
// CLI sends there (telemetry, event logging, evaluations) is refused.
var directRoutes = []route{
	// Remote managed settings and the organization's policy limits (Team
	// and Enterprise plans), fetched at start. They only restrict the
	// session, in the owner's organization's favour; refused, the CLI
	// drops the organization's policy with a banner.
	{method: http.MethodGet, path: "/api/claude_code/settings"},
	{method: http.MethodGet, path: "/api/claude_code/policy_limits"},
	// The plan's usage limits (5-hour and weekly windows, usage credits),
	// read-only, for /status and /usage, and only when the owner opted in
	// with anthropic.usage_view (off by default; docs/CONFIG.md). The
	// CLI's query keys, each with the one value shape it sends.
	{method: http.MethodGet, path: "/api/oauth/usage", usageView: true, query: map[string]func(string) bool{
		"skip_spend": isOne, "at_wall": isOne, "cedar_ember": isOne, "starry_waterfall": isSurface,
	}},
}

func isOne(v string) bool { return v == "1" }

// usageViewOff is the refusal of a usage_view route while the option is off.
const usageViewOff = "paddock does not forward the plan's usage (/status, /usage): anthropic.usage_view is off in the Runner's config (off by default; the owner turns it on, see docs/CONFIG.md)"

var surface = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// isSurface: where the CLI shows an offer ("cli_menu"), a word.
func isSurface(v string) bool { return surface.MatchString(v) }

// Not let through, each for a reason (DIRECT-REQUESTS.md): the profile
// (/api/oauth/profile: the CLI would keep the owner's email and
// organization in the box) and with it everything the CLI asks for once
// it has one, the claude.ai account's connectors and artifacts, telemetry
// and event logging, evaluations, bootstrap, fast mode's status. Fast mode
// comes back without a request (CLAUDE_CODE_SKIP_FAST_MODE_ORG_CHECK: the
// API itself refuses it to an organization that does not allow it).

type directKey struct{}

// WithDirect marks a connection's context as one whose TLS the Runner
// terminated for the API host: the direct routes are served on it.
func WithDirect(ctx context.Context) context.Context {
	return context.WithValue(ctx, directKey{}, true)
}

func isDirect(ctx context.Context) bool { v, _ := ctx.Value(directKey{}).(bool); return v }

// parseQuery parses a query strictly: no ';' (which some servers take for
// '&'), nothing malformed. An empty query gives nil values; a refusal, a
// reason safe to show.
func parseQuery(raw string) (url.Values, string) {
	if raw == "" {
		return nil, ""
	}
	if strings.Contains(raw, ";") {
		return nil, "the query may not contain ';'"
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, "the query is malformed"
	}
	return vals, ""
}

// checkQuery applies the query policy; it returns the query to forward and,
// when refused, a reason safe to show.
func checkQuery(rt route, raw string) (string, string) {
	if k, v, ok := plainPair(raw); ok {
		// One plain key=value (Claude Code's "beta=true"): what the general
		// path would decide and re-encode, without a map.
		if check, allowed := rt.query[k]; allowed && check(v) {
			return raw, ""
		}
	}
	return checkQueryValues(rt, raw)
}

// checkQueryValues is checkQuery's general path.
func checkQueryValues(rt route, raw string) (string, string) {
	vals, why := parseQuery(raw)
	if why != "" || vals == nil {
		return "", why
	}
	for _, k := range slices.Sorted(maps.Keys(vals)) { // the same refusal every time
		vs := vals[k]
		check, ok := rt.query[k]
		if !ok {
			return "", "query parameter " + strconv.Quote(logkey.Clip(k, 40)) + " is not allowed on " + rt.path
		}
		if len(vs) != 1 {
			return "", "query parameter " + strconv.Quote(k) + " is repeated"
		}
		if !check(vs[0]) {
			return "", "query parameter " + strconv.Quote(k) + " has a value paddock does not forward"
		}
	}
	return vals.Encode(), ""
}

// plainPair splits a query that is exactly one key=value of unreserved
// bytes (letters, digits, '-', '.', '_', '~'), which decoding and
// url.Values.Encode both leave as they are.
func plainPair(raw string) (k, v string, ok bool) {
	k, v, ok = strings.Cut(raw, "=")
	if !ok || k == "" {
		return "", "", false
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '=' && i == len(k)) {
			return "", "", false
		}
	}
	return k, v, true
}

// allowed lists methods for a path, for the Allow header of a 405.
func allowed(rts []route) string {
	ms := make([]string, 0, len(rts))
	for _, rt := range rts {
		ms = append(ms, rt.method)
	}
	return strings.Join(ms, ", ")
}
