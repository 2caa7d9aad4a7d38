package web

// login.go: the logins of the page by one-time URL (login, logout), the
// login a passkey or a URL becomes (issue), and the page over TLS.

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/people"
)

// SetTLS says the page is served over TLS with cfg: its cookies are then
// Secure, and its previews are served over TLS with the same certificate
// (it names hosts, not ports), by the name the browser uses for the page.
func (s *Server) SetTLS(cfg *tls.Config) {
	s.secure = true
	s.pv.mu.Lock()
	s.pv.tls = cfg
	s.pv.mu.Unlock()
}

// grant is a login token's or a cookie's user and expiry; a cookie's also
// holds the hash of the key issued with it.
type grant struct {
	uid uint32
	exp time.Time
	key [32]byte
}

// login trades a login token, once, for a login: the cookie, and the
// page's key in the answer's body; the login is in the audit log (the
// URL's making is too, by the Runner). The answer is the page itself (its
// index.html, the key in a meta tag the page's script takes into its
// origin's storage), not a redirect: the key is in no URL, and the answer
// is neither cached (no-store) nor readable by another origin.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	h := sha256.Sum256([]byte(r.URL.Query().Get("token")))
	s.mu.Lock()
	g, ok := s.logins[h]
	delete(s.logins, h) // one exchange, good or late
	s.mu.Unlock()
	if !ok || s.now().After(g.exp) {
		http.Error(w, "paddock: this login URL is unknown, used or expired (each is good once, for 10 minutes); run `paddock web` for a new one", http.StatusUnauthorized)
		return
	}
	p, err := s.who(g.uid) // the person now: one taken out of the group meanwhile is refused
	if err != nil {
		s.audit(people.Person{UID: g.uid}, "url", "refused", err)
		http.Error(w, "paddock: "+err.Error(), http.StatusForbidden)
		return
	}
	page, err := static.ReadFile("static/index.html")
	if err != nil || !strings.Contains(string(page), keyMeta) {
		http.Error(w, "paddock: the page has no place for its key", http.StatusInternalServerError)
		return
	}
	k, err := s.issue(w, g.uid)
	if err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	s.audit(p, "url", "used", nil)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// k is base64url: nothing in it needs escaping in an attribute.
	_, _ = io.WriteString(w, strings.Replace(string(page), keyMeta, `<meta name="paddock-key" content="`+k+`">`, 1))
}

// issue makes a login for uid: the cookie, set on w, and the page's key,
// returned (only their hashes are kept).
func (s *Server) issue(w http.ResponseWriter, uid uint32) (key string, err error) {
	c, err := randomString()
	if err != nil {
		return "", err
	}
	k, err := randomString()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.cookies[sha256.Sum256([]byte(c))] = grant{uid: uid, exp: s.now().Add(CookieTTL), key: sha256.Sum256([]byte(k))}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: c, Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode, MaxAge: int(CookieTTL / time.Second)})
	return k, nil
}

// logout ends the cookie's login, here and in the browser.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.mu.Lock()
		delete(s.cookies, sha256.Sum256([]byte(c.Value)))
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, `{"logged_out":true}`)
}
