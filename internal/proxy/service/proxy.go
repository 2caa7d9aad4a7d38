package service

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	svc "github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/proxy/gitproto"
	"github.com/paddockhq/paddock/internal/proxy/gql"
	"github.com/paddockhq/paddock/internal/proxy/tlsterm"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// Session is what the proxy needs of a session, asked on every request
// (so a change to its grants applies at once).
type Session struct {
	Bounds []Bound
	// Own are the branches it may push (service.RefAllowed).
	Own []string
}

// Options configure a Proxy.
type Options struct {
	// Session returns a session's grants; an error refuses its requests.
	Session func(id string) (Session, error)
	// Dial connects to host:port as the egress proxy would: the name
	// resolved by the Runner, only to an address a box may reach.
	Dial func(ctx context.Context, host string, port int) (net.Conn, error)
	// RootCAs verifies the services' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// Decisions receives one Entry (Kind "service") per request.
	Decisions decisionlog.Sink
	Log       *slog.Logger
	// TempDir holds a push while it is read (the Runner's state directory).
	TempDir string
	// MaxPush bounds one push's bytes (default 1 GiB).
	MaxPush int64
}

// Proxy serves the service hosts' TLS, terminated, for boxes.
type Proxy struct {
	o   Options
	log *slog.Logger
	ids atomic.Uint64
	tr  *http.Transport

	mu      sync.Mutex
	nodeIDs map[string]string // host/owner/repo → the repository's GraphQL id
}

// New builds a proxy.
func New(o Options) *Proxy {
	if o.MaxPush <= 0 {
		o.MaxPush = 1 << 30
	}
	if o.Decisions == nil {
		o.Decisions = decisionlog.Discard{}
	}
	p := &Proxy{o: o, log: o.Log, nodeIDs: map[string]string{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, ps, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(ps)
			return o.Dial(ctx, host, port)
		},
		TLSClientConfig:       &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1: what the box spoke
		ResponseHeaderTimeout: 5 * time.Minute,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
	}
	return p
}

// Close drops idle upstream connections.
func (p *Proxy) Close() { p.tr.CloseIdleConnections() }

// Serve speaks TLS as the service hosts to a box's connection (after the
// egress proxy's 200 to its CONNECT), with a leaf from ca, and serves the
// requests inside until the box closes it.
func (p *Proxy) Serve(session string, c net.Conn, ca *tlsterm.CA) {
	tc := tls.Server(c, ca.ServerConfig())
	srv := &http.Server{
		Handler:           p.handler(session),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	_ = srv.Serve(&oneConn{c: tc})
}

// oneConn is a listener that yields one connection, then waits for it to
// close.
type oneConn struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	var c net.Conn
	l.once.Do(func() { c = &closeNotify{Conn: l.c, done: done} })
	if c != nil {
		return c, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

type closeNotify struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

func (p *Proxy) handler(session string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		e := decisionlog.Entry{Time: start.UTC(), Kind: "service", Session: session, Host: host, Port: 443,
			RequestID: "sv_" + strconv.FormatUint(p.ids.Add(1), 10), Method: r.Method, Path: r.URL.Path}
		defer func() {
			e.DurationMS = float64(time.Since(start).Microseconds()) / 1000
			p.record(e)
		}()
		refuse := func(status int, why string) {
			e.Decision, e.Status, e.Reason = decisionlog.Refused, status, why
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Paddock-Service", "refused")
			w.WriteHeader(status)
			fmt.Fprintf(w, "paddock: refused: %s\n", why)
		}
		s, err := p.o.Session(session)
		if err != nil {
			refuse(http.StatusForbidden, err.Error())
			return
		}
		v := Decide(s.Bounds, Request{Host: host, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
			Placeholder: carries(r, s.Bounds)})
		e.Repo, e.Rule = v.Repo, string(v.Op)
		if v.Bound != nil {
			e.Service = v.Bound.Secret.Name
			e.Rule = v.Bound.String() + " " + string(v.Op)
		}
		if !v.Allow {
			refuse(http.StatusForbidden, v.Reason)
			return
		}
		e.Reason = v.Reason
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host, out.Host = "https", host, host
		for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
			out.Header.Del(h)
		}
		if v.GraphQL {
			body, err := io.ReadAll(io.LimitReader(r.Body, gql.MaxBytes*2+1))
			if err != nil || len(body) > gql.MaxBytes*2 {
				refuse(http.StatusRequestEntityTooLarge, "a GraphQL request over the size paddock reads")
				return
			}
			var on []*Bound
			for i := range s.Bounds {
				if b := &s.Bounds[i]; b.Secret.Kind == svc.GitHub && b.Secret.Host == v.Bound.Secret.Host {
					on = append(on, b)
				}
			}
			b, op, why := judgeGraphQL(on, body, func(b *Bound) (string, error) { return p.nodeID(r.Context(), b) })
			if why != "" {
				e.Rule = string(OpRefused)
				refuse(http.StatusForbidden, why)
				return
			}
			v.Bound, v.Op, v.Repo = b, op, b.Repo
			e.Repo, e.Service, e.Rule = b.Repo, b.Secret.Name, b.String()+" graphql "+string(op)
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			out.Header.Del("Transfer-Encoding")
		}
		if v.Push {
			body, cleanup, ok := p.checkPush(w, r, s, &e)
			defer cleanup()
			if !ok {
				return
			}
			out.Body, out.ContentLength = body, -1
			if st, err := body.Stat(); err == nil {
				out.ContentLength = st.Size()
			}
			out.Header.Del("Transfer-Encoding")
		}
		// The placeholder out, the credential in: only where the box sent
		// the placeholder (a request git made without one goes without).
		if v.Bound != nil && carries(r, []Bound{*v.Bound}) {
			setCredential(out, v.Bound, v.Op)
		}
		if hasPlaceholder(out, s.Bounds) {
			refuse(http.StatusForbidden, "a placeholder is still in the request where paddock does not swap one (a header or the URL): it would leak nothing, but it is no request a grant allows")
			return
		}
		resp, err := p.tr.RoundTrip(out)
		if err != nil {
			e.Decision, e.Status, e.Reason = decisionlog.Refused, http.StatusBadGateway, "upstream: "+err.Error()
			http.Error(w, "paddock: "+host+" did not answer: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		real := secretsOf(s.Bounds)
		for k, vs := range resp.Header {
			switch http.CanonicalHeaderKey(k) {
			case "Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Proxy-Authenticate":
				continue
			case "Content-Length":
				if len(real) > 0 {
					continue // a redaction changes it; the body goes chunked
				}
			}
			for _, x := range vs {
				w.Header().Add(k, redact(x, real))
			}
		}
		w.WriteHeader(resp.StatusCode)
		rw := &redactor{w: w, secrets: real, fl: http.NewResponseController(w)}
		n, _ := io.Copy(rw, resp.Body)
		rw.flush()
		e.Decision, e.Status, e.BytesOut = decisionlog.Forwarded, resp.StatusCode, n
		e.BytesIn = max(out.ContentLength, 0)
	})
}

// checkPush reads a receive-pack POST whole (into a temporary file, at
// most MaxPush), judges its ref updates, and either answers the refusal
// itself (ok false) or returns the body to send on.
func (p *Proxy) checkPush(w http.ResponseWriter, r *http.Request, s Session, e *decisionlog.Entry) (_ *os.File, cleanup func(), ok bool) {
	cleanup = func() {}
	refuse := func(status int, why string) {
		e.Decision, e.Status, e.Reason = decisionlog.Refused, status, why
		http.Error(w, "paddock: refused: "+why, status)
	}
	if p.o.TempDir != "" {
		if err := os.MkdirAll(p.o.TempDir, 0o700); err != nil {
			refuse(http.StatusInternalServerError, "spool the push: "+err.Error())
			return nil, cleanup, false
		}
	}
	f, err := os.CreateTemp(p.o.TempDir, "push-*")
	if err != nil {
		refuse(http.StatusInternalServerError, "spool the push: "+err.Error())
		return nil, cleanup, false
	}
	os.Remove(f.Name()) // unlinked: gone with the descriptor
	cleanup = func() { f.Close() }
	n, err := io.Copy(f, io.LimitReader(r.Body, p.o.MaxPush+1))
	if err != nil {
		refuse(http.StatusBadRequest, "read the push: "+err.Error())
		return nil, cleanup, false
	}
	if n > p.o.MaxPush {
		refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("a push of more than %d bytes", p.o.MaxPush))
		return nil, cleanup, false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		refuse(http.StatusInternalServerError, err.Error())
		return nil, cleanup, false
	}
	var in io.Reader = f
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		z, err := gzip.NewReader(f)
		if err != nil {
			refuse(http.StatusBadRequest, "the push says gzip and is not")
			return nil, cleanup, false
		}
		in = io.LimitReader(z, p.o.MaxPush*4)
	}
	br := bufio.NewReaderSize(in, 64<<10)
	req, err := gitproto.ReadRequest(br)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return nil, cleanup, false
	}
	for _, c := range req.Commands {
		e.RefUpdates = append(e.RefUpdates, c.String())
	}
	var g gitproto.Graph
	needPack := false
	for _, c := range req.Commands {
		needPack = needPack || !c.Delete()
	}
	if needPack {
		if g, err = gitproto.ReadCommits(br); err != nil {
			refuse(http.StatusBadRequest, "the push's pack: "+err.Error())
			return nil, cleanup, false
		}
	}
	if bad := CheckPush(req.Commands, g, s.Own); len(bad) > 0 {
		var why []string
		for _, c := range req.Commands {
			if b := bad[c.Ref]; b != "" {
				why = append(why, c.Ref+": "+strings.TrimPrefix(b, "paddock: "))
			}
		}
		e.Decision, e.Status, e.Reason = decisionlog.Refused, http.StatusOK, "push refused: "+strings.Join(why, "; ")
		msg := "paddock: this push was refused before it reached " + e.Host + "; nothing was sent.\n" +
			"paddock: this session may push only its own branches (" + strings.Join(s.Own, ", ") + "), never delete one, never rewrite one."
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		w.Write(gitproto.RefusedResult(req, msg, bad))
		return nil, cleanup, false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		refuse(http.StatusInternalServerError, err.Error())
		return nil, cleanup, false
	}
	return f, cleanup, true
}

// nodeID is a granted GitHub repository's GraphQL node id, asked of the
// REST API with the real token once and kept.
func (p *Proxy) nodeID(ctx context.Context, b *Bound) (string, error) {
	key := b.Secret.Host + "/" + strings.ToLower(b.Repo)
	p.mu.Lock()
	id, ok := p.nodeIDs[key]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	u := "https://api.github.com/repos/" + b.Repo
	if b.Secret.Host != "github.com" {
		u = "https://" + b.Secret.Host + "/api/v3/repos/" + b.Repo
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+b.Secret.Value.Reveal())
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		NodeID string `json:"node_id"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc) != nil || doc.NodeID == "" {
		return "", fmt.Errorf("the repository %s: %s", b.Repo, resp.Status)
	}
	p.mu.Lock()
	p.nodeIDs[key] = doc.NodeID
	p.mu.Unlock()
	return doc.NodeID, nil
}

// setCredential puts the real credential where the placeholder was.
func setCredential(out *http.Request, b *Bound, op Op) {
	tok := b.Secret.Value.Reveal()
	switch b.Secret.Kind {
	case svc.GitHub:
		out.Header.Del("Authorization")
		switch op {
		case OpGitFetch, OpGitPush, OpGitPushRefs:
			out.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok)))
		default:
			out.Header.Set("Authorization", "Bearer "+tok)
		}
	case svc.GitLab:
		out.Header.Del("Authorization")
		out.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("oauth2:"+tok)))
	case svc.Header:
		out.Header.Del(b.Secret.HeaderName)
		out.Header.Set(b.Secret.HeaderName, tok)
		if !strings.EqualFold(b.Secret.HeaderName, "Authorization") {
			out.Header.Del("Authorization") // the placeholder's, if it came there
		}
	}
}

// carries reports whether r holds one of bs's placeholders: in a header
// (plainly, or in Basic credentials) or in the URL.
func carries(r *http.Request, bs []Bound) bool { return hasPlaceholder(r, bs) }

func hasPlaceholder(r *http.Request, bs []Bound) bool {
	look := func(s string) bool {
		for _, b := range bs {
			if b.Placeholder != "" && strings.Contains(s, b.Placeholder) {
				return true
			}
		}
		return false
	}
	if look(r.URL.RawQuery) || look(r.URL.Path) || look(r.URL.RawPath) {
		return true
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if look(v) {
				return true
			}
			if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "basic") {
				if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil && look(string(dec)) {
					return true
				}
			}
		}
	}
	return false
}

func secretsOf(bs []Bound) []string {
	var out []string
	for _, b := range bs {
		if v := b.Secret.Value.Reveal(); len(v) >= 8 {
			out = append(out, v)
		}
	}
	return out
}

// Redacted is what a response shows in place of a real credential.
const Redacted = "[credential redacted by paddock]"

func redact(s string, secrets []string) string {
	for _, x := range secrets {
		s = strings.ReplaceAll(s, x, Redacted)
	}
	return s
}

// redactor writes a response body with every real credential in it
// replaced, across writes: it holds back the last bytes that could begin
// one.
type redactor struct {
	w       io.Writer
	secrets []string
	held    []byte
	fl      *http.ResponseController
}

func (r *redactor) Write(b []byte) (int, error) {
	if len(r.secrets) == 0 {
		n, err := r.w.Write(b)
		_ = r.fl.Flush()
		return n, err
	}
	buf := append(r.held, b...)
	for _, x := range r.secrets {
		buf = bytes.ReplaceAll(buf, []byte(x), []byte(Redacted))
	}
	keep := 0
	for _, x := range r.secrets {
		for k := min(len(x)-1, len(buf)); k > keep; k-- {
			if bytes.HasSuffix(buf, []byte(x[:k])) {
				keep = k
				break
			}
		}
	}
	out := buf[:len(buf)-keep]
	r.held = append([]byte(nil), buf[len(buf)-keep:]...)
	if _, err := r.w.Write(out); err != nil {
		return 0, err
	}
	_ = r.fl.Flush()
	return len(b), nil
}

func (r *redactor) flush() {
	if len(r.held) > 0 {
		r.w.Write(r.held)
		r.held = nil
	}
}

func (p *Proxy) record(e decisionlog.Entry) {
	p.o.Decisions.Record(e)
	level := slog.LevelInfo
	if e.Decision != decisionlog.Forwarded {
		level = slog.LevelWarn
	}
	p.log.LogAttrs(context.Background(), level, "service request",
		slog.String(logkey.Decision, string(e.Decision)), slog.String(logkey.Session, e.Session),
		slog.String("host", e.Host), slog.String("method", e.Method), slog.String("path", e.Path),
		slog.String("rule", e.Rule), slog.String("repo", e.Repo), slog.Any("ref_updates", e.RefUpdates),
		slog.String(logkey.Reason, e.Reason), slog.Int(logkey.Status, e.Status))
}
