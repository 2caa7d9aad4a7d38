package runner

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/api"
	servicep "github.com/paddockhq/paddock/internal/proxy/service"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/gitimport"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// OpenPullRequest implements api.PullRequester (paddock pr): the
// session's branch is pushed from the host, as the repository's owner
// (gitimport.Push: no hook, https to that remote only), with the real
// token of the session's push grant, and a pull request opened with it.
// A clone session's branch is fetched from its box first (FetchSession);
// a live workspace's current branch is pushed as it is. The box is given
// nothing, and each step is a line of the session's decision log.
func (r *Runner) OpenPullRequest(ctx context.Context, ref string, req api.PRRequest) (api.PRResult, error) {
	s, err := r.Session(ctx, ref)
	if err != nil {
		return api.PRResult{}, err
	}
	if err := session.Check(session.OpPR, s.Name, s.Observed); err != nil {
		return api.PRResult{}, err
	}
	b, err := r.pushGrant(&s, req.Secret)
	if err != nil {
		return api.PRResult{}, err
	}
	if s.Workspace == "" {
		return api.PRResult{}, fmt.Errorf("session %q has no repository of the host's (neither --clone nor --workspace): nothing to push from: %w", s.Name, errdefs.ErrInvalid)
	}
	uid, gid, err := ownerOfDir(s.Workspace)
	if err != nil {
		return api.PRResult{}, fmt.Errorf("repository %s: %w", s.Workspace, err)
	}
	o := gitimport.Options{Repo: s.Workspace, UID: uid, GID: gid}
	res := api.PRResult{Repo: b.Repo}
	src := ""
	if s.Clone != nil {
		fr, err := r.FetchSession(ctx, s.ID)
		if err != nil {
			return res, err
		}
		if fr.Ahead == 0 {
			return res, fmt.Errorf("session %q's branch %s has no commit beyond its base: nothing to open a pull request for: %w", s.Name, s.Clone.Branch, errdefs.ErrConflict)
		}
		src, res.Branch, res.Commit = fr.Ref, s.Clone.Branch, fr.Commit
	} else {
		if res.Branch, err = gitimport.CurrentBranch(ctx, o); err != nil {
			return res, err
		}
		if res.Commit, err = gitimport.ResolveCommit(ctx, o, "refs/heads/"+res.Branch); err != nil {
			return res, err
		}
		src = "refs/heads/" + res.Branch
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	e := decisionlog.Entry{Time: start.UTC(), Kind: "service", Session: s.ID, RequestID: "pr_" + res.Commit[:12], Method: "PUSH",
		Host: b.Secret.Host, Port: 443, Path: "/" + b.Repo + ".git", Service: b.Secret.Name, Repo: b.Repo,
		Rule: "paddock pr, from the host", RefUpdates: []string{"→" + res.Commit[:12] + " refs/heads/" + res.Branch}}
	out, err := gitimport.Push(pctx, o, gitimport.PushOptions{URL: servicep.GitURL(b.Secret, b.Repo), Src: src, Dst: res.Branch,
		User: "x-access-token", Token: b.Secret.Value, CAFile: r.opts.Config.Services.CAFile})
	e.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		e.Decision, e.Reason = decisionlog.Refused, clipReason(err.Error()+" "+out)
		r.decisions.Record(e)
		return res, fmt.Errorf("push %s to %s: %w: %s", res.Branch, b.Repo, err, strings.TrimSpace(out))
	}
	e.Decision, e.Status = decisionlog.Forwarded, 200
	r.decisions.Record(e)
	title := req.Title
	if title == "" {
		title, _ = gitimport.Subject(ctx, o, res.Commit)
		title = cmp.Or(title, "paddock: "+s.Name)
	}
	client, err := r.serviceClient()
	if err != nil {
		return res, err
	}
	start = time.Now()
	pe := decisionlog.Entry{Time: start.UTC(), Kind: "service", Session: s.ID, RequestID: "pr_" + res.Commit[:12] + "_open", Method: "POST",
		Host: b.Secret.Host, Port: 443, Path: "/repos/" + b.Repo + "/pulls", Service: b.Secret.Name, Repo: b.Repo, Rule: "paddock pr, from the host"}
	res.Number, res.URL, err = servicep.OpenPull(pctx, client, b, servicep.Pull{Head: res.Branch, Base: req.Base, Title: title, Body: req.Body, Draft: req.Draft})
	pe.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		pe.Decision, pe.Reason = decisionlog.Refused, clipReason(err.Error())
		r.decisions.Record(pe)
		return res, err
	}
	pe.Decision, pe.Status, pe.Reason = decisionlog.Forwarded, 201, res.URL
	r.decisions.Record(pe)
	r.log.Info("pull request opened", logkey.Session, s.ID, "repo", b.Repo, "branch", res.Branch, "commit", res.Commit, "url", res.URL)
	return res, nil
}

// pushGrant is s's GitHub grant with push access (the one named, if
// several).
func (r *Runner) pushGrant(s *session.Session, name string) (servicep.Bound, error) {
	ss, err := r.serviceSession(s.ID)
	if err != nil {
		return servicep.Bound{}, fmt.Errorf("session %q: %v; give it a push grant at its start: paddock run --secret NAME:OWNER/REPO:push: %w", s.Name, err, errdefs.ErrInvalid)
	}
	for _, b := range ss.Bounds {
		if b.Secret.Kind == service.GitHub && b.Access == service.Push && (name == "" || b.Secret.Name == name) {
			return b, nil
		}
	}
	return servicep.Bound{}, fmt.Errorf("session %q has no GitHub grant with push access%s (its grants: %s); paddock pr needs one: paddock run --secret NAME:OWNER/REPO:push: %w",
		s.Name, map[bool]string{true: " named " + name}[name != ""], grantList(s), errdefs.ErrInvalid)
}

func grantList(s *session.Session) string {
	var out []string
	for _, g := range s.Services {
		out = append(out, g.String())
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// serviceClient is the host's own HTTP client for the services (the
// owner's requests, not a box's): the system's roots, or services.ca_file.
func (r *Runner) serviceClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if f := r.opts.Config.Services.CAFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("services.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}, nil
}

func clipReason(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
