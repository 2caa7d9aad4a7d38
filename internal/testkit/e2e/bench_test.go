package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/image/imagetest"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/perf"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// until polls f every 5 ms and returns the time from t0 to its first true.
func until(b testing.TB, t0 time.Time, d time.Duration, f func() bool) time.Duration {
	for time.Since(t0) < d {
		if f() {
			return time.Since(t0)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("not ready after %v", d) // callers log the last screen
	return 0
}

// claudeDirect starts the same claude in a host tmux, with the same
// seeded config and quiet environment, and times its prompt.
func claudeDirect(b testing.TB, e *env, i int) time.Duration {
	home := b.TempDir()
	cfg := filepath.Join(home, ".claude")
	os.MkdirAll(cfg, 0o700)
	cj, _, _ := claudecode.SeedClaudeJSON(nil, home, "")
	st, _, _ := claudecode.SeedSettings(nil)
	os.WriteFile(filepath.Join(cfg, ".claude.json"), cj, 0o600)
	os.WriteFile(filepath.Join(cfg, "settings.json"), st, 0o600)
	uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	o := claudecode.LaunchOptions{Home: home, BaseURL: "http://127.0.0.1:9", CredentialVar: "CLAUDE_CODE_OAUTH_TOKEN", Credential: "x", SessionID: uuid, Root: true}
	sock := fmt.Sprintf("pdk-bench-%d", i)
	args := append([]string{"-L", sock, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", "-c", home, "--"}, claudecode.Args(o)...)
	args[len(args)-len(claudecode.Args(o))] = e.claude
	cmd := exec.Command("tmux", args...)
	cmd.Env = claudecode.Env(o)
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("tmux: %v %s", err, out)
	}
	defer exec.Command("tmux", "-L", sock, "kill-server").Run()
	return until(b, t0, 30*time.Second, func() bool {
		out, _ := exec.Command("tmux", "-L", sock, "capture-pane", "-p").Output()
		return strings.Contains(string(out), promptReady)
	})
}

func bareStart(b testing.TB, e *env, backend, runtime string) time.Duration {
	switch backend {
	case "local":
		if runtime == runtimes.Runsc {
			return sandboxtest.BareRunsc(b, runtimes.RunscPath())
		}
		return sandboxtest.BareBwrap(b)
	case "kubernetes":
		return bareKube(b, e)
	}
	cli := imagetest.Docker(b)
	defer cli.Close()
	return sandboxtest.BareDocker(b, cli, e.image, runtime)
}

// ready reports whether claude's prompt is drawn; it logs a failed capture.
func (e *env) ready(name string) bool {
	s := e.screen(name)
	if strings.HasPrefix(s, "(capture failed") {
		e.t.Log(s)
	}
	return strings.Contains(s, promptReady)
}

// BenchmarkSessionPrompt: create → prompt drawn and wake → prompt drawn,
// per backend, against the bare backend start plus the same claude started
// directly, in one run with the rounds interleaved.
func BenchmarkSessionPrompt(b *testing.B) {
	rounds := perf.Rounds(5)
	type row struct {
		create, wake, bare, direct []time.Duration
		// From the session's own record of each start (inspect's
		// last_start): paddock's share timed, not subtracted.
		createShare, wakeShare, channel, selfTest, claude []time.Duration
		// The PSS of the box's host processes with claude idle at its
		// prompt (local and docker kinds).
		pss []int64
	}
	// Each backend without and with a host workspace (its idmapped view,
	// host code read-only: made at each start, taken off at each stop);
	// kubernetes on the test cluster (its bare start: a pod of the image
	// running /bin/true).
	// local/gvisor: runsc run by the local backend; docker/gvisor:
	// Docker's runsc. PADDOCK_BENCH_KINDS (comma-separated) runs only
	// those kinds.
	kinds := []string{"local", "local/gvisor", "docker", "docker/gvisor", "kubernetes", "local+workspace", "local/gvisor+workspace", "docker+workspace", "docker/gvisor+workspace"}
	if only := os.Getenv("PADDOCK_BENCH_KINDS"); only != "" {
		kinds = strings.Split(only, ",")
	}
	var e *env
	if slices.Contains(kinds, "kubernetes") {
		e = newKubeEnv(b)
	} else {
		e = newEnv(b) // no test cluster to start
	}
	rows := map[string]*row{}
	for _, k := range kinds {
		rows[k] = &row{}
	}
	n := 0
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, kind := range kinds {
				backend, withWS := strings.CutSuffix(kind, "+workspace")
				backend, runtime, _ := strings.Cut(backend, "/")
				rw := rows[kind]
				n++
				rw.bare = append(rw.bare, bareStart(b, e, backend, map[string]string{"gvisor": "runsc"}[runtime]))
				rw.direct = append(rw.direct, claudeDirect(b, e, n))
				name := fmt.Sprintf("bench-%s-%d", backend, n)
				args := []string{"run", "-d", "--name", name, "--backend", backend}
				if runtime != "" {
					args = append(args, "--runtime", runtime)
				}
				if withWS {
					args = append(args, "--workspace", sandboxtest.OwnedWorkspace(b, testenv.TraversableTempDir(b)))
				}
				t0 := time.Now()
				id := strings.TrimSpace(e.pd(args...))
				rw.create = append(rw.create, until(b, t0, 60*time.Second, func() bool { return e.ready(name) }))
				switch backend {
				case "docker":
					time.Sleep(2 * time.Second) // idle at its prompt
					rw.pss = append(rw.pss, e.dockerBoxPSS(id))
				case "local":
					time.Sleep(2 * time.Second)
					rw.pss = append(rw.pss, e.localBoxPSS(id))
				}
				st := e.lastStart(name)
				rw.createShare = append(rw.createShare, st.Launched.Sub(t0)-ms(st.BoxMS))
				rw.channel = append(rw.channel, ms(st.ChannelMS))
				rw.selfTest = append(rw.selfTest, ms(st.SelfTestMS))
				rw.claude = append(rw.claude, ms(st.ClaudeMS))
				e.pd("sleep", name)
				t0 = time.Now()
				e.pd("wake", name)
				rw.wake = append(rw.wake, until(b, t0, 60*time.Second, func() bool { return e.ready(name) }))
				st = e.lastStart(name)
				rw.wakeShare = append(rw.wakeShare, st.Launched.Sub(t0)-ms(st.BoxMS))
				e.pd("rm", "-f", name)
			}
		}
	}
	t := perf.Table{Title: "Session → Claude Code prompt drawn, p50 (ms)", Header: []string{"backend", "bare start", "claude alone", "bare+claude", "create→prompt", "paddock share", "wake→prompt", "paddock share"}}
	for _, backend := range kinds {
		rw := rows[backend]
		bare, direct := perf.Pct(rw.bare, .5), perf.Pct(rw.direct, .5)
		c, w := perf.Pct(rw.create, .5), perf.Pct(rw.wake, .5)
		t.Add(backend, perf.MS(bare), perf.MS(direct), perf.MS(bare+direct), perf.MS(c), perf.MS(c-bare-direct), perf.MS(w), perf.MS(w-bare-direct))
	}
	t.Write(os.Stderr)
	// The subtraction above carries the noise of two long measurements
	// (claude's own start moves by ±50 ms from round to round). Timed
	// instead: from the command's start to claude's launch in the box, less
	// the backend's own work on the box, as the Runner recorded it.
	tt := perf.Table{Title: "paddock's share timed: command → claude launched in the box, less the box's creation and start, p50 (ms)",
		Header: []string{"backend", "create share", "wake share", "channel", "self-test", "seed + start claude"}}
	for _, backend := range kinds {
		rw := rows[backend]
		tt.Add(backend, perf.MS(perf.Pct(rw.createShare, .5)), perf.MS(perf.Pct(rw.wakeShare, .5)),
			perf.MS(perf.Pct(rw.channel, .5)), perf.MS(perf.Pct(rw.selfTest, .5)), perf.MS(perf.Pct(rw.claude, .5)))
	}
	tt.Write(os.Stderr)
	mt := perf.Table{Title: "A box with claude idle at its prompt: PSS of its host processes (its cgroup's), p50 (MiB)", Header: []string{"kind", "PSS"}}
	for _, kind := range kinds {
		if p := rows[kind].pss; len(p) > 0 {
			slices.Sort(p)
			mt.Add(kind, fmt.Sprintf("%.1f", float64(p[len(p)/2])/(1<<20)))
		}
	}
	mt.Write(os.Stderr)
}

// dockerBoxPSS is the PSS of every host process of the session's docker
// box (its cgroup: a runc box's processes, or a gVisor box's sentry,
// gofer and stubs).
func (e *env) dockerBoxPSS(id string) int64 {
	e.t.Helper()
	cli := imagetest.Docker(e.t)
	defer cli.Close()
	for _, o := range e.objectsOf(id) {
		if o.Kind != sandbox.KindBox {
			continue
		}
		return sandboxtest.DockerBoxPSS(e.t, cli, o.ID)
	}
	e.t.Fatalf("session %s has no box", id)
	return 0
}

// localBoxPSS is the PSS of every host process of the session's local
// box (its cgroup: bwrap's box, or runsc's sentry, gofer and stubs).
func (e *env) localBoxPSS(id string) int64 {
	e.t.Helper()
	lb := e.backends()["local"].(*local.Backend)
	for _, o := range e.objectsOf(id) {
		if o.Kind != sandbox.KindBox {
			continue
		}
		pss, err := perf.CgroupPSS(lb.CgroupProcs(o.ID))
		if err != nil {
			e.t.Fatal(err)
		}
		return pss
	}
	e.t.Fatalf("session %s has no box", id)
	return 0
}

// lastStart is the session's record of its last start (inspect).
func (e *env) lastStart(name string) session.StartTimes {
	e.t.Helper()
	var s session.Session
	if err := json.Unmarshal([]byte(e.pd("inspect", name)), &s); err != nil {
		e.t.Fatal(err)
	}
	if s.LastStart.Launched.IsZero() {
		e.t.Fatalf("session %s has no record of its last start", name)
	}
	return s.LastStart
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
