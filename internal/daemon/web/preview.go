package web

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Previews: the web page's "open preview" link to a port a session
// publishes (paddock port, a project file's ports).
//
// A preview is whatever the box serves: code an agent wrote, run with
// every permission bypassed. Served on the page's own origin it could
// read the page's key from its storage and act as the person on every
// session. So each preview gets an origin of its own: a listener of its
// own on the page's host, one per session and box port, opened the first
// time someone asks for it. Its origin holds nothing of the page's, and
// another preview's answers are another origin's.
//
// Entering one takes a one-time ticket (PreviewTicketTTL) the page asks
// for with its login (POST /api/sessions/{ref}/preview/{port}, checked as
// that person: a driver of the session, and audited); the preview's
// listener turns it into a cookie of its own (named for its port, HttpOnly,
// SameSite=Strict, good for CookieTTL). Each request through the preview
// is made as that person, checked afresh, and reaches the box through its
// channel (Backend.DialPort). Cookies are not scoped by port, so the
// browser sends every paddock cookie of this host to every preview:
// paddock's cookies are taken out of each request before the box sees it.
// WebSockets pass through (a dev server's hot reload). The app sees
// itself served at "/", as on its own port, so nothing needs a base path.
// On a page served over TLS (SetTLS) each preview's listener is TLS too,
// with the page's certificate, and its link names the host the browser
// reached the page by; its cookie is then Secure.

// PreviewTicketTTL is how long a preview link is good for, once.
const PreviewTicketTTL = time.Minute

// maxPreviews bounds the preview listeners one page opens.
const maxPreviews = 64

// previewCookiePrefix starts every preview's cookie name.
const previewCookiePrefix = "paddock_preview_"

// PortDialer is the Backend feature previews need.
type PortDialer interface {
	DialPort(ctx context.Context, ref string, box int) (net.Conn, error)
	EnterPreview(ctx context.Context, ref string, box int) (session.Session, error)
}

// previews is the page's preview listeners and their logins.
type previews struct {
	mu      sync.Mutex
	host    string                    // the page's host (IP), where previews listen
	names   []string                  // the other names the page answers to (web.hosts)
	tls     *tls.Config               // the page's TLS, which previews are served with too (nil: plain HTTP)
	byKey   map[previewKey]*preview   // open listeners
	tickets map[[32]byte]previewGrant // hashes of unused tickets
	cookies map[[32]byte]previewGrant // hashes of issued cookies
	servers []*http.Server            // to close
}

type previewKey struct {
	session string // id
	box     int
}

type preview struct {
	key  previewKey
	port int // the listener's
}

// previewGrant is a ticket's or cookie's person, preview and expiry.
type previewGrant struct {
	uid uint32
	key previewKey
	exp time.Time
}

// SetPreviewHost says where previews listen: the page's listener's IP,
// answering to the page's names too (web.hosts). Without it (a page not
// served on TCP) there are no previews.
func (s *Server) SetPreviewHost(addr net.Addr, names ...string) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	s.pv.mu.Lock()
	s.pv.host, s.pv.names = ta.IP.String(), names
	s.pv.mu.Unlock()
}

// Close closes the preview listeners.
func (s *Server) Close() error {
	s.pv.mu.Lock()
	srvs := s.pv.servers
	s.pv.servers, s.pv.byKey = nil, nil
	s.pv.mu.Unlock()
	for _, srv := range srvs {
		srv.Close()
	}
	return nil
}

// previewLink answers POST /api/sessions/{ref}/preview/{port}: a one-time
// link into the preview, for the person of the login.
func (s *Server) previewLink(r *http.Request) (any, error) {
	d, ok := s.b.(PortDialer)
	if !ok {
		return nil, fmt.Errorf("this Runner has no previews: %w", errdefs.ErrUnavailable)
	}
	box, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || box < 1 || box > 65535 {
		return nil, fmt.Errorf("port %q is not a TCP port: %w", r.PathValue("port"), errdefs.ErrInvalid)
	}
	who, ok := people.From(r.Context())
	if !ok {
		return nil, fmt.Errorf("no person on the request: %w", errdefs.ErrForbidden)
	}
	sess, err := d.EnterPreview(r.Context(), r.PathValue("ref"), box)
	if err != nil {
		return nil, err
	}
	published := false
	for _, p := range sess.Ports {
		published = published || p.Box == box
	}
	if !published {
		return nil, fmt.Errorf("session %q publishes no port %d; publish it first: paddock port %s %d: %w", sess.Name, box, sess.Name, box, errdefs.ErrNotFound)
	}
	pv, err := s.openPreview(previewKey{session: sess.ID, box: box})
	if err != nil {
		return nil, err
	}
	t, err := randomString()
	if err != nil {
		return nil, err
	}
	s.pv.mu.Lock()
	now := s.now()
	for h, g := range s.pv.tickets {
		if now.After(g.exp) {
			delete(s.pv.tickets, h)
		}
	}
	s.pv.tickets[sha256.Sum256([]byte(t))] = previewGrant{uid: who.UID, key: pv.key, exp: now.Add(PreviewTicketTTL)}
	host, scheme := s.pv.host, "http"
	if s.pv.tls != nil {
		// By the name the browser reached the page by (CheckHost let it
		// through): the one the certificate names and the browser trusts.
		scheme = "https"
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
	}
	s.pv.mu.Unlock()
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(pv.port)), Path: "/.paddock/enter", RawQuery: "ticket=" + t}
	return map[string]string{"url": u.String()}, nil
}

// openPreview returns the listener of key, opening it the first time.
func (s *Server) openPreview(key previewKey) (*preview, error) {
	s.pv.mu.Lock()
	defer s.pv.mu.Unlock()
	if pv := s.pv.byKey[key]; pv != nil {
		return pv, nil
	}
	if s.pv.host == "" {
		return nil, fmt.Errorf("this page is not served on TCP, so it opens no previews; use paddock port: %w", errdefs.ErrUnavailable)
	}
	if len(s.pv.byKey) >= maxPreviews {
		return nil, fmt.Errorf("this page has %d previews open, the most it opens; restart the Runner to close them: %w", maxPreviews, errdefs.ErrLimit)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.pv.host, "0"))
	if err != nil {
		return nil, fmt.Errorf("open a preview listener: %w", err)
	}
	pv := &preview{key: key, port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: CheckHost(ln.Addr(), s.previewHandler(pv), s.pv.names...), ReadHeaderTimeout: 10 * time.Second}
	if s.pv.tls != nil {
		ln = tls.NewListener(ln, s.pv.tls)
	}
	if s.pv.byKey == nil {
		s.pv.byKey = map[previewKey]*preview{}
	}
	s.pv.byKey[key] = pv
	s.pv.servers = append(s.pv.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return pv, nil
}

// previewHandler serves one preview's listener.
func (s *Server) previewHandler(pv *preview) http.Handler {
	cookieName := previewCookiePrefix + strconv.Itoa(pv.port)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = pr.In.Host // the app sees the Host the browser used
			pr.Out.Host = pr.In.Host
			stripPaddockCookies(pr.Out)
			pr.Out.Header.Del(KeyHeader)
		},
		// Cookies are not scoped by port: a box's Set-Cookie of one of
		// paddock's names would land on the page's (or another
		// preview's) cookie. It is dropped; the app's own pass.
		ModifyResponse: func(resp *http.Response) error {
			dropPaddockSetCookies(resp.Header)
			return nil
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return s.b.(PortDialer).DialPort(ctx, pv.key.session, pv.key.box)
			},
			// A connection to the box is dialled for each request, as
			// its person: one dialled for another would skip their check.
			DisableKeepAlives: true,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			code := http.StatusBadGateway
			if errors.Is(err, errdefs.ErrForbidden) {
				code = http.StatusForbidden
			}
			http.Error(w, "paddock preview: "+err.Error(), code)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.paddock/enter" {
			s.enterPreview(w, r, pv, cookieName)
			return
		}
		c, err := r.Cookie(cookieName)
		var g previewGrant
		ok := false
		if err == nil {
			s.pv.mu.Lock()
			g, ok = s.pv.cookies[sha256.Sum256([]byte(c.Value))]
			s.pv.mu.Unlock()
			ok = ok && g.key == pv.key && !s.now().After(g.exp)
		}
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, "paddock preview: not logged in here. Open this preview from the session's page (paddock web), whose link logs you in.")
			return
		}
		p, err := s.who(g.uid)
		if err != nil {
			http.Error(w, "paddock preview: "+err.Error(), http.StatusForbidden)
			return
		}
		proxy.ServeHTTP(w, r.WithContext(people.With(r.Context(), p)))
	})
}

// enterPreview turns a ticket into the preview's cookie and sends the
// browser to the app's root.
func (s *Server) enterPreview(w http.ResponseWriter, r *http.Request, pv *preview, cookieName string) {
	h := sha256.Sum256([]byte(r.URL.Query().Get("ticket")))
	s.pv.mu.Lock()
	g, ok := s.pv.tickets[h]
	delete(s.pv.tickets, h)
	s.pv.mu.Unlock()
	if !ok || g.key != pv.key || s.now().After(g.exp) {
		http.Error(w, "paddock preview: this link is used, expired or not this preview's; open the preview again from the session's page", http.StatusUnauthorized)
		return
	}
	c, err := randomString()
	if err != nil {
		http.Error(w, "paddock preview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	s.pv.mu.Lock()
	now := s.now()
	for k, old := range s.pv.cookies {
		if now.After(old.exp) {
			delete(s.pv.cookies, k)
		}
	}
	s.pv.cookies[sha256.Sum256([]byte(c))] = previewGrant{uid: g.uid, key: pv.key, exp: now.Add(CookieTTL)}
	s.pv.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c, Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode, MaxAge: int(CookieTTL / time.Second)})
	w.Header().Set("Cache-Control", "no-store")
	// This origin (a port) may have served another box before, whose
	// storage or service worker would then meet this one's app.
	w.Header().Set("Clear-Site-Data", `"storage"`)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// dropPaddockSetCookies takes out of a box's answer every Set-Cookie of
// one of paddock's cookie names.
func dropPaddockSetCookies(h http.Header) {
	all := h.Values("Set-Cookie")
	if len(all) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, v := range all {
		c, err := http.ParseSetCookie(v)
		if err == nil && (c.Name == CookieName || strings.HasPrefix(c.Name, previewCookiePrefix)) {
			continue
		}
		if err != nil { // unparseable: the browser would take its name as written
			name, _, _ := strings.Cut(v, "=")
			if n := strings.TrimSpace(name); n == CookieName || strings.HasPrefix(n, previewCookiePrefix) {
				continue
			}
		}
		h.Add("Set-Cookie", v)
	}
}

// stripPaddockCookies takes paddock's own cookies (the page's login, every
// preview's) out of a request bound for a box.
func stripPaddockCookies(r *http.Request) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name == CookieName || strings.HasPrefix(c.Name, previewCookiePrefix) {
			continue
		}
		r.AddCookie(c)
	}
}
