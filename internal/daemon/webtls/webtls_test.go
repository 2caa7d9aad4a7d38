package webtls

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/config"
)

// TestSelfSigned: the certificate is made once for the page's names, kept
// (0600 key, 0700 directory) and reused with the same fingerprint, made
// again for a new name or near its end; a client that pins the
// fingerprint connects, and the names verify.
func TestSelfSigned(t *testing.T) {
	dir := t.TempDir()
	w := config.Web{Listen: "0.0.0.0:7777", TLS: config.TLSSelfSigned, Hosts: []string{"paddock.test"}}
	now := time.Now()
	a, err := Load(w, dir, w.Listen, now)
	if err != nil || !a.Made || len(a.Fingerprint) != 95 {
		t.Fatalf("first: %+v %v", a, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, Dir, "key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, Dir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v %v", fi.Mode(), err)
	}
	b, err := Load(w, dir, w.Listen, now.Add(time.Hour))
	if err != nil || b.Made || b.Fingerprint != a.Fingerprint {
		t.Fatalf("again: made %v, %s vs %s, %v", b.Made, b.Fingerprint, a.Fingerprint, err)
	}
	leaf, _ := x509.ParseCertificate(b.TLS.Certificates[0].Certificate[0])
	for _, n := range []string{"paddock.test", "localhost", "127.0.0.1"} {
		if err := leaf.VerifyHostname(n); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	w.Hosts = append(w.Hosts, "other.test")
	if c, _ := Load(w, dir, w.Listen, now); !c.Made || c.Fingerprint == a.Fingerprint {
		t.Fatal("a new name did not make a new certificate")
	}
	if c, _ := Load(w, dir, w.Listen, now.Add(340*24*time.Hour)); !c.Made {
		t.Fatal("a certificate near its end was kept")
	}

	// A client pinning the fingerprint gets through.
	c, _ := Load(w, dir, w.Listen, now)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.TLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
		if Fingerprint(cs.PeerCertificates[0].Raw) != c.Fingerprint {
			t.Error("another certificate")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestOwnersCertificate: the owner's files are used as they are; a wrong
// path is an error naming the keys.
func TestOwnersCertificate(t *testing.T) {
	dir := t.TempDir()
	made, err := Load(config.Web{TLS: config.TLSSelfSigned}, dir, "127.0.0.1:0", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w := config.Web{Cert: filepath.Join(dir, Dir, "cert.pem"), Key: filepath.Join(dir, Dir, "key.pem")}
	c, err := Load(w, t.TempDir(), "127.0.0.1:0", time.Now())
	if err != nil || c.Made || c.Fingerprint != made.Fingerprint {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Load(config.Web{Cert: "/nonexistent/c", Key: "/nonexistent/k"}, dir, "", time.Now()); err == nil || !strings.Contains(err.Error(), "web.tls_cert") {
		t.Fatalf("missing files: %v", err)
	}
}
