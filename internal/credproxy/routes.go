package credproxy

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// route is one forwarded endpoint.
type route struct {
	method string
	path   string
	// query checks one query parameter's value; keys not listed are refused.
	query map[string]func(string) bool
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
func matchPath(rawPath string) []route {
	var out []route
	for _, rt := range routes {
		if rt.path == rawPath {
			out = append(out, rt)
		}
	}
	return out
}

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
	vals, why := parseQuery(raw)
	if why != "" || vals == nil {
		return "", why
	}
	for k, vs := range vals {
		check, ok := rt.query[k]
		if !ok {
			return "", "query parameter " + strconv.Quote(truncate(k, 40)) + " is not allowed on " + rt.path
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

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// allowed lists methods for a path, for the Allow header of a 405.
func allowed(rts []route) string {
	ms := make([]string, 0, len(rts))
	for _, rt := range rts {
		ms = append(ms, rt.method)
	}
	return strings.Join(ms, ", ")
}
