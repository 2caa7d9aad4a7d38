package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuestStaysSmall keeps paddock-guest slim: every Claude Code hook,
// self-test and file put in a box starts it, and every box keeps one
// running, so what it links is paid in start time and memory per box. It
// may link the standard library (but not its HTTP, TLS or crypto stacks)
// and, beyond that, only the packages listed here. A new import must be
// worth its cost: add it here on purpose.
func TestGuestStaysSmall(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/paddockhq/paddock/cmd/paddock-guest":          true,
		"github.com/paddockhq/paddock/internal/box/guest":         true,
		"github.com/paddockhq/paddock/internal/box/channel":       true,
		"github.com/paddockhq/paddock/internal/sessions/activity": true,
		"github.com/paddockhq/paddock/internal/sessions/boxfiles": true,
		"github.com/paddockhq/paddock/internal/box/seccomp":       true,
		"github.com/paddockhq/paddock/internal/base/errdefs":      true,
		"github.com/paddockhq/paddock/internal/base/version":      true,
		"github.com/hashicorp/yamux":                              true,
		"golang.org/x/sys/unix":                                   true,
	}
	heavyStd := []string{"net/http", "crypto/tls", "crypto/x509", "compress/", "html/template", "text/template", "database/"}
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		std := !strings.Contains(first, ".")
		if std {
			for _, h := range heavyStd {
				if p == strings.TrimSuffix(h, "/") || strings.HasPrefix(p, h) {
					bad = append(bad, p)
				}
			}
			continue
		}
		if !allowed[p] {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("paddock-guest links packages it must not (see the test's comment): %s", strings.Join(bad, ", "))
	}
}
