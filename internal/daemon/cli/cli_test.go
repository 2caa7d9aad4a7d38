package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/system"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

func run(t *testing.T, stdin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := Main(ctx, args, IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Env: env})
	return code, out.String(), errb.String()
}

func TestBadFlagsAreClear(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--state-dir", dir, "serve", "--log-format", "xml"}, 2, `--log-format: "xml" is not one of text, json`},
		{[]string{"--state-dir", dir, "serve", "--log-level", "loud"}, 2, `--log-level: "loud"`},
		{[]string{"--state-dir", dir, "serve", "--upstream", "http://example.test"}, 2, "--upstream"},
		{[]string{"--state-dir", dir, "serve", "--proxy-listen", "0.0.0.0:80"}, 2, "not a loopback address"},
		{[]string{"serve", "--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{[]string{"logs"}, 1, "accepts 1 arg"},
		{[]string{"logs"}, 1, "usage: paddock logs SESSION (see paddock logs --help)"},
		{[]string{"egress", "always", "rm"}, 1, "usage: paddock egress always rm HOST[:PORT]"},
		{[]string{"--state-dir", dir, "logs", "x", "-n", "-1"}, 2, "--tail -1"},
		{[]string{"--state-dir", dir, "serve", "--config", filepath.Join(dir, "missing.toml")}, 1, "missing.toml"},
		{[]string{"--state-dir", dir, "credential", "set", "--kind", "password"}, 2, "--kind"},
		// As docker exec: -t needs a terminal to read from (stdin here is a string).
		{[]string{"--state-dir", dir, "exec", "-t", "x", "--", "sh"}, 125, "-t: the input is not a terminal"},
		{[]string{"--state-dir", dir, "exec", "x", "--", "sh"}, 125, "paddock serve"}, // no Runner: paddock's own failure
		{[]string{"--state-dir", dir, "attach", "--detach-keys", "ctrl-1", "x"}, 2, "no such control key: ctrl-1"},
		{[]string{"--state-dir", dir, "guest", "bogus"}, 2, `unknown command "bogus"`},
		// Other tools' words for paddock's commands point to them.
		{[]string{"--state-dir", dir, "freeze", "x"}, 2, "Did you mean this?\n\tsleep\n"},
		{[]string{"--state-dir", dir, "thaw", "x"}, 2, "Did you mean this?\n\twake\n"},
		{[]string{"--state-dir", dir, "delete", "x"}, 2, "Did you mean this?\n\trm\n"},
		// Under a group command too, not its help and 0.
		{[]string{"--state-dir", dir, "credential", "bogus"}, 2, `unknown command "bogus" for "paddock credential"`},
		{[]string{"--state-dir", dir, "session", "exprot"}, 2, "Did you mean this?\n\texport\n"},
		{[]string{"--state-dir", dir, "image", "biuld"}, 2, "Did you mean this?\n\tbuild\n"},
		{[]string{"--state-dir", dir, "guest", "hook", "--nope", "x"}, 2, "flag provided but not defined: -nope"},
		{[]string{"--state-dir", dir, "run", "--detach-keys", "ab"}, 2, "not a key: ab"},
		{[]string{"--state-dir", dir, "run", "--prompt", ""}, 2, "the prompt is empty"},
		{[]string{"--state-dir", dir, "run", "--workspace", filepath.Join(dir, "missing")}, 2, "does not exist"},
	} {
		code, _, stderr := run(t, "sk-ant-oat01-fake\n", nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: code %d stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

func TestBadConfigNamesFileAndKey(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "paddock.toml")
	os.WriteFile(cfg, []byte("version = 1\n[proxy]\nlisen = \"127.0.0.1:1\"\n"), 0o600)
	code, _, stderr := run(t, "", nil, "--state-dir", dir, "serve")
	if code != 2 || !strings.Contains(stderr, cfg) || !strings.Contains(stderr, "proxy.lisen") {
		t.Fatalf("%d %q", code, stderr)
	}
	// A flag cannot fix a bad file value it does not override, and the error names the file.
	os.WriteFile(cfg, []byte("version = 1\n[log]\nformat = \"xml\"\n"), 0o600)
	code, _, stderr = run(t, "", nil, "--state-dir", dir, "serve", "--upstream", "http://127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, cfg) || !strings.Contains(stderr, "log.format") {
		t.Fatalf("%d %q", code, stderr)
	}
}

func TestCredentialSetAndStatusWithoutRunner(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := run(t, "", nil, "--state-dir", dir, "credential", "set")
	if code != 2 || !strings.Contains(stderr, "no credential on stdin") {
		t.Fatalf("empty: %d %q", code, stderr)
	}
	code, _, stderr = run(t, "mystery-token\n", nil, "--state-dir", dir, "credential", "set")
	if code != 2 || !strings.Contains(stderr, "--kind") {
		t.Fatalf("unknown kind: %d %q", code, stderr)
	}
	const tok = "sk-ant-oat01-fake-token-for-the-cli-test"
	code, out, stderr := run(t, tok+"\n", nil, "--state-dir", dir, "credential", "set")
	if code != 0 || strings.Contains(out+stderr, tok) || !strings.Contains(out, "stored oauth credential") {
		t.Fatalf("set: %d %q %q", code, out, stderr)
	}
	fi, err := os.Stat(filepath.Join(dir, "credential.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	code, out, _ = run(t, "", nil, "--state-dir", dir, "credential", "status")
	if code != 0 || !strings.Contains(out, "kind:        oauth") || !strings.Contains(out, "Runner is not running") || strings.Contains(out, tok) {
		t.Fatalf("status: %d %q", code, out)
	}
	run(t, "", nil, "--state-dir", dir, "credential", "rm")
	code, out, _ = run(t, "", []string{"ANTHROPIC_API_KEY=sk-fake-env"}, "--state-dir", dir, "credential", "status", "--json")
	if code != 0 || !strings.Contains(out, `"source": "env:ANTHROPIC_API_KEY"`) || strings.Contains(out, "sk-fake-env") {
		t.Fatalf("env status: %d %q", code, out)
	}
}

func TestCommandsSayHowToStartTheRunner(t *testing.T) {
	code, _, stderr := run(t, "", nil, "--state-dir", t.TempDir(), "logs", "s1")
	if code != 3 || !strings.Contains(stderr, "start it with `paddock serve`") {
		t.Fatalf("%d %q", code, stderr)
	}
}

// TestServeRefusesUnreachableStateDir: as root, a state directory that
// local boxes' uids cannot reach (here below t.TempDir's 0700) stops
// `paddock serve` at once with the directory and the chmod that fixes it,
// where every box start used to end in a bare "conflict".
func TestServeRefusesUnreachableStateDir(t *testing.T) {
	testenv.Root(t)
	dir := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"--state-dir", dir, "serve", "--proxy-listen", "off", "--web-listen", "off"},
		IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: []string{"ANTHROPIC_API_KEY=sk-fake-serve-key"}})
	// It names the highest directory others may not search: one above dir.
	_, named, _ := strings.Cut(errb.String(), "chmod o+x ")
	named, _, _ = strings.Cut(named, ",")
	if code != 3 || named == "" || !strings.HasPrefix(dir, named+"/") {
		t.Fatalf("serve on an unreachable state dir: exit %d %q", code, errb.String())
	}
}

func TestServeLogsAndStops(t *testing.T) {
	dir := testenv.TraversableTempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testenv.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--state-dir", dir, "--log-format", "json", "serve", "--proxy-listen", "off", "--web-listen", "127.0.0.1:0"},
			IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: []string{"ANTHROPIC_API_KEY=sk-fake-serve-key"}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), `"msg":"paddock runner started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no start line: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, stdout, _ := run(t, "", nil, "--state-dir", dir, "credential", "status")
	if code != 0 || strings.Contains(stdout, "not running") || !strings.Contains(stdout, "env:ANTHROPIC_API_KEY") {
		t.Fatalf("status via runner: %d %q", code, stdout)
	}
	code, _, stderr := run(t, "", nil, "--state-dir", dir, "serve")
	if code != 5 || !strings.Contains(stderr, "another paddock serve") {
		t.Fatalf("second serve: %d %q", code, stderr)
	}
	cancel()
	select {
	case c := <-done:
		if c != 0 {
			t.Fatalf("serve exited %d: %s", c, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(errb.String(), "sk-fake-serve-key") {
		t.Fatal("credential in the log")
	}
}

func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o711)
	code, out, _ := run(t, "", []string{"ANTHROPIC_API_KEY=sk-fake-doctor"}, "--state-dir", dir, "doctor")
	for _, want := range []string{"bubblewrap", "docker", "cgroup limits", "claude 2.1.328", "tmux", "state dir", "credential", "api_key env:ANTHROPIC_API_KEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not report %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-fake-doctor") {
		t.Fatal("doctor printed the credential")
	}
	// Every failed line says how to fix it.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "FAIL") && (i+1 >= len(lines) || !strings.Contains(lines[i+1], "fix:")) {
			t.Errorf("a failure without a fix: %q", l)
		}
	}
	if strings.Contains(out, "FAIL") != (code == 1) {
		t.Fatalf("exit %d for:\n%s", code, out)
	}
	// No credential at all fails that line.
	code, out, _ = run(t, "", nil, "--state-dir", dir, "doctor")
	if code != 1 || !strings.Contains(out, "FAIL credential") {
		t.Fatalf("%d\n%s", code, out)
	}
}

// TestRuntimeCheck: doctor's runtimes line names each backend's runtimes
// with their kind, fails on a gVisor runtime registered without
// --directfs=false (saying what to register), and says what adds gVisor
// or why there is no VM runtime.
func TestRuntimeCheck(t *testing.T) {
	good := map[string]system.RuntimeWithStatus{
		"runc":  {Runtime: system.Runtime{Path: "runc"}},
		"runsc": {Runtime: system.Runtime{Path: "/x/runsc", Args: []string{"--directfs=false"}}},
	}
	c := runtimeCheck("/x/runsc", good, "runc", false, "no /dev/kvm")
	if !c.ok || !strings.Contains(c.what, "runc default, runsc (gVisor)") || !strings.Contains(c.what, "KVM: no, so no VM runtime: no /dev/kvm") ||
		!strings.Contains(c.what, "local: bwrap (shared kernel) default, runsc (gVisor) /x/runsc") {
		t.Errorf("%+v", c)
	}
	bad := map[string]system.RuntimeWithStatus{"gvisor": {Runtime: system.Runtime{Path: "/usr/bin/runsc"}}}
	c = runtimeCheck("", bad, "runc", true, "")
	if c.ok || !strings.Contains(c.fix, `"runtimeArgs": ["--directfs=false"]`) || !strings.Contains(c.what, "KVM: yes") {
		t.Errorf("%+v", c)
	}
	c = runtimeCheck("", map[string]system.RuntimeWithStatus{"runc": {}}, "runc", false, "x")
	if !c.ok || !strings.Contains(c.what, "no gVisor: \"runsc\": {\"path\"") {
		t.Errorf("%+v", c)
	}
	if c = runtimeCheck("", nil, "", false, "x"); strings.Contains(c.what, "docker") || !strings.Contains(c.what, "local: bwrap") ||
		!strings.Contains(c.what, "no gVisor: `sudo make deps GVISOR=1`") {
		t.Errorf("no daemon: %+v", c)
	}
}
