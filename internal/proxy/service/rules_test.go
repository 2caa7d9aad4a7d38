package service

import (
	"net/url"
	"strings"
	"testing"

	svc "github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/gitproto"
)

func bounds() []Bound {
	gh := func(repo string, a svc.Access) Bound {
		return Bound{Grant: svc.Grant{Secret: "gh", Repo: repo, Access: a, Placeholder: "ph-gh"}, Secret: svc.Secret{Name: "gh", Kind: svc.GitHub, Host: "github.com"}}
	}
	return []Bound{
		gh("octo/app", svc.Push),
		gh("octo/lib", svc.Read),
		{Grant: svc.Grant{Secret: "ghe", Repo: "team/svc", Access: svc.Push}, Secret: svc.Secret{Name: "ghe", Kind: svc.GitHub, Host: "ghe.example.com"}},
		{Grant: svc.Grant{Secret: "gl", Repo: "grp/sub/proj", Access: svc.Push}, Secret: svc.Secret{Name: "gl", Kind: svc.GitLab, Host: "gitlab.com"}},
		{Grant: svc.Grant{Secret: "tr"}, Secret: svc.Secret{Name: "tr", Kind: svc.Header, Host: "tracker.example.com", HeaderName: "X-Api-Key", PathPrefix: "/api"}},
	}
}

// TestDecide: each service rule, allowed and refused.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		host, method, path, query string
		placeholder               bool
		allow                     bool
		op                        Op
	}{
		{"github.com", "GET", "/octo/app.git/info/refs", "service=git-upload-pack", true, true, OpGitFetch},
		{"github.com", "GET", "/Octo/App/info/refs", "service=git-receive-pack", true, true, OpGitPushRefs},
		{"github.com", "POST", "/octo/app.git/git-receive-pack", "", true, true, OpGitPush},
		{"github.com", "POST", "/octo/app.git/git-upload-pack", "", true, true, OpGitFetch},
		{"github.com", "GET", "/octo/lib.git/info/refs", "service=git-upload-pack", true, true, OpGitFetch},
		{"github.com", "GET", "/octo/lib.git/info/refs", "service=git-receive-pack", true, false, OpRefused},
		{"github.com", "POST", "/octo/lib.git/git-receive-pack", "", true, false, OpRefused},
		{"github.com", "GET", "/octo/other.git/info/refs", "service=git-upload-pack", true, false, OpPlaceholder},
		{"github.com", "GET", "/octo/other.git/info/refs", "service=git-upload-pack", false, true, OpAnonymous},
		{"github.com", "GET", "/octo/app.git/HEAD", "", false, true, OpAnonymous},
		{"github.com", "GET", "/octo/app.git/info/refs", "", true, false, OpRefused},
		{"api.github.com", "GET", "/repos/octo/app/pulls/3", "", true, true, OpAPIRead},
		{"api.github.com", "POST", "/repos/octo/app/pulls", "", true, true, OpPullCreate},
		{"api.github.com", "POST", "/repos/octo/app/issues/12/comments", "", true, true, OpComment},
		{"api.github.com", "POST", "/repos/octo/lib/pulls", "", true, false, OpRefused},
		{"api.github.com", "PUT", "/repos/octo/app/pulls/3/merge", "", true, false, OpRefused},
		{"api.github.com", "PATCH", "/repos/octo/app", "", true, false, OpRefused},
		{"api.github.com", "DELETE", "/repos/octo/app", "", true, false, OpRefused},
		{"api.github.com", "GET", "/repos/octo/app/hooks", "", true, false, OpAdminRefused},
		{"api.github.com", "GET", "/repos/octo/app/actions/secrets/X", "", true, false, OpAdminRefused},
		{"api.github.com", "PUT", "/repos/octo/app/branches/main/protection", "", true, false, OpAdminRefused},
		{"api.github.com", "GET", "/repos/octo/app/../other", "", true, false, OpRefused},
		{"api.github.com", "GET", "/user", "", true, true, OpAPIMeta},
		{"api.github.com", "GET", "/user/emails", "", true, false, OpPlaceholder},
		{"api.github.com", "POST", "/graphql", "", true, true, OpGraphQL},
		{"api.github.com", "GET", "/graphql", "", true, false, OpRefused},
		{"api.github.com", "GET", "/repos/octo/other", "", true, false, OpPlaceholder},
		{"api.github.com", "GET", "/orgs/octo/members", "", false, true, OpAnonymous},
		{"ghe.example.com", "GET", "/team/svc.git/info/refs", "service=git-receive-pack", true, true, OpGitPushRefs},
		{"ghe.example.com", "POST", "/api/v3/repos/team/svc/pulls", "", true, true, OpPullCreate},
		{"ghe.example.com", "POST", "/api/graphql", "", true, true, OpGraphQL},
		{"gitlab.com", "POST", "/grp/sub/proj.git/git-receive-pack", "", true, true, OpGitPush},
		{"gitlab.com", "GET", "/grp/sub/other.git/info/refs", "service=git-upload-pack", true, false, OpPlaceholder},
		{"gitlab.com", "GET", "/api/v4/projects", "", true, false, OpRefused},
		{"tracker.example.com", "GET", "/api/issues", "", true, true, OpHeader},
		{"tracker.example.com", "GET", "/apix", "", true, false, OpPlaceholder},
		{"tracker.example.com", "GET", "/api/../admin", "", true, false, OpRefused},
		{"tracker.example.com", "GET", "/", "", false, true, OpAnonymous},
		{"elsewhere.example.com", "GET", "/", "", true, false, OpPlaceholder},
		{"elsewhere.example.com", "GET", "/", "", false, false, OpNotCovered},
	} {
		q, _ := url.ParseQuery(c.query)
		v := Decide(bounds(), Request{Host: c.host, Method: c.method, Path: c.path, Query: q, Placeholder: c.placeholder})
		if v.Allow != c.allow || v.Op != c.op {
			t.Errorf("%s %s%s?%s (placeholder %v): allow %v %q (%s), want %v %q", c.method, c.host, c.path, c.query, c.placeholder, v.Allow, v.Op, v.Reason, c.allow, c.op)
		}
		if v.Allow && v.Bound == nil && v.Op != OpAnonymous {
			t.Errorf("%s %s: allowed with no grant", c.method, c.path)
		}
	}
}

// TestCheckPush: the session's own branches only, never deleted, never
// rewritten.
func TestCheckPush(t *testing.T) {
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	g := gitproto.Graph{c: {b}, b: {a}}
	own := []string{"paddock/s1", "feature/*"}
	for _, tc := range []struct {
		cmd gitproto.Command
		ok  bool
	}{
		{gitproto.Command{Old: a, New: c, Ref: "refs/heads/paddock/s1"}, true},
		{gitproto.Command{Old: gitproto.ZeroID, New: c, Ref: "refs/heads/feature/x"}, true},
		{gitproto.Command{Old: c, New: a, Ref: "refs/heads/paddock/s1"}, false},
		{gitproto.Command{Old: a, New: gitproto.ZeroID, Ref: "refs/heads/paddock/s1"}, false},
		{gitproto.Command{Old: a, New: c, Ref: "refs/heads/main"}, false},
		{gitproto.Command{Old: gitproto.ZeroID, New: c, Ref: "refs/tags/v1"}, false},
		{gitproto.Command{Old: gitproto.ZeroID, New: c, Ref: "refs/heads/feature"}, false},
		{gitproto.Command{Old: gitproto.ZeroID, New: c, Ref: "refs/heads/feature/../main"}, false},
		{gitproto.Command{Old: strings.Repeat("d", 40), New: c, Ref: "refs/heads/paddock/s1"}, false},
	} {
		bad := CheckPush([]gitproto.Command{tc.cmd}, g, own)
		if (len(bad) == 0) != tc.ok {
			t.Errorf("%v: refused %v, want ok %v", tc.cmd, bad, tc.ok)
		}
	}
}

// FuzzDecide: any request is judged without a panic; one allowed with a
// grant is for that grant's host, and a refused one never names a grant
// to swap in.
func FuzzDecide(f *testing.F) {
	f.Add("github.com", "POST", "/octo/app.git/git-receive-pack", "service=x", true)
	f.Add("api.github.com", "GET", "/repos/octo/app/hooks/../pulls", "", true)
	f.Add("ghe.example.com", "GET", "/api/v3/repos/team/svc", "", false)
	f.Fuzz(func(t *testing.T, host, method, path, query string, ph bool) {
		q, _ := url.ParseQuery(query)
		v := Decide(bounds(), Request{Host: host, Method: method, Path: path, Query: q, Placeholder: ph})
		if !v.Allow {
			return
		}
		if v.Bound != nil {
			h := strings.ToLower(host)
			if h != v.Bound.Secret.Host && !(h == "api.github.com" && v.Bound.Secret.Host == "github.com") {
				t.Fatalf("allowed on %q with the grant for %s", host, v.Bound.Secret.Host)
			}
			if strings.Contains("/"+path+"/", "/../") {
				t.Fatalf("allowed a path with ..: %q %v", path, v.Op)
			}
		} else if ph {
			t.Fatalf("a placeholder allowed out with no grant: %+v", v)
		}
	})
}
