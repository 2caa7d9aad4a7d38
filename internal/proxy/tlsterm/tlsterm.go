// Package tlsterm is the Runner's own certificate authority, for the one
// host whose TLS it terminates: the Anthropic API host that Claude Code
// calls directly (not through ANTHROPIC_BASE_URL) for a few features.
//
// The CA is made once per state directory: its key stays there (0600,
// never in a box, never sent anywhere), its certificate goes to boxes to
// trust (NODE_EXTRA_CA_CERTS). It is name-constrained to the terminated
// hosts, so even a stolen key could not vouch for any other name. Leaf
// certificates are made in memory, short-lived, per host.
package tlsterm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Files in the CA's directory.
const (
	CertFile = "ca.pem"     // the certificate, 0644: what boxes trust
	KeyFile  = "ca-key.pem" // the key, 0600: the Runner's alone
)

// CA signs leaf certificates for Hosts only.
type CA struct {
	Cert  *x509.Certificate
	PEM   []byte // Cert, PEM-encoded
	Hosts []string
	key   *ecdsa.PrivateKey
	now   func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadOrCreate reads the CA in dir, or makes one constrained to hosts.
// A CA whose constraints differ from hosts is made anew (the set of
// terminated hosts changed).
func LoadOrCreate(dir string, hosts []string) (*CA, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("a CA for no host: %w", errdefs.ErrInvalid)
	}
	if ca, err := load(dir, hosts); err == nil {
		return ca, nil
	} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errStale) {
		return nil, err
	}
	return create(dir, hosts)
}

var errStale = errors.New("the CA does not match the hosts")

func load(dir string, hosts []string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err
	}
	kf := filepath.Join(dir, KeyFile)
	fi, err := os.Stat(kf)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the CA key %s is mode %v; it must be 0600: %w", kf, fi.Mode().Perm(), errdefs.ErrForbidden)
	}
	keyPEM, err := os.ReadFile(kf)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("the CA in %s is damaged; remove %s and %s to make a new one: %w", dir, CertFile, KeyFile, errdefs.ErrInvalid)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA key: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, fmt.Errorf("the CA key does not match its certificate; remove both to make a new CA: %w", errdefs.ErrInvalid)
	}
	want := append([]string(nil), hosts...)
	slices.Sort(want)
	got := append([]string(nil), cert.PermittedDNSDomains...)
	slices.Sort(got)
	if !slices.Equal(want, got) || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return nil, errStale
	}
	return &CA{Cert: cert, PEM: certPEM, Hosts: want, key: key, now: time.Now, leaves: map[string]*tls.Certificate{}}, nil
}

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) }

func create(dir string, hosts []string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                sn,
		Subject:                     pkix.Name{CommonName: "paddock Runner CA (" + strings.Join(hosts, ", ") + " only)", Organization: []string{"paddock"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         append([]string(nil), hosts...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is never left behind.
	if err := atomicfile.Write(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := atomicfile.Write(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return load(dir, hosts)
}

// Leaf is a certificate for host, signed by the CA (7 days, remade when
// a day is left). Only the CA's hosts get one.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	if !slices.Contains(c.Hosts, host) {
		return nil, fmt.Errorf("paddock terminates TLS for %s only, not %q: %w", strings.Join(c.Hosts, ", "), host, errdefs.ErrForbidden)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if l := c.leaves[host]; l != nil && now.Add(24*time.Hour).Before(l.Leaf.NotAfter) {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	c.leaves[host] = l
	return l, nil
}

// ServerConfig terminates TLS for the CA's hosts: a ClientHello whose SNI
// is not one of them (or has none) fails the handshake. HTTP/1.1 only.
func (c *CA) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.Leaf(strings.ToLower(hi.ServerName))
		},
	}
}
