// Package deptest holds the test of paddock's dependency rules: which part
// may import which, each rule with its reason, checked against what
// `go list -deps` says every package of the module links in (not what its
// tests do). A rule broken fails `make test` naming the chain of imports.
package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/paddockhq/paddock/"

// A rule forbids the packages matched by Who from linking in any package
// matched by Forbidden; or, if Only is set, any package of the module but
// those Only matches (an allow list: Forbidden is then unused). A pattern
// is a path below the module ("internal/box/guest") and matches that package
// and, with a trailing "/...", everything below it.
type rule struct {
	Who, Forbidden []string
	Only           []string
	Why            string
}

// testKits are the packages that exist for tests only: fakes of what the
// tests cannot reach, harnesses, suites. They live in internal/testkit,
// but for the kits of one package, which sit beside it.
var testKits = []string{"internal/testkit/...", "internal/box/sandbox/sandboxtest", "internal/box/sandbox/sandboxbench",
	"internal/proxy/credproxy/attacks", "internal/box/image/imagetest"}

// credentialCode is every package that holds, stores or moves a credential.
var credentialCode = []string{"internal/credentials/...", "internal/proxy/credproxy/...", "internal/proxy/tlsterm"}

var rules = []rule{
	{
		Who:       []string{"internal/box/guest", "cmd/paddock-guest"},
		Forbidden: append(append([]string{"internal/daemon/...", "internal/base/store"}, credentialCode...), testKits...),
		Why:       "the guest runs inside every box, where the agent can read its memory and binary: it holds no credential code and nothing of the Runner",
	},
	{
		Who:       []string{"internal/box/sandbox/...", "internal/box/channel", "internal/box/cgroup", "internal/box/seccomp", "internal/box/tmuxcc", "internal/box/mirror", "internal/box/gitindex"},
		Forbidden: append([]string{"internal/sessions/session", "internal/daemon/runner", "internal/daemon/access", "internal/daemon/api", "internal/daemon/people", "internal/daemon/web", "internal/proxy/..."}, credentialCode...),
		Why: "the box side (but image, which builds and pushes images with the Docker CLI's registry login, and the guest, held to its own rule) makes, starts and stops boxes and speaks to their guests and terminals by id: " +
			"it knows no sessions, people, proxies or secrets, so nothing of it can hand a box a credential or act on a session it was not told to",
	},
	{
		Who:       []string{"internal/proxy/..."},
		Forbidden: []string{"internal/box/...", "internal/daemon/runner", "internal/daemon/access", "internal/daemon/api", "internal/daemon/web", "internal/daemon/cli"},
		Why:       "the proxy path decides on requests and sessions' policies alone: it knows no boxes or backends, so nothing a box controls reaches its decisions but the request and the channel it came on",
	},
	{
		Who:  []string{"internal/proxy/credproxy/h1"},
		Only: []string{"internal/base/watchdog"},
		Why: "the HTTP/1.1 engine is generic: it knows no credential, session, token or API, so how a request is parsed and framed " +
			"cannot depend on who sent it, and the proxy's policy stays in credproxy, which imports the engine and not the other way round",
	},
	{
		Who:  []string{"internal/base/..."},
		Only: []string{"internal/base/..."},
		Why:  "the leaves are what every part may use: they import nothing of paddock's but each other, so no part reaches another through them",
	},
	{
		Who:       []string{"internal/credentials/..."},
		Forbidden: []string{"internal/box/...", "internal/daemon/...", "internal/proxy/..."},
		Why:       "credentials are kept and refreshed by code that knows no box, no daemon and no proxy: what holds a secret is small enough to read whole",
	},
	{
		Who:       []string{"..."},
		Forbidden: testKits,
		Why:       "test kits (fakes, harnesses, suites) never ship in paddock: a fake that answers like a real service must never be what a user's Runner talks to",
	},
}

// allowed are the exceptions, each with its reason: from → to.
var allowed = map[[2]string]string{
	{"internal/daemon/cli", "internal/testkit/fakeapi"}: "`paddock dev fake-upstream` serves the fake Messages API on loopback for recording how the real CLI behaves as an HTTP client " +
		"(docs/DIRECT-REQUESTS.md) and for benchmarks on a machine without the API; it only ever listens on loopback and holds no credential",
	{"internal/daemon/config", "internal/box/runtimes"}: "the config checks its runtime keys with the runtimes package's own name syntax; runtimes is names, their kinds and a KVM probe " +
		"(it imports nothing of paddock's but errdefs): it makes, reaches and knows no box, so the proxy path, which reads the config, learns nothing a box controls through it",
}

// match reports whether pkg (a path below the module) is matched by pattern.
func match(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) })
}

// graph is each package's direct imports within the module.
type graph map[string][]string

// violations lists every package of g that a rule's Who matches and that
// links in (directly or not) a package the rule forbids, with the chain of
// imports that does it, except the allowed ones.
func violations(g graph, rules []rule, allowed map[[2]string]string) []string {
	var out []string
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rules {
		forbidden := func(pkg string) bool { return matchAny(r.Forbidden, pkg) }
		if r.Only != nil {
			forbidden = func(pkg string) bool { return !matchAny(r.Only, pkg) && !matchAny(r.Who, pkg) }
		}
		for _, p := range pkgs {
			if !matchAny(r.Who, p) || r.Only == nil && forbidden(p) {
				continue // a forbidden package is not held to its own rule (a test kit may use test kits)
			}
			for _, chain := range forbiddenChains(g, p, forbidden, allowed) {
				out = append(out, fmt.Sprintf("%s imports %s (%s): %s", p, chain[len(chain)-1], strings.Join(chain, " → "), r.Why))
			}
		}
	}
	return out
}

// forbiddenChains walks from p breadth first and returns, for each
// forbidden package reached, the shortest chain of imports to it. An
// allowed edge is not followed.
func forbiddenChains(g graph, p string, forbidden func(string) bool, allowed map[[2]string]string) [][]string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	var out [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range g[cur] {
			if _, seen := prev[next]; seen {
				continue
			}
			if _, ok := allowed[[2]string{cur, next}]; ok {
				continue
			}
			prev[next] = cur
			if forbidden(next) {
				chain := []string{next}
				for at := cur; at != ""; at = prev[at] {
					chain = append([]string{at}, chain...)
				}
				out = append(out, chain)
				continue
			}
			queue = append(queue, next)
		}
	}
	return out
}

// load asks go list for every package of the module and its imports.
func load(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = "../../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if to, ok := strings.CutPrefix(imp, module); ok {
				g[from] = append(g[from], to)
			}
		}
		if _, ok := g[from]; !ok {
			g[from] = nil
		}
	}
	if len(g) < 40 {
		t.Fatalf("go list found only %d packages: %v", len(g), g)
	}
	return g
}

// TestDependencyRules: every package of paddock keeps the rules.
func TestDependencyRules(t *testing.T) {
	g := load(t)
	for _, r := range rules {
		for _, who := range r.Who {
			found := false
			for p := range g {
				found = found || match(who, p)
			}
			if !found {
				t.Errorf("rule %q names %s, which matches no package: the rule checks nothing", r.Why, who)
			}
		}
	}
	for from := range allowed {
		if !slices.Contains(g[from[0]], from[1]) {
			t.Errorf("the exception %s → %s is no longer an import: remove it", from[0], from[1])
		}
	}
	for _, v := range violations(g, rules, allowed) {
		t.Error(v)
	}
}

// TestRulesCatchAForbiddenImport: the checker itself, on a made-up graph:
// a guest that reaches credential code through another package, a backend
// that imports session, product code that imports a fake, the same fake
// reached through an allowed edge only, an engine that reaches past its
// allow list through a package on it, a leaf that imports a part, and
// credential code that imports the daemon.
func TestRulesCatchAForbiddenImport(t *testing.T) {
	g := graph{
		"cmd/paddock-guest":           {"internal/box/guest"},
		"internal/box/guest":          {"internal/box/channel", "internal/helper"},
		"internal/helper":             {"internal/credentials/secret"},
		"internal/box/channel":        nil,
		"internal/credentials/secret": nil,
		"internal/box/sandbox/local":  {"internal/box/sandbox", "internal/sessions/session"},
		"internal/box/sandbox":        nil,
		"internal/sessions/session":   nil,
		"internal/daemon/runner":      {"internal/testkit/fakeapi"},
		"internal/daemon/cli":         {"internal/testkit/fakeapi"},
		"internal/testkit/fakeapi":    nil,
		"internal/proxy/credproxy/h1": {"internal/base/watchdog"},
		"internal/base/watchdog":      {"internal/base/logkey"},
		"internal/base/logkey":        nil,
		"internal/base/version":       {"internal/sessions/session"},
		"internal/credentials/oauth":  {"internal/daemon/config"},
		"internal/daemon/config":      nil,
	}
	got := violations(g, rules, allowed)
	want := []string{
		"internal/box/guest imports internal/credentials/secret (internal/box/guest → internal/helper → internal/credentials/secret)",
		"cmd/paddock-guest imports internal/credentials/secret (cmd/paddock-guest → internal/box/guest → internal/helper → internal/credentials/secret)",
		"internal/box/sandbox/local imports internal/sessions/session (internal/box/sandbox/local → internal/sessions/session)",
		"internal/daemon/runner imports internal/testkit/fakeapi (internal/daemon/runner → internal/testkit/fakeapi)",
		"internal/proxy/credproxy/h1 imports internal/base/logkey (internal/proxy/credproxy/h1 → internal/base/watchdog → internal/base/logkey)",
		"internal/base/version imports internal/sessions/session (internal/base/version → internal/sessions/session)",
		"internal/credentials/oauth imports internal/daemon/config (internal/credentials/oauth → internal/daemon/config)",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w+":") }) {
			t.Errorf("not reported: %s\ngot:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %d, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, v := range got {
		if strings.HasPrefix(v, "internal/daemon/cli ") {
			t.Errorf("an allowed edge was reported: %s", v)
		}
	}
}
