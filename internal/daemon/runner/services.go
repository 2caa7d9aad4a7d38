package runner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/metrics"
	servicep "github.com/paddockhq/paddock/internal/proxy/service"
	"github.com/paddockhq/paddock/internal/proxy/tlsterm"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Where a box with service grants finds the Runner's CA for their hosts
// (its own, per session, name-constrained to those hosts), and the system
// roots with it (GIT_SSL_CAINFO, SSL_CERT_FILE and CURL_CA_BUNDLE name it:
// git, gh and curl trust it, and still every other host's own CA).
var (
	BoxServicesCAFile = filepath.Join(sandbox.HomeDir, ".paddock", "services-ca.pem")
	BoxCABundle       = filepath.Join(sandbox.HomeDir, ".paddock", "ca-bundle.pem")
)

// systemRoots is the host's bundle of trusted roots, laid under the
// Runner's CA in a box's bundle (Debian's path; the box images are Debian).
const systemRoots = "/etc/ssl/certs/ca-certificates.crt"

// secretsStore is a person's service credentials: the OS keyring for
// the Runner's own user where the host has one (as for the Anthropic
// credential), else a 0600 file in the state directory.
func (r *Runner) secretsStore(uid uint32) service.Store {
	if r.svcKeyring && uid == r.self.UID {
		return service.Keyring{Account: r.opts.StateDir}
	}
	return service.File{Path: filepath.Join(r.opts.StateDir, "users", strconv.FormatUint(uint64(uid), 10), "secrets.json")}
}

// ListSecrets describes the caller's service credentials.
func (r *Runner) ListSecrets(ctx context.Context) ([]service.Status, error) {
	l, err := r.secretsStore(r.caller(ctx).UID).List()
	if err != nil {
		return nil, err
	}
	out := make([]service.Status, 0, len(l))
	for _, s := range l {
		out = append(out, s.Status())
	}
	return out, nil
}

// SetSecret stores one of the caller's service credentials (replacing
// one of its name). Running sessions that use it use the new value from
// their next request.
func (r *Runner) SetSecret(ctx context.Context, s service.Secret) (service.Status, error) {
	p := r.caller(ctx)
	f := r.secretsStore(p.UID)
	if file, ok := f.(service.File); ok {
		if err := os.MkdirAll(filepath.Dir(file.Path), 0o700); err != nil {
			return service.Status{}, err
		}
	}
	saved, err := f.Save(s)
	if err != nil {
		return service.Status{}, err
	}
	r.log.Info("service credential stored", "user", p.Name, "secret", saved.Name, "kind", saved.Kind, "host", saved.Host, "fingerprint", service.Fingerprint(saved.Value), "where", f.Where())
	st := saved.Status()
	st.Where = f.Where()
	return st, nil
}

// RemoveSecret deletes one of the caller's service credentials; sessions
// granted it are refused its use from their next request.
func (r *Runner) RemoveSecret(ctx context.Context, name string) error {
	p := r.caller(ctx)
	if err := r.secretsStore(p.UID).Remove(name); err != nil {
		return err
	}
	r.log.Info("service credential removed", "user", p.Name, "secret", name)
	return nil
}

// openServices makes the service credentials' proxy.
func (r *Runner) openServices() error {
	var roots *x509.CertPool
	if f := r.opts.Config.Services.CAFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("services.ca_file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return fmt.Errorf("services.ca_file %s holds no PEM certificate: %w", f, errdefs.ErrInvalid)
		}
	}
	r.svcKeyring, _ = credential.KeyringAvailable()
	tmp := filepath.Join(r.opts.StateDir, "tmp") // made at the first push
	r.services = servicep.New(servicep.Options{
		Session:   r.serviceSession,
		Dial:      r.egress.DialChecked,
		RootCAs:   roots,
		Decisions: metrics.Tee{r.decisions, r.metrics},
		Log:       r.log.With(logkey.Component, "services"),
		TempDir:   tmp,
		MaxPush:   r.opts.Config.Services.MaxPushMB << 20,
	})
	return nil
}

// serviceSession binds a session's grants to its owner's secrets as they
// are now: a secret removed since is refused with the reason.
func (r *Runner) serviceSession(id string) (servicep.Session, error) {
	s, err := r.reload(id)
	if err != nil {
		return servicep.Session{}, err
	}
	if len(s.Services) == 0 {
		return servicep.Session{}, fmt.Errorf("this session has no service grant")
	}
	f := r.secretsStore(s.Owner.UID)
	out := servicep.Session{Own: s.OwnBranches()}
	for _, g := range s.Services {
		sec, err := f.Get(g.Secret)
		if err != nil {
			if errors.Is(err, service.ErrNotFound) {
				return servicep.Session{}, fmt.Errorf("the secret %s this session was given was removed by %s", g.Secret, s.Owner.Name)
			}
			return servicep.Session{}, err
		}
		out.Bounds = append(out.Bounds, servicep.Bound{Grant: g, Secret: sec})
	}
	return out, nil
}

// serviceHosts are the hosts the Runner terminates for s: those of its
// grants' secrets, as stored now.
func (r *Runner) serviceHosts(s *session.Session) []string {
	if len(s.Services) == 0 {
		return nil
	}
	ss, err := r.serviceSession(s.ID)
	if err != nil {
		return nil
	}
	return servicep.Hosts(ss.Bounds)
}

// sessionCAs keeps each session's CA for its service hosts, loaded once.
type sessionCAs struct {
	mu sync.Mutex
	m  map[string]*tlsterm.CA
}

// serviceCA is s's own CA, constrained to hosts (made anew, on disk in
// the state directory, when the hosts change).
func (r *Runner) serviceCA(id string, hosts []string) (*tlsterm.CA, error) {
	r.scas.mu.Lock()
	defer r.scas.mu.Unlock()
	if ca := r.scas.m[id]; ca != nil && slices.Equal(ca.Hosts, sortedCopy(hosts)) {
		return ca, nil
	}
	ca, err := tlsterm.LoadOrCreate(filepath.Join(r.opts.StateDir, "ca", "sessions", id), hosts)
	if err != nil {
		return nil, err
	}
	if r.scas.m == nil {
		r.scas.m = map[string]*tlsterm.CA{}
	}
	r.scas.m[id] = ca
	return ca, nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// forgetServiceCA drops a removed session's CA.
func (r *Runner) forgetServiceCA(id string) {
	r.scas.mu.Lock()
	delete(r.scas.m, id)
	r.scas.mu.Unlock()
	_ = os.RemoveAll(filepath.Join(r.opts.StateDir, "ca", "sessions", id))
}

// intercept is the egress proxy's Intercept: a CONNECT to port 443 of one
// of a session's service hosts, once its egress allowed it, is answered
// by the Runner with the session's CA, and each request inside judged by
// the service proxy.
func (r *Runner) intercept(id, host string, port int) (func(string, net.Conn), bool) {
	if port != 443 || r.services == nil {
		return nil, false
	}
	s, err := r.reload(id)
	if err != nil || len(s.Services) == 0 {
		return nil, false
	}
	hosts := r.serviceHosts(&s)
	if !slices.Contains(hosts, host) {
		return nil, false
	}
	ca, err := r.serviceCA(id, hosts)
	if err != nil {
		r.log.Warn("the session's CA for its service hosts", logkey.Session, id, logkey.Error, err)
		return nil, false
	}
	return func(session string, c net.Conn) { r.services.Serve(session, c, ca) }, true
}

// serviceEnv is what a box with grants has in its environment: the
// placeholders where the tools look for a token, a git credential helper
// that answers with the placeholder for each host, and the bundle of
// roots with the session's CA.
func serviceEnv(s *session.Session, secrets map[string]service.Secret) []string {
	if len(s.Services) == 0 {
		return nil
	}
	env := []string{"GIT_SSL_CAINFO=" + BoxCABundle, "SSL_CERT_FILE=" + BoxCABundle, "CURL_CA_BUNDLE=" + BoxCABundle,
		"GIT_TERMINAL_PROMPT=0"}
	var keys []string
	seenHost := map[string]bool{}
	for _, g := range s.Services {
		sec, ok := secrets[g.Secret]
		if !ok {
			continue
		}
		switch sec.Kind {
		case service.GitHub:
			if sec.Host == "github.com" {
				env = append(env, "GH_TOKEN="+g.Placeholder, "GITHUB_TOKEN="+g.Placeholder)
			} else {
				env = append(env, "GH_HOST="+sec.Host, "GH_ENTERPRISE_TOKEN="+g.Placeholder, "GITHUB_ENTERPRISE_TOKEN="+g.Placeholder)
			}
		case service.GitLab:
			env = append(env, "GITLAB_TOKEN="+g.Placeholder)
			if sec.Host != "gitlab.com" {
				env = append(env, "GITLAB_HOST="+sec.Host)
			}
		}
		if (sec.Kind == service.GitHub || sec.Kind == service.GitLab) && !seenHost[sec.Host] {
			seenHost[sec.Host] = true
			user := "x-access-token"
			if sec.Kind == service.GitLab {
				user = "oauth2"
			}
			keys = append(keys, "credential.https://"+sec.Host+".helper",
				"!f() { test \"$1\" = get && printf 'username="+user+"\\npassword="+g.Placeholder+"\\n'; }; f")
		}
	}
	if len(keys) > 0 {
		env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(keys)/2))
		for i := 0; i < len(keys); i += 2 {
			env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i/2, keys[i]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i/2, keys[i+1]))
		}
	}
	return env
}

// serviceFiles are the files a box with grants gets: the session's CA,
// and the bundle of the system's roots with it.
func (r *Runner) serviceFiles(s *session.Session) ([]channel.PutFile, error) {
	if len(s.Services) == 0 {
		return nil, nil
	}
	ss, err := r.serviceSession(s.ID)
	if err != nil {
		return nil, err
	}
	ca, err := r.serviceCA(s.ID, servicep.Hosts(ss.Bounds))
	if err != nil {
		return nil, err
	}
	bundle, err := os.ReadFile(systemRoots)
	if err != nil {
		r.log.Warn("no system roots for the box's bundle; it trusts the session's CA alone", logkey.Error, err)
	}
	if len(bundle) > 0 && !strings.HasSuffix(string(bundle), "\n") {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, ca.PEM...)
	return []channel.PutFile{{Path: BoxServicesCAFile, Data: ca.PEM}, {Path: BoxCABundle, Data: bundle}}, nil
}

// serviceEnvOf is s's service environment (serviceEnv), from its
// grants and its owner's secrets as they are now; none if they cannot be
// read (the box then holds no placeholder, and its requests are refused
// with the reason).
func (r *Runner) serviceEnvOf(s *session.Session) []string {
	if len(s.Services) == 0 {
		return nil
	}
	ss, err := r.serviceSession(s.ID)
	if err != nil {
		r.log.Warn("the session's service credentials", logkey.Session, s.ID, logkey.Error, err)
		return nil
	}
	secrets := map[string]service.Secret{}
	for _, b := range ss.Bounds {
		secrets[b.Secret.Name] = service.Secret{Name: b.Secret.Name, Kind: b.Secret.Kind, Host: b.Secret.Host} // no value
	}
	return serviceEnv(s, secrets)
}
