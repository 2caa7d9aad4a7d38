// Package claudecode knows the pinned Claude Code CLI: its version, where
// paddock keeps it (<state-dir>/cli/<version>/), how to install it from npm
// and how to check that a binary is the pinned one.
package claudecode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// PinnedVersion is the Claude Code version this paddock runs and tests.
// Change it only together with a passing `paddock smoke`.
const PinnedVersion = "2.1.328"

// Package is the npm package name.
const Package = "@anthropic-ai/claude-code"

// exactVersion is an exact npm version: no range, no tag.
var exactVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$`)

// IsExactVersion reports whether v names one published version exactly
// (like 2.1.328), never a range or a tag such as latest.
func IsExactVersion(v string) bool { return exactVersion.MatchString(v) }

// CheckAllowed says whether a Runner may run (and so install from npm)
// Claude Code v for a session: "" (the pinned one), PinnedVersion, or one
// of allowed (claude.allowed_versions, an admin's list). Anything else is
// refused, naming what is allowed and how an admin adds a version
// (errdefs.ErrForbidden; ErrInvalid for what is no exact version). It is
// checked before anything is installed or recorded.
func CheckAllowed(v string, allowed []string) error {
	if v == "" || v == PinnedVersion || slices.Contains(allowed, v) {
		return nil
	}
	these := "the pinned " + PinnedVersion
	if len(allowed) > 0 {
		these += " and " + strings.Join(allowed, ", ") + " (claude.allowed_versions)"
	}
	if !IsExactVersion(v) {
		return fmt.Errorf("claude code version %q is not an exact version like %s; this Runner runs Claude Code %s: %w", v, PinnedVersion, these, errdefs.ErrInvalid)
	}
	return fmt.Errorf("this Runner runs Claude Code %s only, not %s: leave out --claude-version, or ask an admin to add it to the Runner's config (allowed_versions = [\"%s\"] under [claude]) and restart the Runner: %w",
		these, v, v, errdefs.ErrForbidden)
}

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
	return InstallShowing(ctx, dir, version, nil)
}

// InstallShowing is Install that streams npm's progress to progress as it
// comes, one line each (npm's http log: every package fetched, with its
// status and time), indented below a line that says what is installed. A
// nil progress shows nothing; npm's output is in the error either way.
func InstallShowing(ctx context.Context, dir, version string, progress io.Writer) (string, error) {
	if version == "" || strings.ContainsAny(version, "^~*<>= ") || version == "latest" {
		return "", fmt.Errorf("claude code version %q is not an exact version: %w", version, errdefs.ErrInvalid)
	}
	bin := BinIn(dir)
	if Verify(ctx, bin, version) == nil {
		if progress != nil {
			fmt.Fprintf(progress, "Claude Code %s: installed earlier in %s (verified)\n", version, dir)
		}
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is needed to install Claude Code %s (apt-get install npm): %w", version, errdefs.ErrUnavailable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	args := []string{"install", "--no-audit", "--no-fund", "--prefix", dir}
	var out bytes.Buffer
	var w io.Writer = &out
	if progress != nil {
		// http: a line per request, so a slow registry shows as such.
		args = append(args, "--loglevel", "http", "--progress", "false")
		lw := &lineWriter{w: progress, prefix: "  "}
		defer lw.flush()
		w = io.MultiWriter(&out, lw)
		fmt.Fprintf(progress, "installing Claude Code %s with npm into %s\n", version, dir)
	}
	cmd := exec.CommandContext(ctx, npm, append(args, Package+"@"+version)...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %w\n%s", Package, version, err, tail(out.String(), 2000))
	}
	if err := Verify(ctx, bin, version); err != nil {
		return "", errors.Join(err, fmt.Errorf("npm output:\n%s", tail(out.String(), 2000)))
	}
	return bin, nil
}

// lineWriter writes whole lines, each with a prefix; the last partial
// line waits for its newline (or flush).
type lineWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if _, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, bytes.TrimRight(l.buf[:i], "\r")); err != nil {
			return len(p), err
		}
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.buf = nil
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
