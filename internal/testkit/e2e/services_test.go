package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

const (
	svcHost  = "ghe.svc-test.example"
	svcToken = "ghp_e2eREALtokenNEVERinAbox_4f1c2a"
)

// gitHost is a GitHub Enterprise-shaped host of the test's internet:
// real git http-backend for /o/r.git, and the REST API's pull requests,
// both answering 401 without the real token; it records what reached it.
type gitHost struct {
	root    string
	mu      sync.Mutex
	reached []string
	pulls   []map[string]any
	handler http.Handler
}

func (g *gitHost) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.reached...)
}

func newGitHost(t *testing.T) *gitHost {
	g := &gitHost{root: t.TempDir()}
	gitExec := testenv.LookPath(t, "git")
	backend := &cgi.Handler{Path: gitExec, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=owner"}}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+svcToken))
	return g.with(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.reached = append(g.reached, r.Method+" "+r.URL.Path+" auth="+fmt.Sprint(r.Header.Get("Authorization") != ""))
		g.mu.Unlock()
		if a := r.Header.Get("Authorization"); a != basic && a != "Bearer "+svcToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, `{"message":"Requires authentication"}`, http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/v3/repos/o/r/pulls":
			var pr map[string]any
			json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&pr)
			g.mu.Lock()
			g.pulls = append(g.pulls, pr)
			n := len(g.pulls)
			g.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"number":%d,"html_url":"https://%s/o/r/pull/%d"}`, n, svcHost, n)
		case r.Method == "GET" && r.URL.Path == "/api/v3/repos/o/r":
			fmt.Fprint(w, `{"id":1,"node_id":"R_o_r","name":"r","full_name":"o/r","default_branch":"main"}`)
		case r.Method == "POST" && r.URL.Path == "/api/graphql":
			g.graphql(w, r)
		case strings.HasPrefix(r.URL.Path, "/api/"):
			fmt.Fprintf(w, `{"authorization":%q}`, r.Header.Get("Authorization"))
		default:
			backend.ServeHTTP(w, r)
		}
	}))
}

func (g *gitHost) with(h http.Handler) *gitHost { g.handler = h; return g }

// graphql answers what gh pr create and gh pr view ask (gh 2.23): the
// repository, pull requests for a branch, the pull request made, one by
// number.
func (g *gitHost) graphql(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	w.Header().Set("Content-Type", "application/json")
	repo := `"id":"R_o_r","name":"r","owner":{"login":"o"},"hasIssuesEnabled":true,"description":"","hasWikiEnabled":false,"viewerPermission":"WRITE","defaultBranchRef":{"name":"main"}`
	switch {
	case strings.Contains(req.Query, "query RepositoryInfo"):
		fmt.Fprintf(w, `{"data":{"repository":{%s,"parent":null,"mergeCommitAllowed":true,"rebaseMergeAllowed":true,"squashMergeAllowed":true}}}`, repo)
	case strings.Contains(req.Query, "query PullRequestForBranch"):
		fmt.Fprint(w, `{"data":{"repository":{"pullRequests":{"nodes":[]},"defaultBranchRef":{"name":"main"}}}}`)
	case strings.Contains(req.Query, "mutation PullRequestCreate"):
		in, _ := req.Variables["input"].(map[string]any)
		g.mu.Lock()
		g.pulls = append(g.pulls, in)
		n := len(g.pulls)
		g.mu.Unlock()
		fmt.Fprintf(w, `{"data":{"createPullRequest":{"pullRequest":{"id":"PR_%d","url":"https://%s/o/r/pull/%d"}}}}`, n, svcHost, n)
	case strings.Contains(req.Query, "query PullRequestByNumber"):
		g.mu.Lock()
		var title string
		if len(g.pulls) > 0 {
			title, _ = g.pulls[len(g.pulls)-1]["title"].(string)
		}
		g.mu.Unlock()
		fmt.Fprintf(w, `{"data":{"repository":{"pullRequest":{"id":"PR_1","url":"https://%s/o/r/pull/1","number":1,"title":%q,"state":"OPEN","body":"","author":{"login":"owner"},"isDraft":false,"baseRefName":"main","headRefName":"x","additions":1,"deletions":0,"commits":{"totalCount":1},"reviewRequests":{"nodes":[]},"reviews":{"nodes":[],"totalCount":0},"assignees":{"nodes":[],"totalCount":0},"labels":{"nodes":[],"totalCount":0},"projectCards":{"nodes":[],"totalCount":0},"comments":{"nodes":[],"totalCount":0},"reactionGroups":[],"createdAt":"2026-12-05T00:00:00Z","statusCheckRollup":{"nodes":[]}}}}}`, svcHost, title)
	default:
		http.Error(w, `{"errors":[{"message":"the test's fake does not answer this query"}]}`, http.StatusBadRequest)
	}
}

// TestServiceGrantWithClaude: a session granted github:o/r:push, on each
// backend, whose Claude Code runs git and curl through its Bash tool:
// the push of its own branch and a pull request go through with the real
// token, which reaches the server and nothing in the box; a push to main,
// a force push, a deletion, another repository and an admin route are
// refused with the reason git or curl prints, and nothing of them
// reaches the server. Every request is a line of the session's log.
func TestServiceGrantWithClaude(t *testing.T) {
	gh := newGitHost(t)
	inet := newTestInternetWith(t, gh.handler, svcHost)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, inet.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnvOpts(t, envOpts{hosts: map[string]string{svcHost: inet.addr}}, fmt.Sprintf("[services]\nca_file = %q\n", caFile))
	var out strings.Builder
	if code := mainWithStdin(context.Background(), e, svcToken+"\n", &out, "secret", "set", "gh", "--kind", "github", "--host", svcHost); code != 0 || !strings.Contains(out.String(), "fingerprint") {
		t.Fatalf("secret set: %d %s", code, out.String())
	}
	if ls := e.pd("secret", "ls"); !strings.Contains(ls, "gh") || !strings.Contains(ls, svcHost) || strings.Contains(ls, svcToken) {
		t.Fatalf("secret ls: %s", ls)
	}
	bare := filepath.Join(gh.root, "o", "r.git")
	for _, args := range [][]string{{"init", "-q", "--bare", "-b", "main", bare}, {"-C", bare, "config", "http.receivepack", "true"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	defer e.fake.SetSteps(nil)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			// No host workspace: this Runner runs in a mount namespace of
			// its own (for the test's names), where docker could not see
			// a workspace's mount; the files stay in the session's volume.
			name := "svc-" + backend
			e.pd("run", "-d", "--name", name, "--backend", backend,
				"--egress", "allowlist", "--allow", svcHost, "--secret", "gh:o/r:push")
			defer e.pdRun("rm", "-f", name)
			e.waitScreen(name, promptReady, 90*time.Second)
			url := "https://" + svcHost + "/o/r.git"
			script := strings.Join([]string{
				"cd /workspace",
				"git -c init.defaultBranch=main clone -q " + url + " repo > clone.txt 2>&1 || git init -q -b main repo",
				"cd repo && git remote add origin " + url + " 2>/dev/null; git checkout -q -b paddock/" + name,
				"echo " + backend + " > " + backend + ".txt && git add . && git -c user.name=a -c user.email=a@example.com commit -q -m " + backend,
				"git push origin paddock/" + name + " > ../push.txt 2>&1; echo rc=$? >> ../push.txt",
				"git push origin HEAD:main > ../main.txt 2>&1; echo rc=$? >> ../main.txt",
				"git -c user.name=a -c user.email=a@example.com commit -q --amend -m rewritten; git push --force origin paddock/" + name + " > ../force.txt 2>&1; echo rc=$? >> ../force.txt",
				"git push origin :paddock/" + name + " > ../delete.txt 2>&1; echo rc=$? >> ../delete.txt",
				"git ls-remote https://" + svcHost + "/o/other.git > ../other.txt 2>&1; echo rc=$? >> ../other.txt",
				"curl -sS -X POST -H \"Authorization: Bearer $GH_ENTERPRISE_TOKEN\" -d '{\"title\":\"from " + backend + "\",\"head\":\"paddock/" + name + "\",\"base\":\"main\"}' https://" + svcHost + "/api/v3/repos/o/r/pulls > ../pr.txt 2>&1; echo rc=$? >> ../pr.txt",
				"curl -sS -H \"Authorization: Bearer $GH_ENTERPRISE_TOKEN\" https://" + svcHost + "/api/v3/repos/o/r/hooks > ../hooks.txt 2>&1; echo rc=$? >> ../hooks.txt",
				"gh pr create --title 'gh from " + backend + "' --body b --head paddock/" + name + " --base main > ../ghpr.txt 2>&1; echo rc=$? >> ../ghpr.txt",
				"gh pr view 1 > ../ghview.txt 2>&1; echo rc=$? >> ../ghview.txt",
				"gh api graphql -f query='{ search(query: \"x\", type: REPOSITORY, first: 5) { repositoryCount } }' > ../ghsearch.txt 2>&1; echo rc=$? >> ../ghsearch.txt",
				"curl -sS -H \"Authorization: Bearer $GH_ENTERPRISE_TOKEN\" https://" + svcHost + "/api/v3/repos/o/r/echo > ../echo.txt 2>&1; echo rc=$? >> ../echo.txt",
				"env > ../env.txt; echo done > ../done.txt",
			}, "; ")
			e.fake.SetSteps([]fakeapi.Step{{Name: "Bash", Input: map[string]any{"command": script, "description": "push and open a pull request"}}})
			before := len(gh.seen())
			e.typeLine(name, fakeapi.StepsKeyword+" ship it")
			read := func(f string) string {
				out, _, _ := e.pdRun("exec", name, "--", "cat", "/workspace/"+f)
				return out
			}
			for deadline := time.Now().Add(3 * time.Minute); read("done.txt") == ""; time.Sleep(300 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the script never ended:\n%s\npush: %s\nrunner log:\n%s", e.screen(name), read("push.txt"), e.log.String())
				}
			}
			if got := read("push.txt"); !strings.HasSuffix(strings.TrimSpace(got), "rc=0") {
				t.Fatalf("the push of the session's branch: %s\n%s", got, e.pd("logs", "--services", name))
			}
			head, _ := exec.Command("git", "-C", bare, "rev-parse", "refs/heads/paddock/"+name).Output()
			if len(strings.TrimSpace(string(head))) != 40 {
				t.Fatal("the session's branch did not arrive")
			}
			for f, want := range map[string]string{
				"main.txt":   "[remote rejected] HEAD -> main (paddock: not this session's branch",
				"force.txt":  "(paddock: not a fast-forward",
				"delete.txt": "(paddock: a session never deletes a ref)",
				"other.txt":  "403",
			} {
				got := read(f)
				if !strings.Contains(got, want) || strings.HasSuffix(strings.TrimSpace(got), "rc=0") {
					t.Errorf("%s: %q, want %q and a failure", f, got, want)
				}
			}
			if got := read("pr.txt"); !strings.Contains(got, `"number":`) {
				t.Errorf("the pull request: %s", got)
			}
			if got := read("ghpr.txt"); !strings.Contains(got, "https://"+svcHost+"/o/r/pull/") || !strings.HasSuffix(strings.TrimSpace(got), "rc=0") {
				t.Errorf("gh pr create: %s", got)
			}
			if got := read("ghview.txt"); !strings.Contains(got, "gh from "+backend) {
				t.Errorf("gh pr view: %s", got)
			}
			if got := read("ghsearch.txt"); !strings.Contains(got, "403") && !strings.Contains(got, "search") || strings.HasSuffix(strings.TrimSpace(got), "rc=0") {
				t.Errorf("gh api graphql with a search: %s", got)
			}
			if got := read("hooks.txt"); !strings.Contains(got, "paddock: refused") {
				t.Errorf("the admin route: %s", got)
			}
			if got := read("echo.txt"); strings.Contains(got, svcToken) || !strings.Contains(got, "redacted by paddock") {
				t.Errorf("the echo route: %s", got)
			}
			// Nothing refused reached the server: no push but the
			// session's own branch's, no hooks, and nothing with a
			// credential for another repository (git's first, anonymous
			// try goes: what the box could send without paddock).
			pushes := 0
			for _, r := range gh.seen()[before:] {
				if strings.Contains(r, "/other.git") && !strings.HasSuffix(r, "auth=false") || strings.Contains(r, "/hooks ") {
					t.Errorf("a refused request reached the server: %s", r)
				}
				if strings.HasPrefix(r, "POST /o/r.git/git-receive-pack ") {
					pushes++
				}
			}
			if pushes != 1 {
				t.Errorf("%d pushes reached the server, want the one of the session's branch", pushes)
			}
			// The real token: in no file, environment or log of the box
			// or the Runner.
			envTxt := read("env.txt")
			if !strings.Contains(envTxt, "GH_ENTERPRISE_TOKEN=paddock-placeholder-gh-") {
				t.Errorf("the box's environment has no placeholder:\n%s", envTxt)
			}
			leak := exec.Command("grep", "-rl", svcToken, filepath.Join(e.dir, "logs"), filepath.Join(e.dir, "audit.jsonl"))
			if b, _ := leak.Output(); len(b) > 0 {
				t.Errorf("the real token in %s", b)
			}
			// (The token split in two in the command: exec's own audit line
			// must not hold it either.)
			if out, _, _ := e.pdRun("exec", name, "--", "sh", "-c", "grep -rl '"+svcToken[:8]+"''"+svcToken[8:]+"' /workspace "+sandbox.HomeDir+" /tmp 2>/dev/null; true"); strings.TrimSpace(out) != "" {
				t.Errorf("the real token in the box's files: %s", out)
			}
			if strings.Contains(e.log.String(), svcToken) {
				t.Error("the real token in the Runner's log")
			}
			ps, _, _ := e.pdRun("exec", name, "--", "sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'")
			if strings.Contains(ps, svcToken) {
				t.Error("the real token in a box process's environment or arguments")
			}
			// The log: one line per request, with the ref updates.
			var es []decisionlog.Entry
			for _, l := range strings.Split(strings.TrimSpace(e.pd("logs", "--services", "--json", name)), "\n") {
				var x decisionlog.Entry
				if json.Unmarshal([]byte(l), &x) == nil {
					es = append(es, x)
				}
			}
			var pushed, refusedMain, pr bool
			for _, x := range es {
				for _, u := range x.RefUpdates {
					pushed = pushed || x.Decision == decisionlog.Forwarded && strings.HasSuffix(u, "refs/heads/paddock/"+name)
					refusedMain = refusedMain || x.Decision == decisionlog.Refused && strings.HasSuffix(u, "refs/heads/main")
				}
				pr = pr || x.Decision == decisionlog.Forwarded && x.Method == "POST" && strings.HasSuffix(x.Path, "/pulls")
			}
			if !pushed || !refusedMain || !pr {
				t.Errorf("the service log lacks a line (push %v, main refused %v, pull request %v):\n%s", pushed, refusedMain, pr, e.pd("logs", "--services", name))
			}
			// Each refused case is a line of its own, saying why.
			for what, match := range map[string]func(x decisionlog.Entry) bool{
				"the force push": func(x decisionlog.Entry) bool { return strings.Contains(x.Reason, "not a fast-forward") },
				"the deletion":   func(x decisionlog.Entry) bool { return strings.Contains(x.Reason, "never deletes a ref") },
				"another repository": func(x decisionlog.Entry) bool {
					return strings.Contains(x.Path, "/o/other.git/") && x.Rule == "placeholder elsewhere"
				},
				"the hooks route": func(x decisionlog.Entry) bool { return strings.HasSuffix(x.Path, "/hooks") && x.Rule == "admin route" },
				"the GraphQL search": func(x decisionlog.Entry) bool {
					return strings.HasSuffix(x.Path, "/graphql") && strings.Contains(x.Reason, "search")
				},
			} {
				if match == nil {
					continue
				}
				found := false
				for _, x := range es {
					found = found || x.Decision == decisionlog.Refused && match(x)
				}
				if !found {
					t.Errorf("no refused line for %s", what)
				}
			}
			ghPR := false
			for _, x := range es {
				ghPR = ghPR || x.Decision == decisionlog.Forwarded && strings.HasSuffix(x.Path, "/graphql") && strings.HasSuffix(x.Rule, "graphql "+"pull request")
			}
			if !ghPR {
				t.Error("no forwarded line for gh's pull request (GraphQL createPullRequest)")
			}
			t.Logf("paddock logs --services %s:\n%s", name, e.pd("logs", "--services", name))
		})
	}

	// paddock pr, from the host: a clone session's branch, fetched from
	// its box, pushed as the repository's owner with the real token, and
	// a pull request opened; the box is given nothing for it.
	t.Run("pr", func(t *testing.T) {
		e.t = t
		ws := ownedRepo(t)
		name := "svc-pr"
		e.pd("run", "-d", "--name", name, "--backend", "local", "--workspace", ws, "--clone", "--secret", "gh:o/r:push")
		defer e.pdRun("rm", "-f", name)
		e.waitScreen(name, promptReady, 90*time.Second)
		if out, errs, code := e.pdRun("pr", name); code == 0 || !strings.Contains(out+errs, "no commit beyond its base") {
			t.Fatalf("pr of a branch with nothing new: %d %s%s", code, out, errs)
		}
		e.pd("exec", name, "--", "sh", "-c", "cd /workspace && echo pr > pr.txt && git add pr.txt && git -c user.name=a -c user.email=a@example.com commit -q -m 'Add pr.txt from the box'")
		pullsBefore := len(gh.pulls)
		out := e.pd("pr", name, "--body", "made by a test")
		if !strings.Contains(out, "opened pull request #") || !strings.Contains(out, "paddock/"+name) {
			t.Fatalf("paddock pr said %q", out)
		}
		head, _ := exec.Command("git", "-C", bare, "rev-parse", "refs/heads/paddock/"+name).Output()
		boxHead := strings.TrimSpace(e.pd("exec", name, "--", "git", "-C", "/workspace", "rev-parse", "HEAD"))
		if strings.TrimSpace(string(head)) != boxHead {
			t.Fatalf("the upstream's branch %q, the box's %q", head, boxHead)
		}
		gh.mu.Lock()
		pr := gh.pulls[len(gh.pulls)-1]
		n := len(gh.pulls)
		gh.mu.Unlock()
		if n != pullsBefore+1 || pr["head"] != "paddock/"+name || pr["base"] != "main" || pr["title"] != "Add pr.txt from the box" || pr["body"] != "made by a test" {
			t.Fatalf("the pull request: %v", pr)
		}
		logs := e.pd("logs", "--services", name)
		if !strings.Contains(logs, "PUSH") || !strings.Contains(logs, "/repos/o/r/pulls") {
			t.Fatalf("the log lacks the push or the pull request:\n%s", logs)
		}
		if b, _ := exec.Command("grep", "-rl", svcToken, ws).Output(); len(b) > 0 {
			t.Fatalf("the real token in the repository: %s", b)
		}
	})
}
