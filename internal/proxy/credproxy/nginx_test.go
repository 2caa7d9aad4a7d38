package credproxy

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// nginxConf is the reference nginx: the same job as paddock's proxy reduced
// to what nginx can express — replace the client's Authorization with the
// owner's, keep-alive to the upstream, no buffering so SSE events pass as
// they come. It checks no token and routes nothing, so it does less work
// than paddock per request; the comparison is against that lower bound.
const nginxConf = `%s
worker_processes auto;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  upstream api { server %[3]s; keepalive 256; }
  server {
    listen 127.0.0.1:%[4]d;
    location / {
      proxy_pass http://api;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer %[5]s";
      proxy_set_header X-Api-Key "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`

// startNginx runs nginx in the foreground as a reverse proxy to upstream
// (host:port) that puts credential in Authorization, and returns its base
// URL. It is stopped when tb ends.
func startNginx(tb testing.TB, upstream, credential string) string {
	base, _ := startNginxPID(tb, upstream, credential)
	return base
}

// startNginxPID is startNginx that also returns the master's pid.
func startNginxPID(tb testing.TB, upstream, credential string) (string, int) {
	tb.Helper()
	bin := "/usr/sbin/nginx"
	if _, err := os.Stat(bin); err != nil {
		bin = testenv.LookPath(tb, "nginx")
	}
	dir := tb.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	user := "" // unprivileged: nginx runs as us
	if os.Geteuid() == 0 {
		user = "user root;" // the workers must reach the test's temp dir
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, dir, upstream, port, credential), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Fatalf("nginx exited: %v\n%s%s", err, out.String(), log)
		default:
		}
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return base, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nginx did not listen on %s\n%s", base, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNginxReference keeps the benchmark's nginx honest: it swaps the
// credential and streams SSE unbuffered, like paddock's proxy.
func TestNginxReference(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	var mu sync.Mutex
	var got []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		benchUpstream(3, time.Millisecond).ServeHTTP(w, r)
	})
	env := newBenchEnv(t, up)
	defer env.close()
	ngx := startNginx(t, strings.TrimPrefix(env.direct, "http://"), "sk-fake-bench")
	hdr := env.auth.Clone()
	hdr.Set("X-Api-Key", "client-supplied")
	d := latencies(t, http.DefaultClient, ngx, hdr, 2, 4)
	if len(d) != 4 {
		t.Fatalf("latencies: %d", len(d))
	}
	ev := eventDelays(t, http.DefaultClient, ngx, hdr, 2)
	if len(ev) != 6 {
		t.Errorf("SSE through nginx: %d events, want 6", len(ev))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if g != "Bearer sk-fake-bench|" {
			t.Errorf("upstream saw credentials %q, want only the owner's", g)
		}
	}
	if len(got) != 6 {
		t.Errorf("upstream saw %d requests, want 6", len(got))
	}
}
