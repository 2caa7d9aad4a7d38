// Package api is the Runner's HTTP API on its owner-only unix socket, and the
// typed client the CLI uses. Errors travel as {"error": "..."} with a status
// from errdefs (statusOf); the client turns them back into errdefs errors, so
// both ends agree on what went wrong.
//
// Routes (all JSON):
//
//	GET /v1/health                 Health
//	GET /v1/credential             credential.Status of the credential in use
//	GET /v1/sessions/{id}/logs?n=N the session's proxy decisions, oldest first
//	GET /v1/sessions/{ref}/ledger  the session's ledger, joined (ledger.go)
//	GET /v1/sessions/{ref}/export  a session file; POST /v1/sessions/import (portable.go)
//	GET /v1/sessions/{ref}/wait    long poll for claude's activity (wait.go)
//	GET /v1/usage                  tokens and estimated cost (usage.go)
//	POST /v1/web/login             a one-time login URL of the web page (web.go)
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// Health describes a running Runner.
type Health struct {
	// ID names this Runner's state; its Docker objects carry it as a label.
	ID       string `json:"id"`
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	StateDir string `json:"state_dir"`
	// Proxy is where the credential proxy listens on the host ("" if off).
	Proxy    string    `json:"proxy"`
	Upstream string    `json:"upstream"`
	Started  time.Time `json:"started"`
}

// Backend is what the Runner provides to the API.
type Backend interface {
	Sessions
	Health(ctx context.Context) (Health, error)
	CredentialStatus(ctx context.Context) (credential.Status, error)
	Logs(ctx context.Context, session string, n int) ([]decisionlog.Entry, error)
}

type errorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind,omitempty"`
}

// statusOf is the one place errors become HTTP statuses.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, errdefs.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, errdefs.ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, errdefs.ErrLimit):
		return http.StatusTooManyRequests, "limit"
	case errors.Is(err, errdefs.ErrCommandNotFound):
		return http.StatusUnprocessableEntity, "command_not_found"
	case errors.Is(err, errdefs.ErrCommandCannotRun):
		return http.StatusUnprocessableEntity, "command_cannot_run"
	}
	return http.StatusInternalServerError, "internal"
}

// kindErr maps a kind back to its sentinel on the client side.
var kindErr = map[string]error{
	"not_found": errdefs.ErrNotFound, "conflict": errdefs.ErrConflict, "invalid": errdefs.ErrInvalid,
	"forbidden": errdefs.ErrForbidden, "unauthorized": errdefs.ErrUnauthorized, "unavailable": errdefs.ErrUnavailable, "limit": errdefs.ErrLimit,
	"command_not_found": errdefs.ErrCommandNotFound, "command_cannot_run": errdefs.ErrCommandCannotRun,
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	st, kind := statusOf(err)
	writeJSON(w, st, errorBody{Error: err.Error(), Kind: kind})
}

// Handler serves the API for b.
func Handler(b Backend) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		h, err := b.Health(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, h)
	})
	mux.HandleFunc("GET /v1/credential", func(w http.ResponseWriter, r *http.Request) {
		st, err := b.CredentialStatus(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, st)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if s := r.URL.Query().Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				writeErr(w, fmt.Errorf("n=%q is not a count: %w", s, errdefs.ErrInvalid))
				return
			}
			n = v
		}
		es, err := b.Logs(r.Context(), r.PathValue("id"), n)
		if err != nil {
			writeErr(w, err)
			return
		}
		if es == nil {
			es = []decisionlog.Entry{}
		}
		writeJSON(w, 200, es)
	})
	sessionRoutes(mux, b)
	peopleRoutes(mux, b)
	loginRoutes(mux, b)
	waitRoute(mux, b)
	eventRoutes(mux, b)
	tokenRoutes(mux, b)
	openAPIRoute(mux)
	turnRoute(mux, b)
	usageRoute(mux, b)
	ledgerRoute(mux, b)
	portableRoutes(mux, b)
	cloneRoutes(mux, b)
	messageRoute(mux, b)
	secretRoutes(mux, b)
	prRoute(mux, b)
	webRoute(mux, b)
	webEnrollRoute(mux, b)
	egressRoutes(mux, b)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, fmt.Errorf("no API route %s %s: %w", r.Method, r.URL.Path, errdefs.ErrNotFound))
	})
	return mux
}

// Client talks to a Runner over its unix socket.
type Client struct {
	Socket string
	hc     *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		Proxy: nil,
	}
	return &Client{Socket: socket, hc: &http.Client{Transport: tr}}
}

// ErrNoRunner is wrapped when the socket cannot be reached.
var ErrNoRunner = errors.New("the paddock Runner is not running")

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://paddock"+path, nil)
	if err != nil {
		return err
	}
	return c.roundTrip(req, out)
}

func (c *Client) roundTrip(req *http.Request, out any) error {
	resp, err := c.hc.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return req.Context().Err()
		}
		return c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer from the Runner: %w", err)
	}
	return json.Unmarshal(b, out)
}

// responseError turns an error answer back into an errdefs error.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		return fmt.Errorf("the Runner answered %s", resp.Status)
	}
	if sentinel, ok := kindErr[eb.Kind]; ok {
		return fmt.Errorf("%s: %w", strings.TrimSuffix(eb.Error, ": "+sentinel.Error()), sentinel)
	}
	return errors.New(eb.Error)
}

// Health calls GET /v1/health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.get(ctx, "/v1/health", &h)
}

// CredentialStatus calls GET /v1/credential.
func (c *Client) CredentialStatus(ctx context.Context) (credential.Status, error) {
	var s credential.Status
	return s, c.get(ctx, "/v1/credential", &s)
}

// Logs calls GET /v1/sessions/{id}/logs.
func (c *Client) Logs(ctx context.Context, session string, n int) ([]decisionlog.Entry, error) {
	var es []decisionlog.Entry
	return es, c.get(ctx, "/v1/sessions/"+url.PathEscape(session)+"/logs?n="+strconv.Itoa(n), &es)
}

// dialError says why the socket did not answer: no Runner, or one that
// does not serve the caller (the socket's group, which they are not in).
func (c *Client) dialError(err error) error {
	conn, derr := net.Dial("unix", c.Socket)
	if derr == nil {
		conn.Close()
		return fmt.Errorf("the Runner on %s dropped the request: %w", c.Socket, err)
	}
	if errors.Is(derr, syscall.EACCES) {
		return notInGroup(c.Socket)
	}
	return fmt.Errorf("%w (no answer on %s); start it with `paddock serve`, or point --state-dir / %s at the one that runs: %w",
		ErrNoRunner, c.Socket, "PADDOCK_STATE_DIR", errdefs.ErrUnavailable)
}

// notInGroup explains a socket the caller may not open.
func notInGroup(socket string) error {
	me := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	fi, err := os.Stat(socket)
	var st *syscall.Stat_t
	ok := false
	if err == nil {
		st, ok = fi.Sys().(*syscall.Stat_t)
	}
	if !ok || fi.Mode().Perm()&0o060 == 0 {
		return fmt.Errorf("permission denied on %s: that Runner serves its own user only; ask its admin to set api.group and add you to it: %w", socket, errdefs.ErrForbidden)
	}
	group := strconv.FormatUint(uint64(st.Gid), 10)
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return fmt.Errorf("permission denied on %s: this Runner serves the members of group %q, and you (%s) are not one (or have not logged in again since you were added); an admin adds you with: sudo usermod -aG %s %s: %w",
		socket, group, me, group, me, errdefs.ErrForbidden)
}
