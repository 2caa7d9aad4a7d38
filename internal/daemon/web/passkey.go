package web

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/faillimit"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// Passkeys (WebAuthn) log people in from any machine that reaches the page,
// without the one-time URL printed on the Runner's host:
//
//   - `paddock web enroll [USER]` (the socket: a person for themselves, an
//     admin for anyone) mints a one-time enrolment link, good once for
//     EnrollTTL, bound to that person; opening it makes a passkey for them
//     (a discoverable credential, user verification preferred) and logs
//     them in.
//   - /passkey logs in with one: a discoverable login, the person found by
//     the passkey's user handle (random, 32 bytes, per person), checked
//     afresh (one taken out of the Runner's group is refused).
//
// Either ends in the same login as a one-time URL's: the cookie and the
// page's key. The store keeps each person's user handle and their
// credentials' public keys and sign counts (bucket passkeys), never a
// secret. Ceremonies in flight are in memory, bounded, and expire; failed
// logins are limited per address (maxPasskeyFailures a minute); every
// enrolment and every passkey login, good or refused, is told to the
// Backend's audit (WebAuditor).

// EnrollTTL is how long an enrolment link is good.
const EnrollTTL = 15 * time.Minute

// Bounds on ceremonies.
const (
	ceremonyTTL        = 5 * time.Minute
	maxCeremonies      = 1000
	maxPasskeyFailures = 10
	maxPasskeysPerUser = 20
)

// bucketPasskeys holds each person's passkeys, by uid.
const bucketPasskeys = "passkeys"

// WebAuditor is the Backend's optional audit of logins to the page.
type WebAuditor interface {
	// RecordWebLogin records that p logged in (or was refused, err) by how
	// ("passkey", "enroll", or "url": a one-time login URL used).
	RecordWebLogin(p people.Person, how, detail string, err error)
}

// PasskeyConfig is where passkeys work: the relying party's id (a host
// name: the page's, or localhost) and the page's origins.
type PasskeyConfig struct {
	RPID    string
	Origins []string
}

type passkeys struct {
	wa *webauthn.WebAuthn
	st store.Store

	mu      sync.Mutex
	enrolls map[[32]byte]enrollGrant
	logins  map[string]loginCeremony
	fails   *faillimit.Limiter
}

type enrollGrant struct {
	uid     uint32
	exp     time.Time
	session *webauthn.SessionData
}

type loginCeremony struct {
	session webauthn.SessionData
	exp     time.Time
}

// passkeyUser is a person as WebAuthn sees them, and what is stored.
type passkeyUser struct {
	UID         uint32                `json:"uid"`
	Handle      []byte                `json:"handle"`
	Credentials []webauthn.Credential `json:"credentials"`
	name        string
}

func (u *passkeyUser) WebAuthnID() []byte                         { return u.Handle }
func (u *passkeyUser) WebAuthnName() string                       { return u.name }
func (u *passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.Credentials }

// EnablePasskeys turns passkeys on, with st keeping them.
func (s *Server) EnablePasskeys(c PasskeyConfig, st store.Store) error {
	wa, err := webauthn.New(&webauthn.Config{RPID: c.RPID, RPDisplayName: "paddock", RPOrigins: c.Origins})
	if err != nil {
		return fmt.Errorf("passkeys for %s: %w", c.RPID, err)
	}
	s.pk = &passkeys{wa: wa, st: st, enrolls: map[[32]byte]enrollGrant{}, logins: map[string]loginCeremony{}, fails: faillimit.New(maxPasskeyFailures, time.Minute, maxCeremonies)}
	return nil
}

// NewEnrollment mints a one-time enrolment token for uid (EnrollTTL, once).
func (s *Server) NewEnrollment(uid uint32) (secret.Value, error) {
	if s.pk == nil {
		return secret.Value{}, fmt.Errorf("passkeys need the page on a host name over TLS, or on localhost: set web.hosts (and web.tls): %w", errdefs.ErrUnavailable)
	}
	v, err := randomString()
	if err != nil {
		return secret.Value{}, err
	}
	s.pk.mu.Lock()
	defer s.pk.mu.Unlock()
	now := s.now()
	for h, g := range s.pk.enrolls {
		if now.After(g.exp) {
			delete(s.pk.enrolls, h)
		}
	}
	if len(s.pk.enrolls) >= maxCeremonies {
		return secret.Value{}, fmt.Errorf("%d enrolment links are open, the most kept: %w", maxCeremonies, errdefs.ErrLimit)
	}
	s.pk.enrolls[sha256.Sum256([]byte(v))] = enrollGrant{uid: uid, exp: now.Add(EnrollTTL)}
	return secret.New(v), nil
}

func (s *Server) passkeyRoutes(mux *http.ServeMux) {
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := static.ReadFile("static/" + name)
			if err != nil {
				http.Error(w, "paddock: no page", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
		}
	}
	// The login and enrolment pages and their script are the same public
	// bytes for everyone: served without a login.
	mux.HandleFunc("GET /passkey", page("passkey.html"))
	mux.HandleFunc("GET /enroll", page("passkey.html"))
	mux.HandleFunc("GET /passkey.js", page("passkey.js"))
	mux.HandleFunc("GET /app.css", page("app.css"))
	mux.HandleFunc("POST /passkey/enroll/begin", s.enrollBegin)
	mux.HandleFunc("POST /passkey/enroll/finish", s.enrollFinish)
	mux.HandleFunc("POST /passkey/login/begin", s.loginBegin)
	mux.HandleFunc("POST /passkey/login/finish", s.loginFinish)
}

func pkError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func pkJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// ceremonyOK refuses a ceremony request that is not the page's own: a
// state change from another origin, or without X-Paddock: 1, or from an
// address over its failures.
func (s *Server) ceremonyOK(w http.ResponseWriter, r *http.Request) bool {
	if s.pk == nil {
		pkError(w, http.StatusServiceUnavailable, "passkeys are off on this Runner: the page needs a host name (web.hosts) over TLS, or localhost")
		return false
	}
	if r.Header.Get("X-Paddock") != "1" || !sameOrigin(r) {
		pkError(w, http.StatusForbidden, "passkey requests come from this page only")
		return false
	}
	if s.pk.fails.Blocked(remoteIP(r), s.now()) {
		w.Header().Set("Retry-After", "60")
		pkError(w, http.StatusTooManyRequests, "too many failed logins from this address; wait a minute")
		return false
	}
	return true
}

func remoteIP(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// user is uid's stored passkeys (a new handle if they have none).
func (p *passkeys) user(uid uint32, name string) (*passkeyUser, error) {
	b, err := p.st.Get(bucketPasskeys, strconv.FormatUint(uint64(uid), 10))
	u := &passkeyUser{UID: uid, name: name}
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		u.Handle = make([]byte, 32)
		if _, err := rand.Read(u.Handle); err != nil {
			return nil, err
		}
		return u, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, u); err != nil || len(u.Handle) == 0 {
		return nil, fmt.Errorf("the passkeys of uid %d are unreadable: %w", uid, errdefs.ErrUnavailable)
	}
	u.name = name
	return u, nil
}

func (p *passkeys) save(u *passkeyUser) error {
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return p.st.Put(bucketPasskeys, strconv.FormatUint(uint64(u.UID), 10), b)
}

// byHandle finds the person whose user handle this is.
func (p *passkeys) byHandle(handle []byte) (*passkeyUser, error) {
	kvs, err := p.st.List(bucketPasskeys)
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		var u passkeyUser
		if json.Unmarshal(kv.Value, &u) == nil && len(u.Handle) > 0 && bytes.Equal(u.Handle, handle) {
			return &u, nil
		}
	}
	return nil, fmt.Errorf("no person has this passkey: %w", errdefs.ErrNotFound)
}

type enrollRequest struct {
	Token string `json:"token"`
}

func (s *Server) enrollBegin(w http.ResponseWriter, r *http.Request) {
	if !s.ceremonyOK(w, r) {
		return
	}
	var req enrollRequest
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req) != nil {
		pkError(w, http.StatusBadRequest, "the request is not the page's")
		return
	}
	h := sha256.Sum256([]byte(req.Token))
	s.pk.mu.Lock()
	g, ok := s.pk.enrolls[h]
	s.pk.mu.Unlock()
	if !ok || s.now().After(g.exp) {
		s.pk.fails.Fail(remoteIP(r), s.now())
		pkError(w, http.StatusUnauthorized, "this enrolment link is unknown, used or expired (each is good once, for 15 minutes); ask for a new one: paddock web enroll")
		return
	}
	p, u, ok := s.enrollee(w, g.uid)
	if !ok {
		return
	}
	if len(u.Credentials) == 0 {
		if err := s.pk.save(u); err != nil { // a new person's handle, the one finish reads
			pkError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	if len(u.Credentials) >= maxPasskeysPerUser {
		pkError(w, http.StatusTooManyRequests, fmt.Sprintf("%s has %d passkeys, the most kept", p.Name, len(u.Credentials)))
		return
	}
	var exclude []protocol.CredentialDescriptor
	for i := range u.Credentials {
		exclude = append(exclude, u.Credentials[i].Descriptor())
	}
	opts, session, err := s.pk.wa.BeginRegistration(u, webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired), webauthn.WithExclusions(exclude))
	if err != nil {
		pkError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.pk.mu.Lock()
	if cur, ok := s.pk.enrolls[h]; ok {
		cur.session = session
		s.pk.enrolls[h] = cur
	}
	s.pk.mu.Unlock()
	pkJSON(w, map[string]any{"options": opts, "user": p.Name})
}

func (s *Server) enrollFinish(w http.ResponseWriter, r *http.Request) {
	if !s.ceremonyOK(w, r) {
		return
	}
	h := sha256.Sum256([]byte(r.URL.Query().Get("token")))
	s.pk.mu.Lock()
	g, ok := s.pk.enrolls[h]
	delete(s.pk.enrolls, h) // one try, good or not
	s.pk.mu.Unlock()
	if !ok || g.session == nil || s.now().After(g.exp) {
		s.pk.fails.Fail(remoteIP(r), s.now())
		pkError(w, http.StatusUnauthorized, "this enrolment link is unknown, used or expired; ask for a new one: paddock web enroll")
		return
	}
	p, u, ok := s.enrollee(w, g.uid)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	cred, err := s.pk.wa.FinishRegistration(u, *g.session, r)
	if err != nil {
		s.audit(p, "enroll", "", err)
		pkError(w, http.StatusBadRequest, "the passkey was not made: "+errText(err))
		return
	}
	u.Credentials = append(u.Credentials, *cred)
	if err := s.pk.save(u); err != nil {
		pkError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.audit(p, "enroll", fmt.Sprintf("passkey %d of %d", len(u.Credentials), len(u.Credentials)), nil)
	s.startLogin(w, g.uid)
}

// enrollee is the person an enrolment is for, checked afresh, and their
// passkeys; false when it answered w with why not.
func (s *Server) enrollee(w http.ResponseWriter, uid uint32) (people.Person, *passkeyUser, bool) {
	p, err := s.who(uid)
	if err != nil {
		pkError(w, http.StatusForbidden, err.Error())
		return p, nil, false
	}
	u, err := s.pk.user(uid, p.Name)
	if err != nil {
		pkError(w, http.StatusServiceUnavailable, err.Error())
		return p, nil, false
	}
	return p, u, true
}

func (s *Server) loginBegin(w http.ResponseWriter, r *http.Request) {
	if !s.ceremonyOK(w, r) {
		return
	}
	opts, session, err := s.pk.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationPreferred))
	if err != nil {
		pkError(w, http.StatusInternalServerError, err.Error())
		return
	}
	id, err := randomString()
	if err != nil {
		pkError(w, http.StatusInternalServerError, "no randomness")
		return
	}
	s.pk.mu.Lock()
	now := s.now()
	for k, c := range s.pk.logins {
		if now.After(c.exp) {
			delete(s.pk.logins, k)
		}
	}
	if len(s.pk.logins) >= maxCeremonies {
		s.pk.mu.Unlock()
		pkError(w, http.StatusTooManyRequests, "too many logins in progress; try again in a minute")
		return
	}
	s.pk.logins[id] = loginCeremony{session: *session, exp: now.Add(ceremonyTTL)}
	s.pk.mu.Unlock()
	pkJSON(w, map[string]any{"id": id, "options": opts})
}

func (s *Server) loginFinish(w http.ResponseWriter, r *http.Request) {
	if !s.ceremonyOK(w, r) {
		return
	}
	id := r.URL.Query().Get("id")
	s.pk.mu.Lock()
	c, ok := s.pk.logins[id]
	delete(s.pk.logins, id)
	s.pk.mu.Unlock()
	if !ok || s.now().After(c.exp) {
		s.pk.fails.Fail(remoteIP(r), s.now())
		pkError(w, http.StatusUnauthorized, "this login took too long or was already used; try again")
		return
	}
	var found *passkeyUser
	handler := func(_, handle []byte) (webauthn.User, error) {
		u, err := s.pk.byHandle(handle)
		if err != nil {
			return nil, err
		}
		found = u
		return u, nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_, cred, err := s.pk.wa.FinishPasskeyLogin(handler, c.session, r)
	if err != nil || found == nil {
		s.pk.fails.Fail(remoteIP(r), s.now())
		if found != nil {
			if p, werr := s.who(found.UID); werr == nil {
				s.audit(p, "passkey", "", err)
			}
		}
		pkError(w, http.StatusUnauthorized, "the passkey was not accepted: "+errText(err))
		return
	}
	p, err := s.who(found.UID)
	if err != nil {
		pkError(w, http.StatusForbidden, "paddock: "+err.Error())
		return
	}
	for i := range found.Credentials {
		if bytes.Equal(found.Credentials[i].ID, cred.ID) {
			found.Credentials[i].Authenticator.SignCount = cred.Authenticator.SignCount
		}
	}
	_ = s.pk.save(found)
	cid := base64.RawURLEncoding.EncodeToString(cred.ID)
	s.audit(p, "passkey", "credential "+cid[:min(12, len(cid))], nil)
	s.startLogin(w, found.UID)
}

// startLogin issues a login to uid as an answer to the page's script:
// the cookie, and the page's key in the JSON body.
func (s *Server) startLogin(w http.ResponseWriter, uid uint32) {
	k, err := s.issue(w, uid)
	if err != nil {
		pkError(w, http.StatusInternalServerError, "no randomness")
		return
	}
	pkJSON(w, map[string]string{"key": k})
}

func (s *Server) audit(p people.Person, how, detail string, err error) {
	if a, ok := s.b.(WebAuditor); ok {
		a.RecordWebLogin(p, how, detail, err)
	}
}

// errText is a ceremony error's words, with the library's details.
func errText(err error) string {
	if err == nil {
		return "no person has it"
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.DevInfo != "" {
		return pe.Details + ": " + pe.DevInfo
	}
	return err.Error()
}
