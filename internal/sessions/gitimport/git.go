package gitimport

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// safeConfig are the -c options of every git Import runs. A -c wins over
// every config file, the repository's included; see the package comment
// for what each one stops.
var safeConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.alternateRefsCommand=true",
	"-c", "core.askPass=",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "fetch.writeCommitGraph=false",
	"-c", "transfer.fsckObjects=true",
	"-c", "fetch.fsckObjects=true",
	"-c", "receive.fsckObjects=true",
}

// safeEnv ends the environment of every process Import runs (a later
// entry wins in os/exec): no system or global config, no prompt, no
// lazy fetch, no transport, no replace refs, no pager.
var safeEnv = []string{
	"HOME=/nonexistent",
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_NO_LAZY_FETCH=1",
	"GIT_ALLOW_PROTOCOL=none",
	"GIT_PROTOCOL_FROM_USER=0",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_PAGER=cat",
	"PAGER=cat",
}

// defaultEnv begins it; Options.Env comes between.
var defaultEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

// runner runs git (and objdir.sh) in one repository as its owner.
type runner struct {
	git    string
	gitDir string
	env    []string            // all but GIT_DIR and a command's own
	cred   *syscall.Credential // nil: no switch (the Runner is the owner)
}

func newRunner(o Options, gitDir string, switchUser bool) *runner {
	env := slices.Clone(defaultEnv)
	for _, kv := range o.Env {
		// A GIT_* of the caller's could point git elsewhere (GIT_DIR,
		// GIT_OBJECT_DIRECTORY) or add config (GIT_CONFIG_COUNT).
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(append(env, safeEnv...), "GIT_DIR="+gitDir)
	r := &runner{git: o.Git, gitDir: gitDir, env: env}
	if switchUser {
		// Groups empty: none of the Runner's supplementary groups.
		r.cred = &syscall.Credential{Uid: o.UID, Gid: o.GID, Groups: []uint32{}}
	}
	return r
}

// command is prog with args, as the owner, in the git directory, with
// env added to the environment.
func (r *runner) command(ctx context.Context, env []string, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(slices.Clone(r.env), env...)
	cmd.Dir = r.gitDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	// A grandchild holding a pipe open does not hold Wait for longer.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// gitCmd is git with safeConfig and args.
func (r *runner) gitCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	return r.command(ctx, env, r.git, append(append([]string{"--no-pager"}, safeConfig...), args...)...)
}

// run runs git with args and stdin, and returns its output. Its error
// holds the end of git's standard error.
func (r *runner) run(ctx context.Context, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := r.gitCmd(ctx, env, args...)
	return output(cmd, stdin, "git "+args[0])
}

// output runs cmd with stdin and returns its standard output (at most
// maxOutput bytes).
func output(cmd *exec.Cmd, stdin []byte, what string) ([]byte, error) {
	var out bytes.Buffer
	stderr := &tail{max: maxStderr}
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &limited{w: &out, n: maxOutput}, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", what, err, stderr)
	}
	return out.Bytes(), nil
}

const (
	maxOutput = 16 << 20 // what Import reads of one git's output
	maxStderr = 4 << 10  // what an error keeps of its standard error
)

//go:embed objdir.sh
var objdirScript string

// objdir runs objdir.sh: verb make, keep or drop on the quarantine q.
func (r *runner) objdir(ctx context.Context, verb, q string) error {
	cmd := r.command(ctx, nil, "/bin/sh", "-c", objdirScript, "objdir.sh", verb, q, r.gitDir+"/objects")
	_, err := output(cmd, nil, "objdir.sh "+verb)
	return err
}

// tail keeps the last max bytes written to it, for an error message.
type tail struct {
	b   []byte
	max int
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b, t.cut = t.b[len(t.b)-t.max:], true
	}
	return len(p), nil
}

// String is what git said, one line, made safe for a terminal.
func (t *tail) String() string {
	s := strings.Join(strings.Fields(strings.TrimSpace(string(t.b))), " ")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
	if t.cut {
		s = "…" + s
	}
	return s
}

// limited writes at most n bytes to w; more is an error.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, fmt.Errorf("more than %d bytes of output", maxOutput)
	}
	l.n -= len(p)
	return l.w.Write(p)
}
