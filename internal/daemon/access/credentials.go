package access

// credentials.go: a person's credential, and paddock's own login.

import (
	"context"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// SetCredential stores the caller's own credential; the audit log says
// who changed theirs, never its value.
func (g *Guard) SetCredential(ctx context.Context, kind credential.Kind, s secret.Value) (credential.Status, error) {
	p, err := caller(ctx)
	if err != nil {
		return credential.Status{}, err
	}
	st, err := g.inner.SetUserCredential(ctx, kind, s)
	g.record(p, audit.ActionCredentialSet, nil, err, func(e *audit.Entry) { e.Target = p.Name; e.Detail = "kind " + string(kind) })
	return st, err
}

// RemoveCredential deletes the caller's own credential.
func (g *Guard) RemoveCredential(ctx context.Context) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	err = g.inner.RemoveUserCredential(ctx)
	g.record(p, audit.ActionCredentialRemove, nil, err, func(e *audit.Entry) { e.Target = p.Name })
	return err
}

// StartLogin begins paddock credential login for the caller: the owner's
// login for admins, the member's own otherwise.
func (g *Guard) StartLogin(ctx context.Context) (string, error) {
	if _, err := caller(ctx); err != nil {
		return "", err
	}
	return g.inner.StartLogin(ctx)
}

// FinishLogin completes it; the audit log says who logged in (never a
// token).
func (g *Guard) FinishLogin(ctx context.Context, pasted string) (oauth.Status, error) {
	p, err := caller(ctx)
	if err != nil {
		return oauth.Status{}, err
	}
	st, err := g.inner.FinishLogin(ctx, pasted)
	g.record(p, audit.ActionCredentialLogin, nil, err, func(e *audit.Entry) { e.Target = whoseLogin(p) })
	return st, err
}

func whoseLogin(p people.Person) string {
	if p.Admin {
		return "owner"
	}
	return p.Name
}

// LoginStatus is the caller's login's state; it holds no token.
func (g *Guard) LoginStatus(ctx context.Context) (oauth.Status, error) {
	if _, err := caller(ctx); err != nil {
		return oauth.Status{}, err
	}
	return g.inner.LoginStatus(ctx)
}

// Logout forgets the caller's login.
func (g *Guard) Logout(ctx context.Context) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	err = g.inner.Logout(ctx)
	g.record(p, audit.ActionCredentialLogout, nil, err, func(e *audit.Entry) { e.Target = whoseLogin(p) })
	return err
}
