// Package web is the Runner's web page: a list of sessions (create, sleep,
// wake, remove), and a session page with a live terminal (xterm.js over a
// WebSocket joined to the session's terminal mirror as a driver or an
// observer) and the session's proxy and egress decisions.
//
// It is served on loopback only. Nothing is served without a login:
// `paddock web` asks the Runner, over its socket, for a URL with a one-time
// login token bound to the calling user (NewLogin: good once, for
// LoginTTL; only its hash is kept, and it is never printed by the Runner
// nor written to a file). Opening it makes a login of two halves, bound
// together, good for CookieTTL, until POST /logout:
//
//   - an HttpOnly, SameSite=Strict cookie, and
//   - the page's key, in the login's answer only (the page itself, with the
//     key in a meta tag), which the page keeps in its origin's
//     localStorage and sends on every API request (KeyHeader) and every
//     terminal socket (a Sec-WebSocket-Protocol entry, see keyProtocol).
//
// The cookie alone is nothing: cookies are not scoped by port, so the
// browser sends this one to every page on 127.0.0.1, whatever its port,
// and any local user who runs one can replay it with any header and any
// Origin. The key is held by this page's origin alone (scheme, host and
// port: another port can neither read this origin's storage nor its
// answers), and is checked, in constant time, against the one issued with
// that very cookie. Only the static files (the same public bytes for
// everyone, no data) are served for the cookie alone.
//
// A login is that user's: every request through it is made as them
// (people.With), checked afresh (a user taken out of the Runner's group is
// refused at once), and the Backend (the access Guard) shows and allows
// only what their roles do. Requests that change anything must also carry
// X-Paddock: 1 (a header no cross-site form can send), and WebSocket
// upgrades must come from the page's own origin, checked before the
// terminal is joined. CheckHost, around the whole site, refuses a Host
// that is not the listener's own (DNS rebinding).
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

//go:embed static
var static embed.FS

// Backend is what the page needs from the Runner.
type Backend interface {
	Sessions(ctx context.Context) ([]session.Session, error)
	Session(ctx context.Context, ref string) (session.Session, error)
	CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error)
	Sleep(ctx context.Context, ref string) (session.Session, error)
	Wake(ctx context.Context, ref string) (session.Session, error)
	RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error)
	Logs(ctx context.Context, ref string, n int) ([]decisionlog.Entry, error)
	Attach(ctx context.Context, ref string, req api.AttachRequest) (api.Participant, error)
}

// CookieName is the login cookie.
const CookieName = "paddock_web"

// KeyHeader carries the page's key, the login's other half, on every API
// request; the cookie without it is refused with 401.
const KeyHeader = "X-Paddock-Key"

// The terminal socket's subprotocols. A browser's WebSocket can set no
// header but Sec-WebSocket-Protocol, so the page offers two:
// wsProtocol, which the server picks (it never echoes the other), and
// keyProtocol followed by the key (base64url: every character is legal
// in a subprotocol token). That is checked with the cookie in the
// handshake itself, before the terminal is joined, so a refused socket
// never joins; it is a header, so the key is not in a URL (no history, no
// access log); and it needs no message protocol of its own, as a key in
// the first message would (a socket accepted before it is checked).
const (
	wsProtocol  = "paddock"
	keyProtocol = "paddock.key."
)

// keyMeta is where the login's page carries the key (empty in the static
// index.html).
const keyMeta = `<meta name="paddock-key" content="">`

// Lifetimes: a login token is good once within LoginTTL; the cookie it
// becomes is good for CookieTTL, or until logout.
const (
	LoginTTL  = 10 * time.Minute
	CookieTTL = 24 * time.Hour
)

// Server serves the page.
type Server struct {
	b   Backend
	who func(uid uint32) (people.Person, error)
	log *slog.Logger
	now func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	logins  map[[32]byte]grant // hashes of unused login tokens
	cookies map[[32]byte]grant // hashes of issued cookies, with their keys'

	pv previews // preview.go

	// secure: the page is served over TLS, so its cookies are Secure.
	secure bool
	// pk is the passkeys, when EnablePasskeys turned them on (passkey.go).
	pk *passkeys
	// recheck is how often an event stream checks its login again
	// (api.Recheck; tests shorten it).
	recheck time.Duration
}

// New makes a server with no login yet (NewLogin makes one); who turns a
// login's uid into the person each request is made as, or refuses them.
func New(b Backend, who func(uid uint32) (people.Person, error), log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{b: b, who: who, log: log, now: time.Now, logins: map[[32]byte]grant{}, cookies: map[[32]byte]grant{},
		pv: previews{tickets: map[[32]byte]previewGrant{}, cookies: map[[32]byte]previewGrant{}}}
}

// NewLogin mints a one-time login token for uid: the first GET
// /login?token= with it within LoginTTL gets a cookie bound to uid, and it
// is dead after. Only its hash is kept.
func (s *Server) NewLogin(uid uint32) (secret.Value, error) {
	v, err := randomString()
	if err != nil {
		return secret.Value{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for h, g := range s.logins { // forget the expired ones
		if now.After(g.exp) {
			delete(s.logins, h)
		}
	}
	s.logins[sha256.Sum256([]byte(v))] = grant{uid: uid, exp: now.Add(LoginTTL)}
	return secret.New(v), nil
}

func randomString() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Handler is the whole site.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	mux.HandleFunc("GET /login", s.login)
	s.passkeyRoutes(mux)
	mux.Handle("POST /logout", s.auth(http.HandlerFunc(s.logout)))
	mux.Handle("GET /", s.files(files))
	mux.Handle("GET /api/sessions", s.auth(s.jsonHandler(s.list)))
	mux.Handle("GET /api/whoami", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		p, _ := people.From(r.Context())
		return p, nil
	})))
	mux.Handle("GET /api/sessions/{ref}", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return s.b.Session(r.Context(), r.PathValue("ref")) })))
	mux.Handle("POST /api/sessions", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		var req api.CreateRequest
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&req); err != nil {
			return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
		}
		return s.b.CreateSession(r.Context(), req)
	})))
	mux.Handle("POST /api/sessions/{ref}/sleep", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return s.b.Sleep(r.Context(), r.PathValue("ref")) })))
	if fz, ok := s.b.(api.Freezer); ok {
		mux.Handle("POST /api/sessions/{ref}/freeze", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return fz.Freeze(r.Context(), r.PathValue("ref")) })))
	}
	mux.Handle("POST /api/sessions/{ref}/wake", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return s.b.Wake(r.Context(), r.PathValue("ref")) })))
	mux.Handle("DELETE /api/sessions/{ref}", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		return s.b.RemoveSession(r.Context(), r.PathValue("ref"), false)
	})))
	mux.Handle("GET /api/sessions/{ref}/logs", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		es, err := s.b.Logs(r.Context(), r.PathValue("ref"), 200)
		if es == nil {
			es = []decisionlog.Entry{}
		}
		return es, err
	})))
	mux.Handle("GET /api/sessions/{ref}/terminal", s.auth(http.HandlerFunc(s.terminal)))
	mux.Handle("POST /api/sessions/{ref}/preview/{port}", s.auth(s.jsonHandler(s.previewLink)))
	if es, ok := s.b.(api.EgressSteering); ok {
		// Ask mode: the connections waiting for approval, and the answer.
		mux.Handle("GET /api/egress/pending", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return es.EgressPending(r.Context()) })))
		mux.Handle("POST /api/sessions/{ref}/egress/approve", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			var req api.ApproveRequest
			if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4<<10)).Decode(&req); err != nil {
				return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
			}
			return es.ApproveEgress(r.Context(), r.PathValue("ref"), req)
		})))
	}
	s.usageRoutes(mux)  // usage.go
	s.reviewRoutes(mux) // review.go
	s.liveRoutes(mux)   // live.go
	if l, ok := s.b.(api.Loginer); ok {
		// paddock's own login: its state for everyone (it says why sessions
		// may fail), logging in for admins (the Guard decides).
		mux.Handle("GET /api/login", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return l.LoginStatus(r.Context()) })))
		mux.Handle("POST /api/login", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			u, err := l.StartLogin(r.Context())
			return api.LoginStart{URL: u}, err
		})))
		mux.Handle("POST /api/login/finish", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
			var req struct {
				Code string `json:"code"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 8<<10)).Decode(&req); err != nil {
				return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
			}
			return l.FinishLogin(r.Context(), req.Code)
		})))
	}
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// valid returns the uid of the request's cookie, if it is a live one, and
// whether the request also carries the key issued with that cookie.
func (s *Server) valid(r *http.Request) (uid uint32, cookie, key bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return 0, false, false
	}
	h := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	g, ok := s.cookies[h]
	if ok && s.now().After(g.exp) {
		delete(s.cookies, h)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return 0, false, false
	}
	k, has := keyOf(r)
	kh := sha256.Sum256([]byte(k))
	return g.uid, true, has && subtle.ConstantTimeCompare(kh[:], g.key[:]) == 1
}

// keyOf is the page's key a request carries: the KeyHeader, or else a
// Sec-WebSocket-Protocol entry keyProtocol+key (all a browser's
// WebSocket can send).
func keyOf(r *http.Request) (string, bool) {
	if k := r.Header.Get(KeyHeader); k != "" {
		return k, true
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(p), keyProtocol); ok && k != "" {
				return k, true
			}
		}
	}
	return "", false
}

func notLoggedIn(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintln(w, "paddock: not logged in. Log in with a passkey at /passkey (paddock web enroll makes a link for one), or run `paddock web` on the Runner's host and open the one-time URL it prints.")
}

// files lets the static files through for a live cookie alone: they are
// the same public bytes for everyone and hold no data, and a browser
// loading a page or its scripts can send no header of its own.
func (s *Server) files(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, cookie, _ := s.valid(r); !cookie {
			notLoggedIn(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// auth lets through the page's own requests only: a live cookie with the
// key issued with it (the cookie alone is nothing: any page on another
// loopback port is sent it). Each request is made as the login's user
// (resolved afresh: one taken out of the group is refused), and changes
// need X-Paddock: 1 as well.
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, cookie, key := s.valid(r)
		if !cookie {
			notLoggedIn(w)
			return
		}
		if !key {
			http.Error(w, "paddock: the login cookie came without the page's key issued with it ("+KeyHeader+"), and the cookie alone is nothing: "+
				"a browser sends it to every page on this host, whatever its port. Run `paddock web` for a new login.", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("X-Paddock") != "1" {
			http.Error(w, "paddock: changes need the X-Paddock: 1 header (cross-site requests are refused)", http.StatusForbidden)
			return
		}
		p, err := s.who(uid)
		if err != nil {
			http.Error(w, "paddock: "+err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(people.With(r.Context(), p)))
	})
}

func (s *Server) jsonHandler(f func(r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(statusOf(err))
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	})
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errdefs.ErrLimit):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// Row is one line of the session list.
type Row struct {
	session.Session
	// TokensUsed sums input and output tokens the proxy saw.
	TokensUsed int64 `json:"tokens_used"`
	// NeedsYou is what the session needs of a person (NeedsApproval,
	// NeedsAnswer, NeedsRestart), "" for nothing; Pending counts its
	// connections waiting for approval, the oldest since PendingSince.
	NeedsYou     string    `json:"needs_you,omitempty"`
	Pending      int       `json:"pending,omitempty"`
	PendingSince time.Time `json:"pending_since,omitzero"`
}

// allUsers is the Backend's optional list of every person's sessions.
type allUsers interface {
	AllSessions(ctx context.Context) ([]session.Session, error)
}

func (s *Server) list(r *http.Request) (any, error) {
	var ss []session.Session
	var err error
	if au, ok := s.b.(allUsers); ok && r.URL.Query().Get("all_users") == "1" {
		ss, err = au.AllSessions(r.Context())
	} else {
		ss, err = s.b.Sessions(r.Context())
	}
	if err != nil {
		return nil, err
	}
	pending := s.pendingBySession(r)
	rows := []Row{}
	for _, x := range ss {
		if !x.Live() {
			continue
		}
		pc := pending[x.ID]
		row := Row{Session: x, Pending: pc.n, PendingSince: pc.since}
		row.NeedsYou = needsYou(row, pc.n)
		if es, err := s.b.Logs(r.Context(), x.ID, 0); err == nil {
			for _, e := range es {
				row.TokensUsed += e.InputTokens + e.OutputTokens
			}
		}
		rows = append(rows, row)
	}
	sortByNeed(rows)
	return rows, nil
}

// termMsg is what the page sends on the terminal socket.
type termMsg struct {
	Type string `json:"t"` // "i" input, "r" resize
	Data string `json:"d,omitempty"`
	Rows int    `json:"rows,omitempty"`
	Cols int    `json:"cols,omitempty"`
}

// terminal joins the mirror: binary messages out, JSON messages in.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	role := r.URL.Query().Get("role")
	rows, _ := strconv.Atoi(r.URL.Query().Get("rows"))
	cols, _ := strconv.Atoi(r.URL.Query().Get("cols"))
	// Another origin is refused before anyone joins the terminal.
	if !sameOrigin(r) {
		http.Error(w, "paddock: the terminal is for this page's own origin", http.StatusForbidden)
		return
	}
	// The participant outlives the request: a context of its own, as the
	// same person.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if who, ok := people.From(r.Context()); ok {
		ctx = people.With(ctx, who)
	}
	p, err := s.b.Attach(ctx, r.PathValue("ref"), api.AttachRequest{Role: role, Rows: uint16(rows), Cols: uint16(cols)})
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	defer p.Leave()
	// Accept checks the Origin again, as it always does, and answers with
	// wsProtocol, never the key's entry.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	go func() {
		defer cancel()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var m termMsg
			if json.Unmarshal(data, &m) != nil {
				continue
			}
			switch m.Type {
			case "i":
				_ = p.Send(ctx, []byte(m.Data)) // refused for an observer
			case "r":
				if m.Rows > 0 && m.Cols > 0 && m.Rows < 1000 && m.Cols < 1000 {
					_ = p.Resize(ctx, m.Rows, m.Cols)
				}
			}
		}
	}()
	for {
		out, err := p.Read(ctx)
		if err != nil {
			c.Close(websocket.StatusNormalClosure, "the terminal ended")
			return
		}
		if err := c.Write(ctx, websocket.MessageBinary, out); err != nil {
			return
		}
	}
}

// sameOrigin reports whether a request's Origin, if it has one, is this
// page's own host (what websocket.Accept checks, done before anything).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser: the cookie and key are what let it in
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// CheckHost serves only requests whose Host names the listener at addr
// itself: its address, or localhost on its port when it is a loopback
// one, or one of names (web.hosts) on its port. A page on another name that rebinds its DNS to 127.0.0.1 sends its
// own name, and gets 421. It wraps the whole site, /metrics and /healthz
// included.
func CheckHost(addr net.Addr, h http.Handler, names ...string) http.Handler {
	ok := map[string]bool{}
	if ta, isTCP := addr.(*net.TCPAddr); isTCP {
		port := strconv.Itoa(ta.Port)
		for _, n := range names {
			ok[strings.ToLower(net.JoinHostPort(n, port))] = true
		}
		ok[strings.ToLower(net.JoinHostPort(ta.IP.String(), port))] = true
		if ta.IP.IsLoopback() || ta.IP.IsUnspecified() {
			// On every address (0.0.0.0) includes this host's loopback.
			ok["localhost:"+port] = true
			ok["127.0.0.1:"+port] = true
		}
	} else {
		ok[strings.ToLower(addr.String())] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok[strings.ToLower(r.Host)] {
			http.Error(w, "paddock: unknown host "+strconv.Quote(r.Host)+"; open the page by the address `paddock web` prints", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
