package credproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// serveListenRe finds the proxy's host address in `paddock serve`'s
// "paddock runner started" log line (logkey.Listen).
var serveListenRe = regexp.MustCompile(`listen=(127\.0\.0\.1:[0-9]+)`)

// servePrereqs says why the real Runner cannot run a local session here,
// or "" if it can: root, bubblewrap, tmux and the pinned Claude Code.
// It returns the claude binary to configure.
func servePrereqs() (claude, missing string) {
	if os.Geteuid() != 0 {
		return "", "not root"
	}
	for _, p := range []string{"bwrap", "tmux"} {
		if _, err := exec.LookPath(p); err != nil {
			return "", p + " is not installed"
		}
	}
	for _, c := range []string{os.Getenv(testenv.ClaudeEnv), claudecode.BinIn(testenv.CacheDir + "/" + claudecode.PinnedVersion)} {
		if c == "" {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			return c, ""
		}
	}
	return "", "the pinned Claude Code is not installed (make deps, or " + testenv.ClaudeEnv + ")"
}

// startPaddockServe runs the real `paddock serve` (testenv.PaddockBinary,
// or bin if not empty: another build, for a comparison in one run)
// with its defaults — decision log, metrics on its web listener — against
// upstream, starts one session on the local backend as a user would
// (`paddock run -d`), and returns the proxy's host URL, hdr with that
// session's own token (read in its box, as Claude Code gets it), and the
// Runner's pid. The session and the Runner end when tb does.
func startPaddockServe(tb testing.TB, bin, upstream, claude, ownerCred string, hdr http.Header) (string, http.Header, int) {
	tb.Helper()
	if bin == "" {
		bin = testenv.PaddockBinary(tb)
	}
	root := testenv.TraversableTempDir(tb)
	dir, ws := filepath.Join(root, "state"), filepath.Join(root, "ws")
	for _, d := range []string{dir, ws} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			tb.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("version = 1\n[anthropic]\nupstream = %q\n[claude]\nbinary = %q\n[proxy]\nlisten = \"127.0.0.1:0\"\n[web]\nlisten = \"127.0.0.1:0\"\n", upstream, claude)
	if err := os.WriteFile(filepath.Join(dir, "paddock.toml"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	log := &testenv.Buffer{}
	cmd := exec.Command(bin, "--state-dir", dir, "serve")
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "CLAUDE_CODE_OAUTH_TOKEN=" + ownerCred}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	tb.Cleanup(stop)
	var addr string
	for i := 0; i < 400 && addr == ""; i++ {
		if m := serveListenRe.FindStringSubmatch(log.String()); m != nil {
			addr = m[1]
		} else {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if addr == "" {
		tb.Fatalf("paddock serve did not come up:\n%s", log.String())
	}
	pd := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, bin, append([]string{"--state-dir", dir}, args...)...)
		c.Dir, c.Env = ws, []string{"PATH=/usr/bin:/bin"}
		out, err := c.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			tb.Fatalf("paddock %s: %v\nrunner log:\n%s", strings.Join(args, " "), err, log.String())
		}
		return strings.TrimSpace(string(out))
	}
	pd("run", "-d", "--name", "bench", "--backend", "local")
	tb.Cleanup(func() { pd("rm", "-f", "bench") }) // before stop: cleanups run last first
	tok := pd("exec", "bench", "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN")
	if tok == "" || tok == ownerCred {
		tb.Fatalf("the session's box has no session token (%q)", tok)
	}
	h := hdr.Clone()
	h.Set("Authorization", "Bearer "+tok)
	return "http://" + addr, h, cmd.Process.Pid
}
