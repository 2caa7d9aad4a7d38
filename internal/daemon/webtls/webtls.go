// Package webtls is the web page's TLS: the owner's certificate and key
// (web.tls_cert, web.tls_key), or one paddock makes and keeps in the
// state directory (web.tls = "self-signed"), whose SHA-256 fingerprint the
// Runner prints so that a person checks it on their first visit.
//
// The self-signed certificate is an ECDSA P-256 key and a certificate for
// the names the page is reached by (web.hosts, the listen address, and
// localhost), good for a year. It is made again when one of those names
// is missing from it or it has less than 30 days left; the key file is
// 0600 in a 0700 directory, and never leaves it.
package webtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/daemon/config"
)

// Dir is where the self-signed certificate is kept, under the state
// directory.
const Dir = "web-tls"

// Lifetimes of a self-signed certificate.
const (
	validFor  = 365 * 24 * time.Hour
	renewLeft = 30 * 24 * time.Hour
)

// Config is the TLS configuration of the page, and its certificate's
// fingerprint (SHA-256 of the leaf, as browsers show it: AB:CD:…).
type Config struct {
	TLS         *tls.Config
	Fingerprint string
	// Made says the self-signed certificate was made by this call.
	Made bool
}

// Load returns the page's TLS for w (w.TLSOn()), listening on listen.
func Load(w config.Web, stateDir, listen string, now time.Time) (Config, error) {
	var cert tls.Certificate
	made := false
	var err error
	if w.Cert != "" {
		if cert, err = tls.LoadX509KeyPair(w.Cert, w.Key); err != nil {
			return Config{}, fmt.Errorf("web.tls_cert and web.tls_key: %w", err)
		}
	} else {
		if cert, made, err = selfSigned(filepath.Join(stateDir, Dir), Names(w, listen), now); err != nil {
			return Config{}, err
		}
	}
	return Config{
		TLS: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			// HTTP/1.1 only: the terminal's WebSocket upgrades over it.
			NextProtos: []string{"http/1.1"},
		},
		Fingerprint: Fingerprint(cert.Certificate[0]),
		Made:        made,
	}, nil
}

// Fingerprint is the SHA-256 of a DER certificate as AB:CD:….
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// Names are what the page is reached by: web.hosts, the listen address
// when it names one, localhost and 127.0.0.1.
func Names(w config.Web, listen string) []string {
	names := append([]string{}, w.Hosts...)
	if h, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
			names = append(names, ip.String())
		}
	}
	names = append(names, "localhost", "127.0.0.1")
	slices.Sort(names)
	return slices.Compact(names)
}

// selfSigned loads the certificate kept in dir if it is still good for
// names, or makes one.
func selfSigned(dir string, names []string, now time.Time) (tls.Certificate, bool, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// One kept that is unreadable, for other names, or near its end is
	// made again (and Made says so).
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil && c.Leaf != nil && covers(c.Leaf, names) && now.Add(renewLeft).Before(c.Leaf.NotAfter) {
		return c, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return tls.Certificate{}, false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "paddock " + names[0], Organization: []string{"paddock (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := atomicfile.Write(certFile, certPEM, 0o644); err != nil {
		return tls.Certificate{}, false, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	return c, true, err
}

// covers says the certificate names every one of names.
func covers(c *x509.Certificate, names []string) bool {
	for _, n := range names {
		if c.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}
