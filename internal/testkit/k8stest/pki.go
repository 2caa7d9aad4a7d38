package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is one run's certificates: a CA made for the run, and every key and
// certificate the components use, as PEM files in one directory. Nothing
// outlives the run; ECDSA P-256 keeps generation to milliseconds.
type pki struct {
	dir string
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
	// caPEM is the CA certificate, for kubeconfigs and rest.Config.
	caPEM []byte
}

// leaf describes one certificate the CA signs.
type leaf struct {
	name   string // file stem: <name>.crt, <name>.key
	cn     string
	orgs   []string
	server bool // serving (with SANs) rather than client
	dns    []string
	ips    []net.IP
}

// newPKI makes the CA and writes ca.crt in dir. The CA's key stays in
// memory only: nothing signs for the run once it has started.
func newPKI(dir string) (*pki, error) {
	key, _, err := newKey()
	if err != nil {
		return nil, err
	}
	// Valid an hour back (clock skew between nothing, but cheap) and a
	// week ahead (no test run lasts that long).
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "paddock-k8stest-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	return p, os.WriteFile(p.path("ca.crt"), p.caPEM, 0o644)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issue signs l and writes <name>.crt and <name>.key (0600); it returns
// both PEMs, for the kubeconfigs that carry them inline.
func (p *pki) issue(l leaf) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	// A certificate is for clients or for a server, never both: the
	// components check the extended key usage.
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     l.dns,
		IPAddresses:  l.ips,
	}
	if l.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(p.path(l.name+".crt"), certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, os.WriteFile(p.path(l.name+".key"), keyPEM, 0o600)
}

// serviceAccountKey writes sa.key and sa.pub: the key pair the API server
// signs and checks service account tokens with.
// (ES256: the API server takes ECDSA keys as well as RSA ones.)
func (p *pki) serviceAccountKey() error {
	key, keyPEM, err := newKey()
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path("sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// kubeconfig writes a kubeconfig file for server with the client
// certificate and key given, all inline (0600: it holds the key), so the
// file alone reaches the cluster, e.g. from kubectl or the Runner.
func (p *pki) kubeconfig(file, server string, certPEM, keyPEM []byte) error {
	b64 := base64.StdEncoding.EncodeToString
	s := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: k8stest
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: k8stest
  context:
    cluster: k8stest
    user: k8stest
current-context: k8stest
`, server, b64(p.caPEM), b64(certPEM), b64(keyPEM))
	return os.WriteFile(file, []byte(s), 0o600)
}

// newKey makes an ECDSA P-256 key and its PEM ("EC PRIVATE KEY", which
// every component reads).
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// serial is a random positive serial number.
func serial() *big.Int {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand's contract since Go 1.24)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
