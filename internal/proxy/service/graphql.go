package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	svc "github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/gql"
)

// GraphQL requests to GitHub are judged by what their document asks for:
// a query may start only at the granted repository (repository(owner,
// name) naming it), at viewer (who the token is: login, name, id) or at
// rateLimit, and go below only to what hangs off that repository: no
// list of repositories, search, or look-up by id, login or name (each a
// way to another repository's data) anywhere in it. A mutation may only
// open a pull request on the granted repository (createPullRequest, its
// repositoryId the repository's own), with a push grant.

// graphqlRequest is a GraphQL request's body.
type graphqlRequest struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables"`
	OperationName string         `json:"operationName"`
}

// viewerFields are what a query may ask of viewer.
var viewerFields = []string{"login", "name", "id", "databaseId", "__typename"}

// deniedBelow reports why a field below the top of a query may not be
// asked for, or "".
func deniedBelow(s *gql.Selection) string {
	n := s.Name
	switch n {
	case "search", "repositories", "forks", "gist", "gists", "viewer", "securityVulnerabilities", "sponsorables":
		return n
	case "node", "repository", "organization", "user", "repositoryOwner", "enterprise", "resource", "topic", "license", "marketplaceListing":
		if len(s.Args) > 0 {
			return n + " with arguments (a look-up by id, login or name)"
		}
	case "nodes":
		if _, ok := s.Args["ids"]; ok {
			return "nodes(ids:)"
		}
	}
	if strings.Contains(strings.ToLower(n), "repositories") {
		return n
	}
	return ""
}

// judgeGraphQL decides a GraphQL request body against the session's
// GitHub grants on its host, returning the grant it is for and its op,
// or the reason it is refused. nodeID looks up a granted repository's
// node id (for a mutation's repositoryId).
func judgeGraphQL(bs []*Bound, body []byte, nodeID func(*Bound) (string, error)) (*Bound, Op, string) {
	var req graphqlRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Query == "" {
		return nil, OpRefused, "a GraphQL request that is not {\"query\": …}"
	}
	doc, err := gql.Parse(req.Query)
	if err != nil {
		return nil, OpRefused, "the GraphQL document: " + err.Error()
	}
	var bound *Bound
	op := OpAPIRead
	use := func(owner, name any) string {
		o, _ := owner.(string)
		n, _ := name.(string)
		for _, b := range bs {
			if strings.EqualFold(o+"/"+n, b.Repo) {
				if bound != nil && bound != b {
					return "one GraphQL request, one repository"
				}
				bound = b
				return ""
			}
		}
		return fmt.Sprintf("repository %s/%s is not this session's (%s)", o, n, grantsOf(bs))
	}
	for _, o := range doc.Operations {
		if req.OperationName != "" && o.Name != req.OperationName {
			continue
		}
		for i := range o.Selection {
			top := &o.Selection[i]
			if top.Spread != "" || top.Inline {
				return nil, OpRefused, "a fragment at the top of a GraphQL operation"
			}
			switch {
			case o.Type == "subscription":
				return nil, OpRefused, "GraphQL subscriptions"
			case top.Name == "__typename":
				continue
			case o.Type == "query" && top.Name == "repository":
				owner, name := top.Args["owner"], top.Args["name"]
				if len(top.Args) != 2 {
					return nil, OpRefused, "repository(owner:, name:) with other arguments"
				}
				if why := use(owner.Resolve(req.Variables), name.Resolve(req.Variables)); why != "" {
					return nil, OpRefused, why
				}
			case o.Type == "query" && top.Name == "viewer":
				for _, s := range top.Selection {
					if s.Spread != "" || s.Inline || !slices.Contains(viewerFields, s.Name) {
						return nil, OpRefused, "viewer { " + s.Name + " }: a query asks viewer only for " + strings.Join(viewerFields, ", ")
					}
				}
				continue
			case o.Type == "query" && top.Name == "rateLimit":
			case o.Type == "mutation" && top.Name == "createPullRequest":
				in, _ := top.Args["input"].Resolve(req.Variables).(map[string]any)
				id, _ := in["repositoryId"].(string)
				if id == "" || len(top.Args) != 1 {
					return nil, OpRefused, "createPullRequest(input: {repositoryId, …}) only"
				}
				var hit *Bound
				for _, b := range bs {
					if b.Access != svc.Push {
						continue
					}
					if nid, err := nodeID(b); err == nil && nid == id {
						hit = b
					}
				}
				if hit == nil {
					return nil, OpRefused, "a pull request only on a repository this session may push to (" + grantsOf(bs) + ")"
				}
				if bound != nil && bound != hit {
					return nil, OpRefused, "one GraphQL request, one repository"
				}
				bound, op = hit, OpPullCreate
			case o.Type == "mutation":
				return nil, OpRefused, "the GraphQL mutation " + top.Name + ": a session may only open a pull request (createPullRequest)"
			default:
				return nil, OpRefused, "a GraphQL " + o.Type + " may start at repository (this session's), viewer or rateLimit, not " + top.Name
			}
			var why string
			err := doc.Walk(top.Selection, func(s *gql.Selection, _ int) error {
				if why = deniedBelow(s); why != "" {
					return fmt.Errorf("denied")
				}
				return nil
			})
			if why != "" {
				return nil, OpRefused, "the GraphQL field " + why + " reaches beyond this session's repository"
			}
			if err != nil {
				return nil, OpRefused, "the GraphQL document: " + err.Error()
			}
		}
	}
	if bound == nil {
		// viewer or rateLimit alone: who the token is, with the first grant.
		bound = bs[0]
		op = OpAPIMeta
	}
	return bound, op, ""
}

func grantsOf(bs []*Bound) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.String())
	}
	return strings.Join(out, ", ")
}
