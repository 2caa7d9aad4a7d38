package credproxy

import (
	"net/http"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/sessiontoken"
)

// authenticate finds the session token. The rules: exactly one value in
// exactly one of Authorization / X-Api-Key (other spellings are stripped
// unread), the value in that header's form, live, and issued for the kind
// that travels in that header.
func (p *Proxy) authenticate(r *http.Request) (sessiontoken.Record, string, string) {
	auth := r.Header.Values("Authorization")
	keys := r.Header.Values("X-Api-Key")
	if len(auth) > 1 || len(keys) > 1 {
		return sessiontoken.Record{}, "", "a credential header is repeated"
	}
	try := func(vals []string, kinds ...credential.Kind) (sessiontoken.Record, string, bool) {
		if len(vals) != 1 {
			return sessiontoken.Record{}, "", false
		}
		tok, ok := kinds[0].FromHeaderValue(vals[0])
		if !ok {
			return sessiontoken.Record{}, "", false
		}
		rec, ok := p.opts.Tokens.Lookup(tok)
		if !ok {
			return sessiontoken.Record{}, "", false
		}
		for _, k := range kinds {
			if rec.Kind == k {
				return rec, tok.Reveal(), true
			}
		}
		return sessiontoken.Record{}, "", false
	}
	if rec, tok, ok := try(keys, credential.KindAPIKey); ok {
		return rec, tok, ""
	}
	if rec, tok, ok := try(auth, credential.KindOAuth, credential.KindAuthToken); ok {
		return rec, tok, ""
	}
	if len(auth) == 0 && len(keys) == 0 {
		return sessiontoken.Record{}, "", "no session token: send it as the box's credential (x-api-key or Authorization: Bearer)"
	}
	// One message for unknown, revoked and misplaced tokens: the caller
	// learns nothing about which tokens exist.
	return sessiontoken.Record{}, "", "invalid session token (unknown, revoked, or in the wrong header)"
}
