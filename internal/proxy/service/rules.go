// Package service is the Runner's proxy for service credentials: the
// HTTPS a box sends to a service host (github.com, a GitLab host, a
// header credential's host) is terminated by the Runner, each request is
// judged against the session's grants, and only one a grant allows goes
// out with the real credential in place of the box's placeholder. A push
// is read before any byte of it goes upstream: only the session's own
// branches may move, never deleted, never rewritten.
package service

import (
	"net/url"
	"strings"

	svc "github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/gitproto"
)

// Bound is a grant with the secret it names (value included: the Runner
// holds it, this package swaps it in).
type Bound struct {
	svc.Grant
	Secret svc.Secret
}

// Op is what a request does, as the rules see it.
type Op string

// The operations.
const (
	OpGitFetch     Op = "git fetch"
	OpGitPushRefs  Op = "git push (refs)"
	OpGitPush      Op = "git push"
	OpAPIRead      Op = "api read"
	OpAPIMeta      Op = "api (who am I)"
	OpPullCreate   Op = "pull request"
	OpComment      Op = "comment"
	OpHeader       Op = "header"
	OpAnonymous    Op = "anonymous"
	OpRefused      Op = "refused"
	OpNotCovered   Op = "not covered"
	OpPlaceholder  Op = "placeholder elsewhere"
	OpAdminRefused Op = "admin route"
	OpGraphQL      Op = "graphql"
)

// Verdict is the rules' answer for one request.
type Verdict struct {
	Allow bool
	// Bound is the grant that allows it (nil for an anonymous request).
	Bound *Bound
	Op    Op
	Repo  string
	// Reason says why, for the log and, when refused, for the box.
	Reason string
	// Push: the request is a receive-pack POST; its commands and pack
	// must be checked (CheckPush) before it goes.
	Push bool
	// GraphQL: a GitHub GraphQL POST; its document must be judged
	// (judgeGraphQL) before it goes, and names the grant it is for.
	GraphQL bool
}

// Request is what the rules look at.
type Request struct {
	Host, Method, Path string
	Query              url.Values
	// Placeholder: the request carries one of the session's placeholders
	// (in any header or the URL).
	Placeholder bool
}

// Hosts are the hosts a set of grants has the Runner terminate.
func Hosts(bs []Bound) []string {
	var out []string
	add := func(h string) {
		for _, x := range out {
			if x == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, b := range bs {
		add(b.Secret.Host)
		if b.Secret.Kind == svc.GitHub && b.Secret.Host == "github.com" {
			add("api.github.com")
		}
	}
	return out
}

// Decide judges one request to host for a session holding bs.
func Decide(bs []Bound, r Request) Verdict {
	host := strings.ToLower(r.Host)
	for _, seg := range strings.Split(r.Path, "/") {
		if seg == "." || seg == ".." {
			return Verdict{Op: OpRefused, Reason: "a path with . or .. segments (the server would read it as another path)"}
		}
	}
	var hostHit bool
	var refused *Verdict
	for i := range bs {
		b := &bs[i]
		var v Verdict
		var ok bool
		switch b.Secret.Kind {
		case svc.GitHub:
			v, ok = github(b, host, r)
		case svc.GitLab:
			v, ok = gitlab(b, host, r)
		case svc.Header:
			if ok = host == b.Secret.Host; ok {
				v = Verdict{Op: OpNotCovered}
				if b.Secret.PathPrefix == "" || under(r.Path, b.Secret.PathPrefix) {
					v = Verdict{Allow: true, Bound: b, Op: OpHeader, Reason: "header credential " + b.Secret.Name + " for " + host + b.Secret.PathPrefix}
				}
			}
		}
		switch {
		case !ok:
		case v.Allow:
			return v // the first grant that allows it
		case v.Op == OpNotCovered:
			hostHit = true
		case refused == nil:
			refused = &v
		}
	}
	if refused != nil {
		return *refused
	}
	switch {
	case r.Placeholder:
		return Verdict{Op: OpPlaceholder, Reason: "this session's credential placeholder was sent where no grant of the session allows it; it is worth nothing there"}
	case hostHit:
		// What the box could do without paddock: an anonymous request, to
		// a host its egress allows (a public repository, say).
		return Verdict{Allow: true, Op: OpAnonymous, Reason: "no grant covers this request: it goes without a credential"}
	}
	return Verdict{Op: OpNotCovered, Reason: "no grant of this session is for " + host}
}

func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/")
}

// gitPath splits a smart-HTTP path: /REPO(.git)/info/refs,
// /REPO(.git)/git-upload-pack or /REPO(.git)/git-receive-pack.
func gitPath(p string) (repo, endpoint string, ok bool) {
	for _, e := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if r, found := strings.CutSuffix(p, e); found && strings.HasPrefix(r, "/") {
			r = strings.TrimSuffix(strings.TrimPrefix(r, "/"), ".git")
			if r == "" || strings.Contains(r, "//") || strings.Contains(r, "..") {
				return "", "", false
			}
			return r, e[1:], true
		}
	}
	return "", "", false
}

// git judges a smart-HTTP request against b (host already matched).
func git(b *Bound, r Request, fold bool) Verdict {
	repo, endpoint, ok := gitPath(r.Path)
	if !ok {
		return Verdict{Op: OpNotCovered}
	}
	same := repo == b.Repo || fold && strings.EqualFold(repo, b.Repo)
	if !same {
		return Verdict{Op: OpNotCovered, Repo: repo}
	}
	v := Verdict{Bound: b, Repo: b.Repo}
	service := endpoint
	if endpoint == "info/refs" {
		if r.Method != "GET" {
			return Verdict{Op: OpRefused, Repo: b.Repo, Reason: "info/refs is GET only"}
		}
		service = r.Query.Get("service")
	} else if r.Method != "POST" {
		return Verdict{Op: OpRefused, Repo: b.Repo, Reason: endpoint + " is POST only"}
	}
	switch service {
	case "git-upload-pack":
		v.Allow, v.Op, v.Reason = true, OpGitFetch, "fetch from "+b.Repo+" ("+b.String()+")"
	case "git-receive-pack":
		if b.Access != svc.Push {
			return Verdict{Op: OpRefused, Repo: b.Repo, Reason: "this session's grant for " + b.Repo + " is read-only (" + b.String() + "): no push"}
		}
		v.Allow, v.Op, v.Reason = true, OpGitPushRefs, "push to "+b.Repo+" ("+b.String()+")"
		if endpoint == "git-receive-pack" {
			v.Op, v.Push = OpGitPush, true
		}
	default:
		return Verdict{Op: OpRefused, Repo: b.Repo, Reason: "a smart-HTTP request that is neither fetch nor push (dumb HTTP is not served)"}
	}
	return v
}

// adminParts are repository API paths never used with a grant, whatever
// the method: secrets, keys, hooks, people and settings of the repository.
var adminParts = []string{"hooks", "keys", "collaborators", "invitations", "actions/secrets", "actions/variables",
	"actions/runners", "actions/permissions", "dependabot/secrets", "codespaces/secrets", "environments",
	"branches/*/protection", "rulesets", "rules", "transfer", "autolinks", "pages", "deployments", "interaction-limits",
	"teams", "vulnerability-alerts", "automated-security-fixes", "private-vulnerability-reporting", "properties"}

// github judges a request to b's GitHub host(s).
func github(b *Bound, host string, r Request) (Verdict, bool) {
	enterprise := b.Secret.Host != "github.com"
	apiPath, onAPI := "", false
	switch {
	case !enterprise && host == "api.github.com":
		apiPath, onAPI = r.Path, true
	case host != b.Secret.Host:
		return Verdict{}, false
	case enterprise && under(r.Path, "/api/v3"):
		apiPath, onAPI = strings.TrimPrefix(r.Path, "/api/v3"), true
	case enterprise && r.Path == "/api/graphql":
		apiPath, onAPI = "/graphql", true
	}
	if !onAPI {
		return git(b, r, true), true
	}
	if apiPath == "" {
		apiPath = "/"
	}
	switch apiPath {
	case "/", "/user", "/rate_limit":
		if r.Method == "GET" {
			return Verdict{Allow: true, Bound: b, Op: OpAPIMeta, Reason: "GET " + apiPath + " (" + b.String() + ")"}, true
		}
	case "/graphql":
		if r.Method != "POST" {
			return Verdict{Op: OpRefused, Reason: "GraphQL is POST only here"}, true
		}
		// Judged by its document, against every GitHub grant on the host
		// (the handler reads the body: judgeGraphQL).
		return Verdict{Allow: true, Bound: b, Op: OpGraphQL, GraphQL: true, Reason: "GraphQL, judged by its document"}, true
	}
	rest, ok := strings.CutPrefix(apiPath, "/repos/")
	if !ok {
		return Verdict{Op: OpNotCovered}, true
	}
	segs := strings.SplitN(rest, "/", 3)
	if len(segs) < 2 || !strings.EqualFold(segs[0]+"/"+segs[1], b.Repo) {
		return Verdict{Op: OpNotCovered}, true
	}
	sub := ""
	if len(segs) == 3 {
		sub = segs[2]
	}
	if strings.Contains(sub, "..") || strings.Contains(sub, "//") || strings.Contains(sub, "%") {
		return Verdict{Op: OpRefused, Repo: b.Repo, Reason: "a path with .., // or escapes"}, true
	}
	for _, a := range adminParts {
		if matchPart(sub, a) {
			return Verdict{Op: OpAdminRefused, Repo: b.Repo, Reason: "the repository's " + a + " are not a session's to see or change"}, true
		}
	}
	v := Verdict{Bound: b, Repo: b.Repo}
	ps := strings.Split(sub, "/")
	switch {
	case r.Method == "GET" || r.Method == "HEAD":
		v.Allow, v.Op, v.Reason = true, OpAPIRead, r.Method+" on "+b.Repo+" ("+b.String()+")"
	case b.Access != svc.Push:
		v.Op, v.Reason = OpRefused, "this session's grant for "+b.Repo+" is read-only ("+b.String()+")"
	case r.Method == "POST" && sub == "pulls":
		v.Allow, v.Op, v.Reason = true, OpPullCreate, "open a pull request on "+b.Repo+" ("+b.String()+")"
	case r.Method == "POST" && len(ps) == 3 && (ps[0] == "issues" || ps[0] == "pulls") && number(ps[1]) && ps[2] == "comments":
		v.Allow, v.Op, v.Reason = true, OpComment, "comment on "+b.Repo+" #"+ps[1]+" ("+b.String()+")"
	case len(ps) == 3 && ps[0] == "pulls" && ps[2] == "merge":
		v.Op, v.Reason = OpRefused, "merging a pull request is the owner's, not a session's"
	default:
		v.Op, v.Reason = OpRefused, r.Method+" "+sub+" on "+b.Repo+" is not one a session may make: it may read, push its own branches, open a pull request and comment"
	}
	return v, true
}

// matchPart reports whether the path sub is the part a (its segments,
// "*" for any one) or under it.
func matchPart(sub, a string) bool {
	s, p := strings.Split(sub, "/"), strings.Split(a, "/")
	if len(s) < len(p) {
		return false
	}
	for i := range p {
		if p[i] != "*" && !strings.EqualFold(s[i], p[i]) {
			return false
		}
	}
	return true
}

func number(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// gitlab judges a request to b's GitLab host: git over smart HTTP only
// (its API is not yet served with a grant).
func gitlab(b *Bound, host string, r Request) (Verdict, bool) {
	if host != b.Secret.Host {
		return Verdict{}, false
	}
	if under(r.Path, "/api") {
		return Verdict{Op: OpRefused, Reason: "GitLab's API is not yet served with a grant; git fetch and push to " + b.Repo + " are"}, true
	}
	return git(b, r, true), true
}

// CheckPush judges a push's ref updates: each must be to one of own (the
// session's branches, svc.RefAllowed), none a deletion, and each that
// moves an existing ref a fast-forward the pack shows. It returns the
// reason for each refused ref; none means the push may go.
func CheckPush(cmds []gitproto.Command, g gitproto.Graph, own []string) map[string]string {
	bad := map[string]string{}
	for _, c := range cmds {
		switch {
		case !svc.RefAllowed(c.Ref, own):
			bad[c.Ref] = "paddock: not this session's branch (it may push " + strings.Join(own, ", ") + ")"
		case c.Delete():
			bad[c.Ref] = "paddock: a session never deletes a ref"
		case c.Create():
		case g == nil || !g.FastForward(c.Old, c.New):
			bad[c.Ref] = "paddock: not a fast-forward (a session never rewrites a branch)"
		}
	}
	return bad
}
