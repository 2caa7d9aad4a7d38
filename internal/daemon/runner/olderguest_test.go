package runner

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestStartWithAnOlderGuest: a box whose guest predates the put and
// selftest streams (a box from an older image) still starts claude, by
// the old ways: the self-test as a process in the box, the seeded config
// written by the start script from its stdin. Claude then answers through
// the proxy as in any session.
func TestStartWithAnOlderGuest(t *testing.T) {
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	lb, err := local.New(local.Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"),
		GuestBinary: testenv.OlderGuestBinary(t), ClaudeBinary: testenv.Claude(t)})
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeapi.New(ownerOAuth)
	up := httptest.NewServer(fake)
	defer up.Close()
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Anthropic.Upstream = up.URL
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		Backends: map[string]sandbox.Backend{"local": lb}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ctx := context.Background()
	s, err := r.CreateSession(ctx, api.CreateRequest{Name: "older", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(ctx, s.ID, false)
	// It is an older guest: the new streams are refused.
	if _, err := r.getLive(s.ID).link.Client.SelfTest(BoxEgressAddr, time.Now().Add(10*time.Second)); err == nil || !strings.Contains(err.Error(), "unknown stream type") {
		t.Fatalf("the guest is not an older one: %v", err)
	}
	// The seeded config was written by the start script.
	var out strings.Builder
	p, err := r.Exec(ctx, s.ID, channel.ExecOptions{Argv: []string{"cat", boxClaudeJSON}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	var cj map[string]any
	if code, _ := p.Wait(); code != 0 || json.Unmarshal([]byte(out.String()), &cj) != nil || cj["hasCompletedOnboarding"] != true {
		t.Fatalf("the seeded config in the box: exit %d: %s", code, out.String())
	}
	// Claude runs with its token, and the proxy takes it.
	if code, body := proxied(t, r, boxToken(t, r, s.ID)); code != 200 {
		t.Fatalf("a request with the box's token: %d %s", code, body)
	}
}
