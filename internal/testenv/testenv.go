// Package testenv is test support: it finds the real components the
// integration tests need and decides whether a missing one skips the test
// or fails it. CI sets PADDOCK_REQUIRE_INTEGRATION=1, so there nothing is
// skipped silently: a missing component is a failure.
package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/paddockhq/paddock/internal/claudecode"
)

// RequireEnv names the variable that turns skips into failures.
const RequireEnv = "PADDOCK_REQUIRE_INTEGRATION"

// ClaudeEnv names the variable that points at a pinned claude binary.
const ClaudeEnv = "PADDOCK_CLAUDE_BIN"

// CacheDir is where `make test` installs the pinned CLI for tests.
const CacheDir = "/var/cache/paddock/cli"

// Missing skips the test with reason, or fails it under PADDOCK_REQUIRE_INTEGRATION.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("required for the integration suite (%s is set): %s", RequireEnv, reason)
	}
	t.Skip(reason)
}

// Claude returns the path of the pinned Claude Code binary.
func Claude(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	cands := []string{os.Getenv(ClaudeEnv), claudecode.BinIn(CacheDir + "/" + claudecode.PinnedVersion)}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if err := claudecode.Verify(context.Background(), c, claudecode.PinnedVersion); err == nil {
			return c
		}
	}
	Missing(t, "the pinned Claude Code "+claudecode.PinnedVersion+" is not installed; run `make deps` or set "+ClaudeEnv)
	return ""
}

// Root skips or fails unless the test runs as root.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root")
	}
}

// LookPath finds a program or skips/fails.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed")
	}
	return p
}
