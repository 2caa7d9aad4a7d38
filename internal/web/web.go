// Package web is the Runner's web page: a list of sessions (create, sleep,
// wake, remove), and a session page with a live terminal (xterm.js over a
// WebSocket joined to the session's terminal mirror as a driver or an
// observer) and the session's proxy and egress decisions.
//
// It is served on loopback only. Nothing is served without a login: the
// Runner prints a URL with a one-time login token (like Jupyter); opening it
// sets an HttpOnly, SameSite=Strict cookie. Requests that change anything
// must also carry X-Paddock: 1 (a header no cross-site form can send), and
// WebSocket upgrades must come from the page's own origin.
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/secret"
	"github.com/paddockhq/paddock/internal/session"
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

// Server serves the page.
type Server struct {
	b     Backend
	token secret.Value
	log   *slog.Logger

	mu      sync.Mutex
	cookies map[[32]byte]time.Time // hashes of issued cookies, by expiry
}

// New makes a server whose login token is token.
func New(b Backend, token secret.Value, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{b: b, token: token, log: log, cookies: map[[32]byte]time.Time{}}
}

// NewToken makes a login token.
func NewToken() (secret.Value, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return secret.Value{}, err
	}
	return secret.New(base64.RawURLEncoding.EncodeToString(b[:])), nil
}

// Handler is the whole site.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	mux.HandleFunc("GET /login", s.login)
	mux.Handle("GET /", s.auth(files))
	mux.Handle("GET /api/sessions", s.auth(s.jsonHandler(s.list)))
	mux.Handle("POST /api/sessions", s.auth(s.jsonHandler(func(r *http.Request) (any, error) {
		var req api.CreateRequest
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&req); err != nil {
			return nil, fmt.Errorf("request body: %v: %w", err, errdefs.ErrInvalid)
		}
		return s.b.CreateSession(r.Context(), req)
	})))
	mux.Handle("POST /api/sessions/{ref}/sleep", s.auth(s.jsonHandler(func(r *http.Request) (any, error) { return s.b.Sleep(r.Context(), r.PathValue("ref")) })))
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

// login trades the login token for a cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	got := secret.New(r.URL.Query().Get("token"))
	if got.IsZero() || !got.Equal(s.token) {
		http.Error(w, "paddock: wrong or missing login token; open the URL that paddock serve printed", http.StatusUnauthorized)
		return
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	c := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	s.cookies[sha256.Sum256([]byte(c))] = time.Now().Add(24 * time.Hour)
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: c, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: 86400})
	http.Redirect(w, r, "/", http.StatusSeeOther) // the token leaves the address bar
}

func (s *Server) valid(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	h := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.cookies[h]
	if ok && time.Now().After(exp) {
		delete(s.cookies, h)
		return false
	}
	return ok
}

// auth lets through logged-in browsers only, and for changes only
// same-origin requests that carry X-Paddock: 1.
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.valid(r) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, "paddock: not logged in. Open the login URL that `paddock serve` printed (or run `paddock web`).")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("X-Paddock") != "1" {
			http.Error(w, "paddock: changes need the X-Paddock: 1 header (cross-site requests are refused)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
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
	}
	return http.StatusInternalServerError
}

// Row is one line of the session list.
type Row struct {
	session.Session
	// TokensUsed sums input and output tokens the proxy saw.
	TokensUsed int64 `json:"tokens_used"`
}

func (s *Server) list(r *http.Request) (any, error) {
	ss, err := s.b.Sessions(r.Context())
	if err != nil {
		return nil, err
	}
	rows := []Row{}
	for _, x := range ss {
		if !x.Live() {
			continue
		}
		row := Row{Session: x}
		if es, err := s.b.Logs(r.Context(), x.ID, 0); err == nil {
			for _, e := range es {
				row.TokensUsed += e.InputTokens + e.OutputTokens
			}
		}
		rows = append(rows, row)
	}
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := s.b.Attach(ctx, r.PathValue("ref"), api.AttachRequest{Role: role, Rows: uint16(rows), Cols: uint16(cols)})
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	defer p.Leave()
	// Accept checks that the Origin is this page's own host.
	c, err := websocket.Accept(w, r, nil)
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
