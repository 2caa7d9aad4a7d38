// Package claudecode knows the pinned Claude Code CLI: its version, where
// paddock keeps it (<state-dir>/cli/<version>/), how to install it from npm
// and how to check that a binary is the pinned one.
package claudecode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/errdefs"
)

// PinnedVersion is the Claude Code version this paddock runs and tests.
// Change it only together with a passing `paddock smoke`.
const PinnedVersion = "2.1.328"

// Package is the npm package name.
const Package = "@anthropic-ai/claude-code"

// Dir is where a version is installed under a state directory.
func Dir(stateDir, version string) string { return filepath.Join(stateDir, "cli", version) }

// BinIn is the binary inside an install directory. The npm package's
// bin/claude.exe is the native executable itself (no Node at run time).
func BinIn(dir string) string {
	return filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe")
}

// Version runs `claude --version` and returns the version it reports.
func Version(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"HOME=" + os.TempDir(), "DISABLE_AUTOUPDATER=1", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	// "2.1.328 (Claude Code)"
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	return v, nil
}

// Verify checks that bin reports want.
func Verify(ctx context.Context, bin, want string) error {
	got, err := Version(ctx, bin)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s reports version %q, not the pinned %q: %w", bin, got, want, errdefs.ErrConflict)
	}
	return nil
}

// Install puts version into dir with npm (never @latest: the version is
// exact), then verifies it. An existing verified install is kept.
func Install(ctx context.Context, dir, version string) (string, error) {
	if version == "" || strings.ContainsAny(version, "^~*<>= ") || version == "latest" {
		return "", fmt.Errorf("claude code version %q is not an exact version: %w", version, errdefs.ErrInvalid)
	}
	bin := BinIn(dir)
	if Verify(ctx, bin, version) == nil {
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is needed to install Claude Code %s (apt-get install npm): %w", version, errdefs.ErrUnavailable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", dir, Package+"@"+version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %w\n%s", Package, version, err, tail(out.String(), 2000))
	}
	if err := Verify(ctx, bin, version); err != nil {
		return "", errors.Join(err, fmt.Errorf("npm output:\n%s", tail(out.String(), 2000)))
	}
	return bin, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
