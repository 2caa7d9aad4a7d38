package service

import (
	"encoding/json"
	"errors"
	"testing"

	svc "github.com/paddockhq/paddock/internal/credentials/service"
)

// gh 2.23's own requests for gh pr create and gh pr view.
const (
	ghRepositoryInfo = "\n\tfragment repo on Repository {\n\t\tid\n\t\tname\n\t\towner { login }\n\t\thasIssuesEnabled\n\t\tdescription\n\t\thasWikiEnabled\n\t\tviewerPermission\n\t\tdefaultBranchRef {\n\t\t\tname\n\t\t}\n\t}\n\n\tquery RepositoryInfo($owner: String!, $name: String!) {\n\t\trepository(owner: $owner, name: $name) {\n\t\t\t...repo\n\t\t\tparent {\n\t\t\t\t...repo\n\t\t\t}\n\t\t\tmergeCommitAllowed\n\t\t\trebaseMergeAllowed\n\t\t\tsquashMergeAllowed\n\t\t}\n\t}"
	ghPRForBranch    = "\n\tquery PullRequestForBranch($owner: String!, $repo: String!, $headRefName: String!, $states: [PullRequestState!]) {\n\t\trepository(owner: $owner, name: $repo) {\n\t\t\tpullRequests(headRefName: $headRefName, states: $states, first: 30, orderBy: { field: CREATED_AT, direction: DESC }) {\n\t\t\t\tnodes {url,id,number,state,baseRefName,headRefName,isCrossRepository,headRepositoryOwner{id,login,...on User{name}}}\n\t\t\t}\n\t\t\tdefaultBranchRef { name }\n\t\t}\n\t}"
	ghPRCreate       = "\n\t\tmutation PullRequestCreate($input: CreatePullRequestInput!) {\n\t\t\tcreatePullRequest(input: $input) {\n\t\t\t\tpullRequest {\n\t\t\t\t\tid\n\t\t\t\t\turl\n\t\t\t\t}\n\t\t\t}\n\t}"
	ghPRView         = "\n\tquery PullRequestByNumber($owner: String!, $repo: String!, $pr_number: Int!) {\n\t\trepository(owner: $owner, name: $repo) {\n\t\t\tpullRequest(number: $pr_number) {url,number,title,state,body,author{login,...on User{id,name}},isDraft,reviewRequests(first: 100) {nodes {requestedReviewer {__typename,...on User{login},...on Team{organization{login}name,slug}}}},headRepository{id,name},comments(first: 100) {nodes {id,body},totalCount},statusCheckRollup: commits(last: 1) {nodes {commit {statusCheckRollup {contexts(first:100) {nodes {__typename...on StatusContext {context,state}}}}}}},id}\n\t\t}\n\t}"
)

func body(q string, vars map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
	return b
}

// TestJudgeGraphQL: gh's own queries and its pull request pass; any way
// to another repository, another mutation or a pull request elsewhere is
// refused.
func TestJudgeGraphQL(t *testing.T) {
	push := &Bound{Grant: svc.Grant{Secret: "gh", Repo: "octo/app", Access: svc.Push}, Secret: svc.Secret{Name: "gh", Kind: svc.GitHub, Host: "github.com"}}
	read := &Bound{Grant: svc.Grant{Secret: "gh", Repo: "octo/lib", Access: svc.Read}, Secret: svc.Secret{Name: "gh", Kind: svc.GitHub, Host: "github.com"}}
	bs := []*Bound{push, read}
	ids := map[string]string{"octo/app": "R_app", "octo/lib": "R_lib"}
	nodeID := func(b *Bound) (string, error) {
		if id, ok := ids[b.Repo]; ok {
			return id, nil
		}
		return "", errors.New("none")
	}
	app := map[string]any{"owner": "octo", "name": "app", "repo": "app"}
	for _, c := range []struct {
		name   string
		q      string
		vars   map[string]any
		bound  *Bound
		op     Op
		refuse bool
	}{
		{"gh RepositoryInfo", ghRepositoryInfo, app, push, OpAPIRead, false},
		{"gh PullRequestForBranch", ghPRForBranch, map[string]any{"owner": "Octo", "repo": "APP", "headRefName": "x", "states": []any{"OPEN"}}, push, OpAPIRead, false},
		{"gh PullRequestCreate", ghPRCreate, map[string]any{"input": map[string]any{"repositoryId": "R_app", "baseRefName": "main", "headRefName": "paddock/s", "title": "t"}}, push, OpPullCreate, false},
		{"gh pr view", ghPRView, map[string]any{"owner": "octo", "repo": "app", "pr_number": 1}, push, OpAPIRead, false},
		{"read grant reads", `query { repository(owner: "octo", name: "lib") { id } }`, nil, read, OpAPIRead, false},
		{"viewer login", `{ viewer { login } }`, nil, push, OpAPIMeta, false},
		{"literal arguments", `query { repository(owner: "octo", name: "app") { issues(first: 5) { nodes { title } } } }`, nil, push, OpAPIRead, false},

		{"another repository", ghRepositoryInfo, map[string]any{"owner": "octo", "name": "secret"}, nil, "", true},
		{"two repositories", `{ a: repository(owner: "octo", name: "app") { id } b: repository(owner: "octo", name: "lib") { id } }`, nil, nil, "", true},
		{"the owner's other repositories", `{ repository(owner: "octo", name: "app") { owner { repositories(first: 10) { nodes { name } } } } }`, nil, nil, "", true},
		{"viewer's repositories", `{ viewer { login repositories(first: 5) { nodes { name } } } }`, nil, nil, "", true},
		{"starred repositories", `{ repository(owner: "octo", name: "app") { owner { ... on User { starredRepositories(first: 3) { totalCount } } } } }`, nil, nil, "", true},
		{"search", `{ search(query: "x", type: REPOSITORY, first: 5) { repositoryCount } }`, nil, nil, "", true},
		{"node by id", `{ node(id: "R_other") { id } }`, nil, nil, "", true},
		{"node by id below", `{ repository(owner: "octo", name: "app") { id } x: rateLimit { cost } } query Q { repository(owner: "octo", name: "app") { issue(number: 1) { author { login } } pullRequest(number: 1) { id } } }`, nil, push, OpAPIRead, false},
		{"nested look-up", `{ repository(owner: "octo", name: "app") { id, parent { id }, pullRequests(first: 1) { nodes { author { ... on User { id } } } } } }`, nil, push, OpAPIRead, false},
		{"organization by login below", `{ repository(owner: "octo", name: "app") { owner { ... on Organization { id } } } r: repository(owner:"octo", name:"app") { mentionableUsers(first:1){nodes{organization(login:"x"){id}}} } }`, nil, nil, "", true},
		{"fragment at the top", `query { ...F } fragment F on Query { repository(owner: "octo", name: "app") { id } }`, nil, nil, "", true},
		{"a pull request elsewhere", ghPRCreate, map[string]any{"input": map[string]any{"repositoryId": "R_other"}}, nil, "", true},
		{"a pull request with a read grant", ghPRCreate, map[string]any{"input": map[string]any{"repositoryId": "R_lib"}}, nil, "", true},
		{"merging", `mutation { mergePullRequest(input: {pullRequestId: "PR_1"}) { clientMutationId } }`, nil, nil, "", true},
		{"a repository deleted", `mutation { deleteRepository(input: {repositoryId: "R_app"}) { clientMutationId } }`, nil, nil, "", true},
		{"a subscription", `subscription { repository(owner: "octo", name: "app") { id } }`, nil, nil, "", true},
		{"a mutation hidden in a query", `query { createPullRequest(input: {repositoryId: "R_app"}) { clientMutationId } }`, nil, nil, "", true},
		{"not GraphQL", `{ repository(owner: "octo"`, nil, nil, "", true},
		{"viewer's email", `{ viewer { email } }`, nil, nil, "", true},
	} {
		b, op, why := judgeGraphQL(bs, body(c.q, c.vars), nodeID)
		if c.refuse {
			if why == "" {
				t.Errorf("%s: allowed (%v %v)", c.name, b, op)
			}
			continue
		}
		if why != "" || b != c.bound || op != c.op {
			t.Errorf("%s: %v %q %q, want %v %q", c.name, b, op, why, c.bound, c.op)
		}
	}
}
