// Package oauth is paddock's own login to a Claude subscription: the
// authorization-code flow with PKCE that Claude Code itself uses (its
// endpoints, client id and scopes are read from the pinned CLI; see
// docs/CREDENTIALS.md), the token file, and the Runner's refresh
// Authority.
//
// The login belongs to paddock alone (never Claude Code's own login file,
// which paddock only reads): refresh tokens rotate, so exactly one party
// may refresh. The Runner is that party. It refreshes ahead of expiry and,
// at most once per token, when the API says the token expired; it writes
// the rotated token to disk (atomically, fsynced) before it uses the new
// access token, so a crash at any moment leaves the old token or the new
// one stored, never neither.
package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Endpoints of an OAuth server and the client paddock presents to it.
type Endpoints struct {
	AuthorizeURL string
	TokenURL     string
	// RedirectURL is the manual one: after login the page shows a code to
	// paste back ("CODE#STATE"), so the browser may be on any machine.
	RedirectURL string
	ClientID    string
	Scopes      []string
}

// Claude is Claude Code's subscription login, as the pinned CLI (2.1.328)
// does it: "Log in with your Claude account".
var Claude = Endpoints{
	AuthorizeURL: "https://claude.com/cai/oauth/authorize",
	TokenURL:     "https://platform.claude.com/v1/oauth/token",
	RedirectURL:  "https://platform.claude.com/oauth/code/callback",
	ClientID:     "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
	Scopes: []string{"org:create_api_key", "user:profile", "user:inference", "user:sessions:claude_code",
		"user:mcp_servers", "user:file_upload", "user:plugins", "user:privacy_consents:write"},
}

// PKCE is one login attempt's secrets: the verifier stays with paddock,
// the challenge and state go in the authorize URL.
type PKCE struct {
	Verifier  string
	Challenge string
	State     string
}

func random32() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewPKCE makes a verifier, its S256 challenge and a state.
func NewPKCE() (PKCE, error) {
	v, err := random32()
	if err != nil {
		return PKCE{}, err
	}
	s, err := random32()
	if err != nil {
		return PKCE{}, err
	}
	sum := sha256.Sum256([]byte(v))
	return PKCE{Verifier: v, Challenge: base64.RawURLEncoding.EncodeToString(sum[:]), State: s}, nil
}

// LoginURL is the address the person opens to log in.
func (e Endpoints) LoginURL(p PKCE) string {
	q := url.Values{}
	q.Set("code", "true")
	q.Set("client_id", e.ClientID)
	q.Set("response_type", "code")
	q.Set("redirect_uri", e.RedirectURL)
	q.Set("scope", strings.Join(e.Scopes, " "))
	q.Set("code_challenge", p.Challenge)
	q.Set("code_challenge_method", "S256")
	q.Set("state", p.State)
	return e.AuthorizeURL + "?" + q.Encode()
}

// SplitCode splits what the login page showed into its code and state,
// or says it is not the whole of it.
func SplitCode(pasted string) (code, state string, err error) {
	code, state, ok := strings.Cut(strings.TrimSpace(pasted), "#")
	if !ok || code == "" || state == "" {
		return "", "", fmt.Errorf("that does not look like the whole code: copy all of it, the # in the middle included, and run paddock credential login again: %w", errdefs.ErrInvalid)
	}
	return code, state, nil
}

// ParseCode reads what the login page showed ("CODE#STATE") and checks
// its state is this login's.
func ParseCode(pasted string, p PKCE) (string, error) {
	code, state, err := SplitCode(pasted)
	if err != nil {
		return "", err
	}
	if state != p.State {
		return "", fmt.Errorf("that code belongs to another login (its state differs); start again with paddock credential login: %w", errdefs.ErrInvalid)
	}
	return code, nil
}

// Token is a login's tokens. Access and Refresh never print.
type Token struct {
	Access   secret.Value
	Refresh  secret.Value
	Expires  time.Time
	Scopes   []string
	Obtained time.Time
}

// Error is an OAuth server's refusal (RFC 6749 §5.2) or a failed exchange.
type Error struct {
	// Status is the HTTP status; 0 when none came (network, timeout).
	Status int
	// Code is the error code ("invalid_grant", …), "" if the body said none.
	Code        string
	Description string
	Err         error // the transport error, when Status is 0
}

func (e *Error) Error() string {
	switch {
	case e.Status == 0:
		return fmt.Sprintf("the OAuth server did not answer: %v", e.Err)
	case e.Code != "":
		d := ""
		if e.Description != "" {
			d = ": " + e.Description
		}
		return fmt.Sprintf("the OAuth server refused (%d %s%s)", e.Status, e.Code, d)
	}
	return fmt.Sprintf("the OAuth server answered %d", e.Status)
}

func (e *Error) Unwrap() error { return e.Err }

// Permanent reports whether retrying cannot help: the grant (a code or a
// refresh token) is dead or the client is refused. A new login is needed.
func (e *Error) Permanent() bool {
	switch e.Code {
	case "invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "unsupported_grant_type":
		return true
	}
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// IsPermanent reports whether err is an *Error that is Permanent.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent()
}

// Client talks to the token endpoint.
type Client struct {
	Endpoints
	// HTTP is the client; nil uses one with a 30 s timeout per request.
	HTTP *http.Client
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// Exchange trades the code from the login page for tokens.
func (c *Client) Exchange(ctx context.Context, code string, p PKCE) (Token, error) {
	return c.post(ctx, map[string]string{"grant_type": "authorization_code", "code": code, "redirect_uri": c.RedirectURL,
		"client_id": c.ClientID, "code_verifier": p.Verifier, "state": p.State}, secret.Value{})
}

// Refresh trades a refresh token for new tokens. The answer's refresh
// token replaces the old one (rotation); if it has none, the old stays.
func (c *Client) Refresh(ctx context.Context, refresh secret.Value) (Token, error) {
	return c.post(ctx, map[string]string{"grant_type": "refresh_token", "refresh_token": refresh.Reveal(),
		"client_id": c.ClientID, "scope": strings.Join(c.Scopes, " ")}, refresh)
}

// maxAnswer bounds a token endpoint's answer.
const maxAnswer = 1 << 20

func (c *Client) post(ctx context.Context, body map[string]string, oldRefresh secret.Value) (Token, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, bytes.NewReader(b))
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	sent := c.now()
	resp, err := c.http().Do(req)
	if err != nil {
		return Token{}, &Error{Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return Token{}, &Error{Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(raw, &eb)
		return Token{}, &Error{Status: resp.StatusCode, Code: clip(eb.Error, 64), Description: clip(eb.Description, 256)}
	}
	if len(raw) > maxAnswer {
		return Token{}, &Error{Status: resp.StatusCode, Err: errors.New("the answer is over 1 MiB")}
	}
	var tr struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Scope        string `json:"scope"`
		TokenType    string `json:"token_type"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil || tr.AccessToken == "" {
		return Token{}, &Error{Status: resp.StatusCode, Code: "invalid_response", Description: "the answer holds no access token"}
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return Token{}, &Error{Status: resp.StatusCode, Code: "invalid_response", Description: "token type " + clip(tr.TokenType, 32) + " is not Bearer"}
	}
	t := Token{Access: secret.New(tr.AccessToken), Refresh: oldRefresh, Obtained: sent.UTC(), Scopes: strings.Fields(tr.Scope)}
	if tr.RefreshToken != "" {
		t.Refresh = secret.New(tr.RefreshToken)
	}
	if t.Refresh.IsZero() {
		return Token{}, &Error{Status: resp.StatusCode, Code: "invalid_response", Description: "the answer holds no refresh token"}
	}
	if tr.ExpiresIn > 0 {
		// From when the request was sent: never later than the server's.
		t.Expires = sent.Add(time.Duration(tr.ExpiresIn) * time.Second).UTC()
	}
	return t, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
