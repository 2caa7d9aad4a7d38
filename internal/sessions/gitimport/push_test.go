package gitimport

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// TestPushRunsNoHook: Push sends the branch to an https remote (real git
// http-backend) with the token it is given, as the repository's owner,
// and runs none of the repository's programs: no pre-push hook, no
// credential helper of its config. Not https: refused.
func TestPushRunsNoHook(t *testing.T) {
	f := newFixture(t)
	const token = "tok-0123456789"
	up := filepath.Join(f.dir, "up")
	f.git(f.dir, "init", "-q", "--bare", up+"/r.git")
	f.git(up+"/r.git", "config", "http.receivepack", "true")
	gitExec, _ := exec.LookPath("git")
	backend := &cgi.Handler{Path: gitExec, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + up, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=x"}}
	var auths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)) {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	caFile := filepath.Join(f.dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)

	marks, prog := f.markers("exit 0")
	if err := os.WriteFile(filepath.Join(f.gitDir, "hooks", "pre-push"), []byte("#!/bin/sh\ntouch '"+filepath.Join(marks, "pre-push")+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), "credential.helper", prog("credential-helper"))
	f.git(f.dir, "config", "-f", filepath.Join(f.gitDir, "config"), "core.fsmonitor", prog("fsmonitor"))
	f.chown()
	o := f.opts("x")
	p := PushOptions{URL: srv.URL + "/r.git", Src: "refs/heads/main", Dst: "paddock/x", User: "x-access-token", Token: secret.New(token), CAFile: caFile}
	out, err := Push(context.Background(), o, p)
	if err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if got := f.git(up+"/r.git", "rev-parse", "refs/heads/paddock/x"); got != f.base {
		t.Fatalf("the remote's branch %q, want %q", got, f.base)
	}
	if m, _ := filepath.Glob(filepath.Join(marks, "*")); len(m) > 0 {
		t.Fatalf("the push ran the repository's programs: %v", m)
	}
	if strings.Contains(out, token) {
		t.Fatalf("the token in git's report: %s", out)
	}
	for _, bad := range []PushOptions{{URL: "http://example.com/r.git", Src: "main", Dst: "x"}, {URL: "ext::sh -c touch% /tmp/x", Src: "main", Dst: "x"},
		{URL: p.URL, Src: "--mirror", Dst: "x"}, {URL: p.URL, Src: "main:main", Dst: "x"}} {
		if _, err := Push(context.Background(), o, bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
