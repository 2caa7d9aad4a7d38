package tlsterm

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

const host = "api.anthropic.com"

func TestCAMadeOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	a, err := LoadOrCreate(dir, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	b, err := LoadOrCreate(dir, []string{host})
	if err != nil || !b.Cert.Equal(a.Cert) {
		t.Fatalf("a second load made another CA: %v", err)
	}
	// Another set of hosts: a new CA, constrained to them.
	c, err := LoadOrCreate(dir, []string{host, "example.test"})
	if err != nil || c.Cert.Equal(a.Cert) || len(c.Cert.PermittedDNSDomains) != 2 {
		t.Fatalf("new hosts kept the old CA: %v", err)
	}
	// A key others may read is refused.
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	if _, err := LoadOrCreate(dir, []string{host, "example.test"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a 0644 key: %v", err)
	}
}

// TestOnlyItsHosts: a client trusting the CA completes a handshake for the
// host and for nothing else: not by SNI (the Runner refuses), and not by
// a leaf made anyway (the name constraint refuses it at the client).
func TestOnlyItsHosts(t *testing.T) {
	ca, err := LoadOrCreate(filepath.Join(t.TempDir(), "ca"), []string{host})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("the CA's PEM")
	}
	handshake := func(sni string) error {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		srv := tls.Server(a, ca.ServerConfig())
		go srv.Handshake()
		cl := tls.Client(b, &tls.Config{ServerName: sni, RootCAs: pool})
		return cl.Handshake()
	}
	if err := handshake(host); err != nil {
		t.Fatalf("the host: %v", err)
	}
	for _, other := range []string{"platform.claude.com", "evil.example", "anthropic.com"} {
		if err := handshake(other); err == nil {
			t.Fatalf("a handshake for %s", other)
		}
	}
	if _, err := ca.Leaf("evil.example"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), host+" only") {
		t.Fatalf("a leaf for another host: %v", err)
	}
	// Even a leaf the key signs for another name fails verification: the
	// name constraint.
	ca.Hosts = append(ca.Hosts, "evil.example")
	forged, err := ca.Leaf("evil.example")
	if err != nil {
		t.Fatal(err)
	}
	_, err = forged.Leaf.Verify(x509.VerifyOptions{DNSName: "evil.example", Roots: pool})
	if err == nil || !strings.Contains(err.Error(), "constraint") {
		t.Fatalf("a leaf outside the constraint verified: %v", err)
	}
}
