package service

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Access is what a grant lets a session do with a repository.
type Access string

// The accesses.
const (
	// Read: fetch and clone over git, GET on the repository's API.
	Read Access = "read"
	// Push: Read, and pushing the refs the session owns, and opening a
	// pull request.
	Push Access = "push"
)

// Grant gives a session the use of a stored secret, narrowly: for a
// github or gitlab secret, one repository with an access; for a header
// secret, its host and path prefix as stored.
type Grant struct {
	// Secret names the stored secret (of the session's owner).
	Secret string `json:"secret"`
	// Repo is OWNER/REPO (GitLab: GROUP/…/PROJECT), for github and gitlab.
	Repo   string `json:"repo,omitempty"`
	Access Access `json:"access,omitempty"`
	// Placeholder is what the box holds in the secret's place.
	Placeholder string `json:"placeholder,omitempty"`
}

// String is the grant as written on the command line.
func (g Grant) String() string {
	if g.Repo == "" {
		return g.Secret
	}
	return g.Secret + ":" + g.Repo + ":" + string(g.Access)
}

var repoPart = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)

// ParseGrant reads NAME[:OWNER/REPO[:read|push]] (paddock run --secret).
// The access defaults to read. Whether the secret needs a repository is
// its kind's to say (CheckKind), once the secret is found.
func ParseGrant(s string) (Grant, error) {
	parts := strings.Split(s, ":")
	g := Grant{Secret: parts[0]}
	if err := ValidName(g.Secret); err != nil {
		return Grant{}, fmt.Errorf("--secret %q: %w", s, err)
	}
	if len(parts) > 3 {
		return Grant{}, fmt.Errorf("--secret %q: write NAME, or NAME:OWNER/REPO[:read|push]: %w", s, errdefs.ErrInvalid)
	}
	if len(parts) >= 2 {
		repo, err := cleanRepo(parts[1])
		if err != nil {
			return Grant{}, fmt.Errorf("--secret %q: %w", s, err)
		}
		g.Repo, g.Access = repo, Read
	}
	if len(parts) == 3 {
		switch a := Access(parts[2]); a {
		case Read, Push:
			g.Access = a
		default:
			return Grant{}, fmt.Errorf("--secret %q: the access is read or push, not %q: %w", s, parts[2], errdefs.ErrInvalid)
		}
	}
	return g, nil
}

// cleanRepo checks OWNER/REPO (or GROUP/SUBGROUP/…/PROJECT): segments of
// letters, digits, _ . -, none of them . or .., no .git suffix.
func cleanRepo(s string) (string, error) {
	segs := strings.Split(s, "/")
	if len(segs) < 2 || len(segs) > 20 {
		return "", fmt.Errorf("the repository %q is not OWNER/REPO: %w", s, errdefs.ErrInvalid)
	}
	for _, seg := range segs {
		if !repoPart.MatchString(seg) || seg == "." || seg == ".." || strings.HasSuffix(seg, ".git") {
			return "", fmt.Errorf("the repository %q is not OWNER/REPO (letters, digits, _ . -, no .git): %w", s, errdefs.ErrInvalid)
		}
	}
	return s, nil
}

// CheckKind checks the grant against the kind of the secret it names.
func (g Grant) CheckKind(k Kind) error {
	switch k {
	case GitHub:
		if g.Repo == "" {
			return fmt.Errorf("--secret %s: a github credential is given for one repository: --secret %s:OWNER/REPO[:read|push]: %w", g.Secret, g.Secret, errdefs.ErrInvalid)
		}
		if strings.Count(g.Repo, "/") != 1 {
			return fmt.Errorf("--secret %s: a GitHub repository is OWNER/REPO, not %q: %w", g, g.Repo, errdefs.ErrInvalid)
		}
	case GitLab:
		if g.Repo == "" {
			return fmt.Errorf("--secret %s: a gitlab credential is given for one project: --secret %s:GROUP/PROJECT[:read|push]: %w", g.Secret, g.Secret, errdefs.ErrInvalid)
		}
	case Header:
		if g.Repo != "" {
			return fmt.Errorf("--secret %s: a header credential goes to its host as stored; give only its name: %w", g, errdefs.ErrInvalid)
		}
	}
	return nil
}

// ValidPushRef checks a --push-ref pattern: a branch name, or one with a
// trailing /* (every branch under it).
func ValidPushRef(p string) error {
	b := strings.TrimSuffix(p, "/*")
	ok := b != "" && !strings.ContainsAny(b, "*?[\\ ~^:") && !strings.Contains(b, "..") && !strings.Contains(b, "//") &&
		!strings.HasPrefix(b, "/") && !strings.HasSuffix(b, "/") && !strings.HasSuffix(b, ".lock") && !strings.HasPrefix(b, "refs/")
	if !ok {
		return fmt.Errorf("--push-ref %q: give a branch name, or NAME/* for every branch under NAME (no refs/ prefix): %w", p, errdefs.ErrInvalid)
	}
	return nil
}

// RefAllowed reports whether a push may update ref (a full ref name):
// one of the session's own branches (refs/heads/<branch>, or under a
// NAME/* pattern). Tags and every other namespace are not the session's.
func RefAllowed(ref string, own []string) bool {
	b, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || b == "" || path.Clean(b) != b {
		return false
	}
	for _, p := range own {
		if dir, ok := strings.CutSuffix(p, "/*"); ok {
			if strings.HasPrefix(b, dir+"/") {
				return true
			}
		} else if b == p {
			return true
		}
	}
	return false
}
