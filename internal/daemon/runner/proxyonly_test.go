package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
)

// proxyOnly is a backend whose boxes must never hold the credential (as
// kubernetes'); any other call than Capabilities would panic on the nil
// embedded Backend, so the test also shows nothing else was asked.
type proxyOnly struct{ sandbox.Backend }

func (proxyOnly) Capabilities(context.Context) sandbox.Capabilities {
	return sandbox.Capabilities{Name: "cluster", ProxyOnly: true}
}

// TestDirectRefusedOnProxyOnlyBackend: a direct-mode session on a
// proxy-only backend is refused, with the reason, before any box is made.
func TestDirectRefusedOnProxyOnlyBackend(t *testing.T) {
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen = "off", "off"
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg,
		Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}, Backends: map[string]sandbox.Backend{"cluster": proxyOnly{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.CreateSession(context.Background(), api.CreateRequest{Name: "dx", Backend: "cluster", CredentialMode: "direct"})
	if !errdefs.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "proxy-mode sessions only") {
		t.Fatalf("direct mode on a proxy-only backend: %v", err)
	}
}
