package runner

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/proxy/tlsterm"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// DirectHost is the host Claude Code calls itself, whatever its base URL
// says (its BASE_API_URL): the one whose TLS the Runner terminates.
const DirectHost = "api.anthropic.com"

// BoxCAFile is where a box finds the Runner's CA certificate, to trust
// for DirectHost alone (NODE_EXTRA_CA_CERTS; the CA is name-constrained).
var BoxCAFile = filepath.Join(sandbox.HomeDir, ".paddock", "anthropic-ca.pem")

// openCA loads or makes the Runner's CA (anthropic.direct).
func (r *Runner) openCA() error {
	if !r.opts.Config.Anthropic.DirectOn() {
		return nil
	}
	ca, err := tlsterm.LoadOrCreate(filepath.Join(r.opts.StateDir, "ca"), []string{DirectHost})
	if err != nil {
		return fmt.Errorf("the Runner's CA for %s (anthropic.direct): %w", DirectHost, err)
	}
	r.ca = ca
	return nil
}

// upstreamRoots reads anthropic.ca_file, if set.
func upstreamRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("anthropic.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("anthropic.ca_file %s holds no PEM certificate: %w", file, errdefs.ErrInvalid)
	}
	return pool, nil
}

// terminate is the egress proxy's Terminate: CONNECT DirectHost:443 from
// a box is answered by the Runner itself, in every posture. The TLS inside
// is terminated with the Runner's CA and the requests in it go to the
// credential proxy, as the box's own (its session on the connection): the
// same routes, token check, credential swap, limits and decision log as
// requests to the base URL. Nothing else is reached this way.
func (r *Runner) terminate(id, host string, port int) (func(string, net.Conn), bool) {
	if r.ca == nil || host != DirectHost || port != 443 {
		return nil, false
	}
	// A direct-mode box holds the real credential and talks to the API
	// itself (anthropic posture): its tunnel stays a tunnel.
	if s, err := r.reload(id); err != nil || s.CredentialMode != session.ModeProxy {
		return nil, false
	}
	return func(session string, c net.Conn) {
		tc := tls.Server(c, r.ca.ServerConfig())
		if !r.boxConns.push(&sessionConn{Conn: tc, r: bufio.NewReaderSize(tc, 4096), session: session, direct: true}) {
			tc.Close()
		}
	}, true
}

// direct reports whether s's box uses the direct path: proxy mode, with
// anthropic.direct on.
func (r *Runner) direct(s *session.Session) bool {
	return r.ca != nil && s.CredentialMode == session.ModeProxy
}
