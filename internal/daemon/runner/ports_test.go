package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestPorts: on each backend a box port published with paddock port
// answers on the host's loopback while the session runs (a dev server
// started in the box after the port was published included), through
// the channel; nothing answers once the session sleeps; the wake opens
// the same host port again; conflicts and a taken host port are refused
// with the reason; rm takes the port back.
func TestPorts(t *testing.T) {
	backends := testBackends(t)
	srvBin, err := os.ReadFile(testenv.PreviewServer(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"local", "docker"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			cfg := config.Default()
			cfg.Proxy.Listen = "off"
			cfg.Web.Listen = "off"
			logs := &testenv.Buffer{}
			r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
				Log: slog.New(slog.NewJSONHandler(logs, nil)), Backends: map[string]sandbox.Backend{name: backends[name]}})
			if err != nil {
				t.Fatal(err)
			}
			serve(t, r)
			ctx := context.Background()
			s, err := r.CreateSession(ctx, api.CreateRequest{Name: "pv", Backend: name, Egress: "offline"})
			if err != nil {
				t.Fatalf("%v\n%s", err, logs.String())
			}
			defer r.RemoveSession(ctx, s.ID, false)

			s, err = r.Publish(ctx, "pv", api.PortRequest{Box: 5173})
			if err != nil || len(s.Ports) != 1 || !s.Ports[0].Open || s.Ports[0].Host < 1024 {
				t.Fatalf("publish: %+v %v", s.Ports, err)
			}
			host := s.Ports[0].Host
			url := "http://127.0.0.1:" + strconv.Itoa(host)
			// Nothing listens in the box yet: the connection closes.
			if _, err := http.Get(url + "/request"); err == nil {
				t.Fatal("an answer before anything listens in the box")
			}
			startServer := func() {
				t.Helper()
				bin := sandbox.HomeDir + "/previewsrv"
				p, err := r.Exec(ctx, s.ID, channel.ExecOptions{Argv: []string{"sh", "-c", "cat > " + bin + " && chmod 0755 " + bin}})
				if err != nil {
					t.Fatal(err)
				}
				p.Write(srvBin)
				p.CloseStdin()
				if code, err := p.Wait(); code != 0 || err != nil {
					t.Fatalf("put the server in the box: %d %v", code, err)
				}
				srv, err := r.Exec(ctx, s.ID, channel.ExecOptions{Argv: []string{bin, "-port", "5173"}, Stdout: io.Discard, Stderr: io.Discard})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { srv.Close() })
			}
			startServer()
			waitBody := func(path, want string) {
				t.Helper()
				var last string
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
					resp, err := http.Get(url + path)
					if err != nil {
						last = err.Error()
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if last = string(b); strings.Contains(last, want) {
						return
					}
				}
				t.Fatalf("%s%s never said %q: %s\n%s", url, path, want, last, logs.String())
			}
			waitBody("/request", "host=127.0.0.1:"+strconv.Itoa(host))
			waitBody("/", "served from the box")

			// Conflicts: the box port elsewhere, a host port taken.
			if _, err := r.Publish(ctx, "pv", api.PortRequest{Box: 5173, Host: host + 1}); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "paddock port rm pv 5173") {
				t.Fatalf("the same box port on another host port: %v", err)
			}
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			tp := taken.Addr().(*net.TCPAddr).Port
			if _, err := r.Publish(ctx, "pv", api.PortRequest{Box: 8080, Host: tp}); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "in use") {
				t.Fatalf("a host port in use: %v", err)
			}
			if ps, _ := r.Ports(ctx, "pv"); len(ps) != 1 {
				t.Fatalf("a refused port was recorded: %+v", ps)
			}

			// Asleep: nothing answers; the record keeps the port.
			if _, err := r.Sleep(ctx, "pv"); err != nil {
				t.Fatal(err)
			}
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(host), time.Second); err == nil {
				c.Close()
				t.Fatal("the host port still listens while the session sleeps")
			}
			if ps, _ := r.Ports(ctx, "pv"); len(ps) != 1 || ps[0].Open || ps[0].Host != host {
				t.Fatalf("ports while asleep: %+v", ps)
			}
			// Awake: the same host port, to a server started again.
			if _, err := r.Wake(ctx, "pv"); err != nil {
				t.Fatalf("wake: %v\n%s", err, logs.String())
			}
			if ps, _ := r.Ports(ctx, "pv"); len(ps) != 1 || !ps[0].Open || ps[0].Host != host {
				t.Fatalf("ports after the wake: %+v", ps)
			}
			s, _ = r.Session(ctx, "pv")
			startServer()
			waitBody("/", "served from the box")

			if _, err := r.Unpublish(ctx, "pv", 5173); err != nil {
				t.Fatal(err)
			}
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(host), time.Second); err == nil {
				c.Close()
				t.Fatal("the host port listens after rm")
			}
			if _, err := r.Unpublish(ctx, "pv", 5173); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("rm of a port not published: %v", err)
			}
		})
	}
}
