package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	svc "github.com/paddockhq/paddock/internal/credentials/service"
)

// APIBase is the REST API's root for a GitHub secret's host.
func APIBase(s svc.Secret) string {
	if s.Host == "github.com" {
		return "https://api.github.com"
	}
	return "https://" + s.Host + "/api/v3"
}

// GitURL is the https:// remote of a repository on the secret's host.
func GitURL(s svc.Secret, repo string) string {
	return "https://" + s.Host + "/" + repo + ".git"
}

// Pull is a pull request to open (paddock pr, from the host).
type Pull struct {
	Head, Base, Title, Body string
	Draft                   bool
}

// OpenPull opens a pull request on b's repository with b's real
// credential, from the host (the owner's own request: the box is given
// nothing). An empty Base is the repository's default branch.
func OpenPull(ctx context.Context, c *http.Client, b Bound, p Pull) (number int, url string, err error) {
	if b.Secret.Kind != svc.GitHub {
		return 0, "", fmt.Errorf("paddock pr opens pull requests on GitHub; %s is a %s credential: %w", b.Secret.Name, b.Secret.Kind, errdefs.ErrInvalid)
	}
	call := func(method, path string, in, out any) error {
		var body io.Reader
		if in != nil {
			j, _ := json.Marshal(in)
			body = bytes.NewReader(j)
		}
		req, err := http.NewRequestWithContext(ctx, method, APIBase(b.Secret)+"/repos/"+b.Repo+path, body)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+b.Secret.Value.Reveal())
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return redactErr(err, b)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 {
			var e struct {
				Message string `json:"message"`
				Errors  []struct {
					Message string `json:"message"`
				} `json:"errors"`
			}
			_ = json.Unmarshal(raw, &e)
			msg := e.Message
			for _, x := range e.Errors {
				msg += "; " + x.Message
			}
			return fmt.Errorf("%s %s: %s: %s: %w", method, b.Repo+path, resp.Status, redact(msg, []string{b.Secret.Value.Reveal()}), errdefs.ErrUnavailable)
		}
		return json.Unmarshal(raw, out)
	}
	if p.Base == "" {
		var repo struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := call("GET", "", nil, &repo); err != nil {
			return 0, "", err
		}
		if p.Base = repo.DefaultBranch; p.Base == "" {
			p.Base = "main"
		}
	}
	var pr struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	}
	err = call("POST", "/pulls", map[string]any{"title": p.Title, "head": p.Head, "base": p.Base, "body": p.Body, "draft": p.Draft}, &pr)
	return pr.Number, pr.HTMLURL, err
}

func redactErr(err error, b Bound) error {
	if v := b.Secret.Value.Reveal(); v != "" && strings.Contains(err.Error(), v) {
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), v, Redacted))
	}
	return err
}
