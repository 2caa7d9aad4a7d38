// Package fakeoauth is a fake of the OAuth 2.0 server behind Claude Code's
// subscription login: the far side paddock cannot reach from its test
// machines. It speaks the protocol as the pinned Claude Code CLI uses it,
// faithfully enough that paddock's OAuth client can be tested against it:
//
//   - GET /oauth/authorize with code=true, client_id, response_type=code,
//     redirect_uri, scope (space-separated), code_challenge,
//     code_challenge_method=S256 and state. The person who logs in is shown
//     "CODE#STATE" to paste back (the manual redirect flow); Authorize plays
//     that person without a browser.
//   - POST /v1/oauth/token, body JSON (or, like a generic OAuth server,
//     application/x-www-form-urlencoded), grant_type authorization_code
//     (PKCE S256, single-use codes) or refresh_token (refresh tokens
//     rotate: each refresh answers a new one and kills the old).
//   - Errors as RFC 6749 §5.2 has them: 400 (401 for invalid_client) with
//     {"error": ..., "error_description": ...}.
//
// Access tokens are known to Validate, for the fake Messages API to answer
// 401 for an expired or revoked one. Every token request is recorded, and
// faults can be injected into the next token requests.
package fakeoauth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Paths the server answers, as on the real hosts (claude.ai serves the
// authorize page, console.anthropic.com the token endpoint).
const (
	AuthorizePath = "/oauth/authorize"
	TokenPath     = "/v1/oauth/token"
)

// Token prefixes: paddock's credential kind detection calls a token that
// begins with "sk-ant-oat" an OAuth token, like the real ones.
const (
	AccessPrefix  = "sk-ant-oat01-fake-"
	RefreshPrefix = "sk-ant-ort01-fake-"
)

// Defaults for the zero values of Server.AccessTTL and Server.CodeTTL.
const (
	DefaultAccessTTL = 8 * time.Hour
	DefaultCodeTTL   = 10 * time.Minute
)

// maxBody bounds the token request body read; a larger one is refused.
const maxBody = 64 << 10

// OAuth error codes of RFC 6749 §5.2 (and §4.1.2.1 for the 5xx faults).
const (
	ErrInvalidRequest       = "invalid_request"
	ErrInvalidClient        = "invalid_client"
	ErrInvalidGrant         = "invalid_grant"
	ErrInvalidScope         = "invalid_scope"
	ErrUnsupportedGrantType = "unsupported_grant_type"
	ErrServerError          = "server_error"
	ErrTemporarily          = "temporarily_unavailable"
)

// Server is an http.Handler serving GET /oauth/authorize and POST
// /v1/oauth/token. Set its exported fields before serving; the zero
// Server (ClientID and RedirectURI empty) is usable. Its methods are safe
// for concurrent use, with each other and with serving.
type Server struct {
	// ClientID is the client_id required at authorize and token requests;
	// "" accepts any non-empty one. Either way a code or refresh token is
	// bound to the client_id it was issued to.
	ClientID string
	// RedirectURI is the redirect_uri required at authorize; "" accepts
	// any non-empty one. The token exchange must repeat the authorize
	// request's redirect_uri either way.
	RedirectURI string
	// AccessTTL is the lifetime of an access token (its expires_in); 0
	// means DefaultAccessTTL. An exchange that asks for expires_in gets
	// that instead, as the real server grants long-lived tokens.
	AccessTTL time.Duration
	// CodeTTL is the lifetime of an authorization code; 0 means
	// DefaultCodeTTL.
	CodeTTL time.Duration
	// Now is the server's clock; nil means time.Now. Tests move it to
	// expire codes and tokens. It is called with the server's lock held:
	// it must be safe for concurrent use and must not call the Server.
	Now func() time.Time

	mu        sync.Mutex
	codes     map[string]*authCode
	refresh   map[string]*refreshToken
	access    map[string]*accessToken
	families  []*family // every login, for RevokeAll
	faults    []pendingFault
	reqs      []TokenRequest
	refreshes int
	exchanges int
}

// authCode is an authorization code and the authorize request it answers.
type authCode struct {
	clientID, redirectURI, challenge, state, scope string
	expires                                        time.Time
	used                                           bool
}

// family is one login: the tokens of an exchange and of every refresh
// descended from it. Revoking one token revokes its family, as revoking
// the app's access on the real site logs the whole chain out.
type family struct{ revoked bool }

type refreshToken struct {
	fam      *family
	clientID string
	scope    string // what the login granted; a refresh cannot widen it
	rotated  bool   // already exchanged for a new refresh token
}

type accessToken struct {
	fam     *family
	expires time.Time
}

// Fault is a way a token request fails, injected with InjectFault.
type Fault int

const (
	// FaultNone injects nothing; InjectFault(FaultNone, ...) clears the
	// faults still pending.
	FaultNone Fault = iota
	// FaultStatus answers the given HTTP status (500 if none is given)
	// with an OAuth error body, before looking at the request; with a
	// duration, after waiting that long (or until the client goes away),
	// so that a test can have other requests arrive meanwhile.
	FaultStatus
	// FaultDelay waits the given duration, or until the client goes away,
	// then answers the request normally.
	FaultDelay
	// FaultDrop closes the connection without a byte of answer.
	FaultDrop
	// FaultLateAnswer grants the request first (a refresh token rotates:
	// the old one is dead, the new tokens are issued) and then holds the
	// answer for the given duration, or until the client goes away, which
	// then never gets the new tokens: the server has rotated, the client
	// has lost the answer. Refreshes counts the grant as soon as it is
	// made, so a test can wait for it and then hang up.
	FaultLateAnswer
)

// String names the fault, for test failures.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultStatus:
		return "status"
	case FaultDelay:
		return "delay"
	case FaultDrop:
		return "drop"
	case FaultLateAnswer:
		return "late answer"
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

type pendingFault struct {
	kind   Fault
	status int
	delay  time.Duration
}

// TokenRequest is one recorded request to the token endpoint.
type TokenRequest struct {
	// Grant is the request's grant_type, "" if it had none or could not
	// be read.
	Grant string
	// Status is the HTTP status answered, 0 if none was (a dropped
	// connection, or a client that went away during a delay).
	Status int
	// Time is when the request arrived, by the server's clock (Now).
	Time time.Time
	// Error is the OAuth error code answered ("invalid_grant"), or what
	// happened to a request that got no answer; "" for a success.
	Error string
}

// New returns a server that requires the given client_id and redirect_uri
// ("" accepts any) and otherwise has the defaults.
func New(clientID, redirectURI string) *Server {
	return &Server{ClientID: clientID, RedirectURI: redirectURI}
}

// now reads the clock.
func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// initLocked makes the maps of a zero Server. Callers hold s.mu.
func (s *Server) initLocked() {
	if s.codes == nil {
		s.codes = map[string]*authCode{}
		s.refresh = map[string]*refreshToken{}
		s.access = map[string]*accessToken{}
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case AuthorizePath:
		s.serveAuthorize(w, r)
	case TokenPath:
		s.serveToken(w, r)
	default:
		http.NotFound(w, r)
	}
}

// Authorize plays the person who opens authorizeURL and logs in: it checks
// the URL as the real server does (path ending in /oauth/authorize, a
// known client_id, response_type=code, an accepted redirect_uri, an S256
// code_challenge, a state, no parameter given twice) and returns what the
// page then shows to paste back: "CODE#STATE". The code is single-use and
// expires after CodeTTL. A GET of the URL does the same over HTTP.
func (s *Server) Authorize(authorizeURL string) (string, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return "", fmt.Errorf("authorize URL does not parse: %w", err)
	}
	if !strings.HasSuffix(u.Path, AuthorizePath) {
		return "", fmt.Errorf("authorize URL path is %q, want one ending in %q", u.Path, AuthorizePath)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", fmt.Errorf("authorize URL query does not parse: %w", err)
	}
	return s.authorize(q)
}

// authorize checks an authorize request's parameters and issues a code.
func (s *Server) authorize(q url.Values) (string, error) {
	for k, v := range q {
		if len(v) > 1 {
			// RFC 6749 §3.1: parameters must not be given more than once.
			return "", fmt.Errorf("authorize parameter %s given %d times", k, len(v))
		}
	}
	p := func(k string) string { return q.Get(k) }
	switch {
	case p("client_id") == "":
		return "", errors.New("authorize request has no client_id")
	case s.ClientID != "" && p("client_id") != s.ClientID:
		return "", fmt.Errorf("authorize request's client_id %q is not this server's client", p("client_id"))
	case p("response_type") != "code":
		return "", fmt.Errorf("authorize request's response_type is %q, want \"code\"", p("response_type"))
	case p("redirect_uri") == "":
		return "", errors.New("authorize request has no redirect_uri")
	case s.RedirectURI != "" && p("redirect_uri") != s.RedirectURI:
		return "", fmt.Errorf("authorize request's redirect_uri %q is not registered for the client (want %q)", p("redirect_uri"), s.RedirectURI)
	case p("code_challenge_method") != "S256":
		return "", fmt.Errorf("authorize request's code_challenge_method is %q, want \"S256\"", p("code_challenge_method"))
	case !validChallenge(p("code_challenge")):
		return "", fmt.Errorf("authorize request's code_challenge %q is not a base64url (unpadded) SHA-256 digest", p("code_challenge"))
	case p("state") == "":
		return "", errors.New("authorize request has no state")
	}
	code := randomToken("")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initLocked()
	ttl := s.CodeTTL
	if ttl <= 0 {
		ttl = DefaultCodeTTL
	}
	s.codes[code] = &authCode{
		clientID: p("client_id"), redirectURI: p("redirect_uri"),
		challenge: p("code_challenge"), state: p("state"), scope: p("scope"),
		expires: s.now().Add(ttl),
	}
	return code + "#" + p("state"), nil
}

// validChallenge reports whether c is BASE64URL(SHA256(verifier)) in form:
// 43 characters decoding to 32 bytes (RFC 7636 §4.2).
func validChallenge(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// validVerifier reports whether v is a code_verifier as RFC 7636 §4.1
// has it: 43 to 128 characters of [A-Za-z0-9-._~].
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, c := range []byte(v) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~'
		if !ok {
			return false
		}
	}
	return true
}

// serveAuthorize answers the authorize page: the code to paste back in an
// element with id="code", or the refusal in one with id="error".
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writePage(w, http.StatusMethodNotAllowed, `<p id="error">use GET</p>`)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writePage(w, http.StatusBadRequest, `<p id="error">`+html.EscapeString("query does not parse: "+err.Error())+`</p>`)
		return
	}
	shown, err := s.authorize(q)
	if err != nil {
		writePage(w, http.StatusBadRequest, `<p id="error">`+html.EscapeString(err.Error())+`</p>`)
		return
	}
	writePage(w, http.StatusOK, `<p>Paste this code into Claude Code:</p><code id="code">`+html.EscapeString(shown)+`</code>`)
}

func writePage(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "<!doctype html><html><head><title>Fake OAuth</title></head><body>"+body+"</body></html>\n")
}

// tokenParams are a token request's parameters, from JSON or a form.
type tokenParams struct {
	GrantType    string      `json:"grant_type"`
	Code         string      `json:"code"`
	RedirectURI  string      `json:"redirect_uri"`
	ClientID     string      `json:"client_id"`
	CodeVerifier string      `json:"code_verifier"`
	State        string      `json:"state"`
	RefreshToken string      `json:"refresh_token"`
	Scope        string      `json:"scope"`
	ExpiresIn    json.Number `json:"expires_in"`
}

// tokenResponse is a successful token answer (RFC 6749 §5.1).
type tokenResponse struct {
	TokenType    string `json:"token_type"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
}

// oauthError is a refusal in RFC 6749 §5.2's terms.
type oauthError struct {
	status int
	code   string
	desc   string
}

func (e *oauthError) Error() string { return e.code + ": " + e.desc }

func refuse(code, format string, args ...any) *oauthError {
	status := http.StatusBadRequest
	if code == ErrInvalidClient {
		status = http.StatusUnauthorized
	}
	return &oauthError{status, code, fmt.Sprintf(format, args...)}
}

// parseToken reads a token request's parameters from its body: JSON, as
// Claude Code sends, or a form, as a generic OAuth client would.
func parseToken(contentType string, body []byte) (tokenParams, *oauthError) {
	var p tokenParams
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return p, refuse(ErrInvalidRequest, "Content-Type %q is neither application/json nor application/x-www-form-urlencoded", contentType)
	}
	switch mt {
	case "application/json":
		if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			return p, refuse(ErrInvalidRequest, "request body is not a JSON object")
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return p, refuse(ErrInvalidRequest, "request body is not a JSON object of string parameters: %v", err)
		}
	case "application/x-www-form-urlencoded":
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return p, refuse(ErrInvalidRequest, "request body is not a form: %v", err)
		}
		for k, v := range q {
			if len(v) > 1 {
				return p, refuse(ErrInvalidRequest, "parameter %s given %d times", k, len(v))
			}
		}
		p = tokenParams{
			GrantType: q.Get("grant_type"), Code: q.Get("code"), RedirectURI: q.Get("redirect_uri"),
			ClientID: q.Get("client_id"), CodeVerifier: q.Get("code_verifier"), State: q.Get("state"),
			RefreshToken: q.Get("refresh_token"), Scope: q.Get("scope"), ExpiresIn: json.Number(q.Get("expires_in")),
		}
	default:
		return p, refuse(ErrInvalidRequest, "Content-Type %q is neither application/json nor application/x-www-form-urlencoded", mt)
	}
	return p, nil
}

// serveToken answers the token endpoint and records the request.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rec := TokenRequest{Time: s.now()}
	s.mu.Unlock()
	defer func() { s.record(rec) }()

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rec.Status, rec.Error = writeError(w, &oauthError{http.StatusMethodNotAllowed, ErrInvalidRequest,
			"the token endpoint takes POST, not " + r.Method})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rec.Status, rec.Error = writeError(w, &oauthError{http.StatusRequestEntityTooLarge, ErrInvalidRequest,
				fmt.Sprintf("request body is larger than %d bytes", maxBody)})
			return
		}
		rec.Error = "request body not read: " + err.Error()
		return
	}
	p, perr := parseToken(r.Header.Get("Content-Type"), body)
	rec.Grant = p.GrantType

	f, faulted := s.takeFault()
	if faulted && f.kind != FaultLateAnswer {
		if done := s.fail(w, r, &rec, f); done {
			return
		}
	}
	if perr != nil {
		rec.Status, rec.Error = writeError(w, perr)
		return
	}
	resp, oerr := s.grant(p)
	if oerr != nil {
		rec.Status, rec.Error = writeError(w, oerr)
		return
	}
	if faulted && f.kind == FaultLateAnswer && !wait(r, f.delay) {
		rec.Error = "client went away before the answer: the tokens it was granted are lost"
		return
	}
	rec.Status = writeJSON(w, http.StatusOK, resp)
}

// record appends a finished token request.
func (s *Server) record(rec TokenRequest) {
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
}

// grant decides a parsed token request and, on success, issues tokens.
func (s *Server) grant(p tokenParams) (tokenResponse, *oauthError) {
	if p.GrantType == "" {
		return tokenResponse{}, refuse(ErrInvalidRequest, "grant_type is required")
	}
	// A public client authenticates by its client_id alone (RFC 6749
	// §4.1.3); missing or foreign, the client is not authenticated.
	if p.ClientID == "" {
		return tokenResponse{}, refuse(ErrInvalidClient, "client_id is required")
	}
	if s.ClientID != "" && p.ClientID != s.ClientID {
		return tokenResponse{}, refuse(ErrInvalidClient, "client_id %q is not a client of this server", p.ClientID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initLocked()
	switch p.GrantType {
	case "authorization_code":
		return s.exchangeLocked(p)
	case "refresh_token":
		return s.refreshLocked(p)
	}
	return tokenResponse{}, refuse(ErrUnsupportedGrantType, "grant_type %q is not supported (authorization_code or refresh_token)", p.GrantType)
}

// exchangeLocked answers grant_type=authorization_code. Callers hold s.mu.
// A refused attempt leaves the code usable; a used code stays dead and
// the tokens issued from it stay valid (RFC 6749 §4.1.2 makes revoking
// them optional).
func (s *Server) exchangeLocked(p tokenParams) (tokenResponse, *oauthError) {
	switch {
	case p.Code == "":
		return tokenResponse{}, refuse(ErrInvalidRequest, "code is required")
	case p.RedirectURI == "":
		return tokenResponse{}, refuse(ErrInvalidRequest, "redirect_uri is required")
	case p.CodeVerifier == "":
		return tokenResponse{}, refuse(ErrInvalidRequest, "code_verifier is required")
	case !validVerifier(p.CodeVerifier):
		return tokenResponse{}, refuse(ErrInvalidRequest, "code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~] (RFC 7636 §4.1)")
	}
	ttl := s.AccessTTL
	if p.ExpiresIn != "" {
		n, err := strconv.ParseInt(string(p.ExpiresIn), 10, 64)
		if err != nil || n <= 0 || n > int64(100*365*24*time.Hour/time.Second) {
			return tokenResponse{}, refuse(ErrInvalidRequest, "expires_in %q is not a positive whole number of seconds", p.ExpiresIn)
		}
		ttl = time.Duration(n) * time.Second
	}
	c, ok := s.codes[p.Code]
	switch {
	case !ok && strings.Contains(p.Code, "#"):
		return tokenResponse{}, refuse(ErrInvalidGrant, "unknown authorization code: the pasted \"CODE#STATE\" must be split, the code before '#' and the state after")
	case !ok:
		return tokenResponse{}, refuse(ErrInvalidGrant, "unknown authorization code")
	case c.used:
		return tokenResponse{}, refuse(ErrInvalidGrant, "authorization code was already used")
	case !s.now().Before(c.expires):
		return tokenResponse{}, refuse(ErrInvalidGrant, "code expired")
	case p.ClientID != c.clientID:
		return tokenResponse{}, refuse(ErrInvalidGrant, "authorization code was issued to another client")
	case p.RedirectURI != c.redirectURI:
		return tokenResponse{}, refuse(ErrInvalidGrant, "redirect_uri %q differs from the authorize request's", p.RedirectURI)
	case !verifierMatches(p.CodeVerifier, c.challenge):
		return tokenResponse{}, refuse(ErrInvalidGrant, "code_verifier does not match the code_challenge")
	case p.State != c.state:
		return tokenResponse{}, refuse(ErrInvalidGrant, "state differs from the authorize request's")
	}
	c.used = true
	fam := &family{}
	s.families = append(s.families, fam)
	s.exchanges++
	return s.issueLocked(fam, c.clientID, c.scope, c.scope, ttl), nil
}

// refreshLocked answers grant_type=refresh_token, rotating the refresh
// token. Callers hold s.mu.
func (s *Server) refreshLocked(p tokenParams) (tokenResponse, *oauthError) {
	if p.RefreshToken == "" {
		return tokenResponse{}, refuse(ErrInvalidRequest, "refresh_token is required")
	}
	rt, ok := s.refresh[p.RefreshToken]
	switch {
	case !ok:
		return tokenResponse{}, refuse(ErrInvalidGrant, "unknown refresh token")
	case rt.fam.revoked:
		return tokenResponse{}, refuse(ErrInvalidGrant, "refresh token was revoked")
	case rt.rotated:
		return tokenResponse{}, refuse(ErrInvalidGrant, "refresh token was already used: refresh tokens rotate, use the one from the latest answer")
	case p.ClientID != rt.clientID:
		return tokenResponse{}, refuse(ErrInvalidGrant, "refresh token was issued to another client")
	}
	// RFC 6749 §6: a refresh may narrow the scope, never widen it.
	scope := rt.scope
	if p.Scope != "" {
		granted := strings.Fields(rt.scope)
		for _, want := range strings.Fields(p.Scope) {
			if !contains(granted, want) {
				return tokenResponse{}, refuse(ErrInvalidScope, "scope %q was not granted at login (granted: %q)", want, rt.scope)
			}
		}
		scope = strings.Join(strings.Fields(p.Scope), " ")
	}
	rt.rotated = true
	s.refreshes++
	return s.issueLocked(rt.fam, rt.clientID, rt.scope, scope, s.AccessTTL), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// verifierMatches reports whether BASE64URL(SHA256(verifier)) is challenge.
func verifierMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// issueLocked makes a new access and refresh token in fam. The refresh
// token keeps the login's scope; the access token has accessScope. A ttl
// of 0 means DefaultAccessTTL. Callers hold s.mu.
func (s *Server) issueLocked(fam *family, clientID, grantedScope, accessScope string, ttl time.Duration) tokenResponse {
	if ttl <= 0 {
		ttl = DefaultAccessTTL
	}
	at, rt := randomToken(AccessPrefix), randomToken(RefreshPrefix)
	s.access[at] = &accessToken{fam: fam, expires: s.now().Add(ttl)}
	s.refresh[rt] = &refreshToken{fam: fam, clientID: clientID, scope: grantedScope}
	return tokenResponse{
		TokenType: "Bearer", AccessToken: at, RefreshToken: rt,
		ExpiresIn: int64(ttl / time.Second), Scope: accessScope,
	}
}

// randomToken returns prefix and 32 random bytes in base64url: no '#',
// so a code splits cleanly from its state.
func randomToken(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Validate reports whether access is a token this server issued and has
// not revoked (known), and whether it has expired by the server's clock
// (expired). An unknown or revoked token is (false, false). An access
// token stays valid until it expires when its refresh token rotates.
func (s *Server) Validate(access string) (known, expired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.access[access]
	if !ok || at.fam.revoked {
		return false, false
	}
	return true, !s.now().Before(at.expires)
}

// Revoke revokes the login refresh belongs to, as revoking the app's
// access on the real site does: refresh and every refresh and access
// token of the same chain of refreshes are dead from then on (the next
// refresh gets invalid_grant; Validate says unknown). Revoking an unknown
// or revoked token does nothing.
func (s *Server) Revoke(refresh string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt, ok := s.refresh[refresh]; ok {
		rt.fam.revoked = true
	}
}

// RevokeAll revokes every login so far, as Revoke does each. Codes not
// yet exchanged, and logins after the call, are not affected.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.families {
		f.revoked = true
	}
}

// InjectFault makes the next n token requests fail with kind: status is
// FaultStatus' HTTP status (500 if it is not an error status), d is
// the wait of FaultDelay, FaultLateAnswer and FaultStatus. Faults queue in
// order behind those still pending; n <= 0 adds none. InjectFault(FaultNone,
// ...) instead clears the queue. A faulted request is recorded, and does not
// consume a code or token, but for FaultLateAnswer, which does.
func (s *Server) InjectFault(kind Fault, n int, status int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == FaultNone {
		s.faults = nil
		return
	}
	if kind == FaultStatus && (status < 400 || status > 599) {
		status = http.StatusInternalServerError
	}
	for i := 0; i < n; i++ {
		s.faults = append(s.faults, pendingFault{kind, status, d})
	}
}

// takeFault pops the next injected fault, if any.
func (s *Server) takeFault() (pendingFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return pendingFault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

// fail applies fault f to a token request; it reports whether the request
// is finished (false: answer it normally).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, rec *TokenRequest, f pendingFault) bool {
	switch f.kind {
	case FaultStatus:
		if !wait(r, f.delay) {
			rec.Error = "client went away during the injected delay"
			return true
		}
		code := ErrServerError
		if f.status == http.StatusServiceUnavailable {
			code = ErrTemporarily
		}
		rec.Status, rec.Error = writeError(w, &oauthError{f.status, code, fmt.Sprintf("injected fault: HTTP %d", f.status)})
		return true
	case FaultDelay:
		if !wait(r, f.delay) {
			rec.Error = "client went away during the injected delay"
			return true
		}
		return false
	case FaultDrop:
		rec.Error = "connection dropped (injected fault)"
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// HTTP/2 cannot hijack; aborting the handler resets the
			// stream without an answer. The deferred record still runs.
			panic(http.ErrAbortHandler)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // an RST, not a FIN
		}
		c.Close()
		return true
	}
	return false
}

// wait waits d, or until r's client goes away; it reports whether the
// client is still there.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// Refreshes returns how many refresh_token requests were granted tokens
// (whether or not the client got the answer: see FaultLateAnswer).
func (s *Server) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// Exchanges returns how many authorization_code requests were answered
// with tokens.
func (s *Server) Exchanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exchanges
}

// Requests returns a copy of the token requests finished so far, in the
// order they finished.
func (s *Server) Requests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TokenRequest(nil), s.reqs...)
}

// writeError writes e as RFC 6749 §5.2 has it and returns the status and
// error code, for the record.
func writeError(w http.ResponseWriter, e *oauthError) (int, string) {
	return writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc}), e.code
}

// writeJSON writes v with the no-store headers RFC 6749 §5.1 requires of
// token answers, and returns status.
func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, _ := json.Marshal(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status
}
