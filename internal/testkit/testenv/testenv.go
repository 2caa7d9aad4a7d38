// Package testenv is test support: it finds the real components the
// integration tests need and decides whether a missing one skips the test
// or fails it. CI sets PADDOCK_REQUIRE_INTEGRATION=1, so there nothing is
// skipped silently: a missing component is a failure.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
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

// PaddockBinary builds static paddock and paddock-guest binaries, side by
// side as make build leaves them, once per test process, and returns
// paddock's path.
func PaddockBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "paddock-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		for _, c := range []struct{ out, pkg string }{{"paddock", "./cmd/paddock"}, {"paddock-guest", "./cmd/paddock-guest"}} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, c.out), c.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", c.pkg, err, b)
				return
			}
		}
		builtBin = filepath.Join(dir, "paddock")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var (
	previewOnce sync.Once
	previewErr  error
)

// PreviewServer builds, once per test process, the tests' dev server
// (internal/testkit/previewsrv: a page, a WebSocket echo, the request it
// got) as a static binary beside PaddockBinary, and returns its path: what
// the tests of previews run in a box.
func PreviewServer(t testing.TB) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(PaddockBinary(t)), "previewsrv")
	previewOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			previewErr = err
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./internal/testkit/previewsrv")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			previewErr = fmt.Errorf("go build previewsrv: %v\n%s", err, b)
		}
	})
	if previewErr != nil {
		t.Fatal(previewErr)
	}
	return out
}

// OlderGuestBinary builds, once per test process, the slim guest as a
// guest from before the put and selftest streams answers them (the
// paddock_pre21guest build tag), beside PaddockBinary, and returns its
// path: what a box made from an older image runs.
func OlderGuestBinary(t testing.TB) string {
	t.Helper()
	dir := filepath.Dir(PaddockBinary(t))
	olderOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			olderErr = err
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "paddock_pre21guest", "-o", filepath.Join(dir, "paddock-guest-pre21"), "./cmd/paddock-guest")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			olderErr = fmt.Errorf("go build the older guest: %v\n%s", err, b)
		}
	})
	if olderErr != nil {
		t.Fatal(olderErr)
	}
	return filepath.Join(dir, "paddock-guest-pre21")
}

var (
	olderOnce sync.Once
	olderErr  error
)

// GuestBinary returns the slim guest binary (cmd/paddock-guest) built
// beside PaddockBinary: what boxes carry as their paddock.
func GuestBinary(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(PaddockBinary(t)), "paddock-guest")
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TraversableTempDir is a temporary directory that other uids may pass
// through (mode 0711 on it and every parent the test owns), as the local
// backend's unprivileged box uids must.
func TraversableTempDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o711)
	}
	return d
}

// UniqueOwner is a fresh owner id for a backend under test, so tests that
// share the Docker daemon never see each other's objects.
func UniqueOwner(t testing.TB) string {
	return fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// Buffer is a goroutine-safe bytes.Buffer for logs and output in tests.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }

// String returns what was written so far.
func (s *Buffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
