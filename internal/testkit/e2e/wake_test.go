package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// TestWakeBeforeFirstPrompt: a session slept before anyone typed has no
// transcript yet; wake must start a new conversation, not --resume one.
func TestWakeBeforeFirstPrompt(t *testing.T) {
	e := newEnv(t)
	for _, be := range []string{"local", "docker"} {
		name := "x-" + be
		e.pd("run", "-d", "--name", name, "--backend", be)
		poll(t, e, name, "create "+be)
		e.pd("sleep", name)
		e.pd("wake", name)
		poll(t, e, name, "wake "+be)
		e.pd("rm", "-f", name)
	}
	// The Runner's log tells a first start from a wake.
	first, again := 0, 0
	for _, l := range strings.Split(e.log.String(), "\n") {
		if strings.Contains(l, `msg="session running"`) {
			first += strings.Count(l, "resume=false")
			again += strings.Count(l, "resume=true")
		}
	}
	if first != 2 || again != 2 {
		t.Errorf("the log says %d first starts and %d resumes, want 2 and 2:\n%s", first, again, e.log.String())
	}
}

func poll(t *testing.T, e *env, name, what string) {
	t0 := time.Now()
	for time.Since(t0) < 20*time.Second {
		if e.ready(name) {
			t.Logf("%s: ready after %v", what, time.Since(t0))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s := e.screen(name)
	t.Fatalf("%s: never ready: %q", what, s[max(0, len(s)-600):])
}

// asleepAtPrompt creates a session on backend, waits for Claude Code's
// prompt and puts it to sleep; it returns the session's name and where its
// Claude Code config directory is on the host, for a test to write in it
// while the session sleeps.
func asleepAtPrompt(t *testing.T, e *env, prefix, backend string) (name, cfgDir string) {
	t.Helper()
	name = prefix + backend
	id := strings.TrimSpace(e.pd("run", "-d", "--name", name, "--backend", backend))
	poll(t, e, name, "create "+backend)
	e.pd("sleep", name)
	home := filepath.Join(e.dir, "local", "volumes", id, "home")
	if backend == "docker" {
		home = ""
		for _, o := range e.objectsOf(id) {
			if o.Kind == sandbox.KindVolume && strings.HasSuffix(o.ID, "-home") {
				home = "/var/lib/docker/volumes/" + o.ID + "/_data"
			}
		}
		if home == "" {
			t.Fatalf("no home volume among %+v", e.objectsOf(id))
		}
	}
	return name, filepath.Join(home, ".claude")
}

// TestWakeWithHostileClaudeConfig: a FIFO in place of .claude.json (which
// would block the Runner's read forever) and settings.json linked to
// /dev/zero (endless): both read as no file, are replaced by seeded regular
// files, and the session wakes.
func TestWakeWithHostileClaudeConfig(t *testing.T) {
	e := newEnv(t)
	for _, be := range []string{"local", "docker"} {
		name, cfg := asleepAtPrompt(t, e, "hostile-", be)
		cj, st := filepath.Join(cfg, ".claude.json"), filepath.Join(cfg, "settings.json")
		info, err := os.Stat(cj)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid := int(info.Sys().(*syscall.Stat_t).Uid), int(info.Sys().(*syscall.Stat_t).Gid)
		os.Remove(cj)
		os.Remove(st)
		if err := syscall.Mkfifo(cj, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(cj, uid, gid)
		if err := os.Symlink("/dev/zero", st); err != nil {
			t.Fatal(err)
		}
		os.Lchown(st, uid, gid)
		e.pd("wake", name)
		poll(t, e, name, "wake "+be)
		for _, f := range []string{".claude.json", "settings.json"} {
			var doc map[string]any
			if b := e.pd("exec", name, "--", "cat", sandbox.HomeDir+"/.claude/"+f); json.Unmarshal([]byte(b), &doc) != nil {
				t.Errorf("%s: %s not written anew: %q", be, f, b[:min(len(b), 200)])
			}
		}
		e.pd("rm", "-f", name)
	}
}

// TestWakeWithLargeClaudeConfig: a .claude.json too large to read whole
// (Claude Code's own can grow to megabytes) is left exactly as it is — not
// cut, not kept aside as invalid — and the session wakes.
func TestWakeWithLargeClaudeConfig(t *testing.T) {
	e := newEnv(t)
	name, cfg := asleepAtPrompt(t, e, "large-", "local")
	cj := filepath.Join(cfg, ".claude.json")
	info, err := os.Stat(cj)
	if err != nil {
		t.Fatal(err)
	}
	big := `{"hasCompletedOnboarding": true, "projects": {"/workspace": {"hasTrustDialogAccepted": true}}, "history": "` +
		strings.Repeat("h", 17<<20) + `"}`
	if err := os.WriteFile(cj, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(cj, int(info.Sys().(*syscall.Stat_t).Uid), int(info.Sys().(*syscall.Stat_t).Gid))
	e.pd("wake", name)
	poll(t, e, name, "wake")
	// Claude Code rewrites the file as it starts; what paddock must not
	// have done is cut it or replace it.
	var doc struct {
		History string `json:"history"`
	}
	if b, err := os.ReadFile(cj); err != nil || json.Unmarshal(b, &doc) != nil || len(doc.History) != 17<<20 {
		t.Errorf("the large .claude.json lost its contents: %d bytes of history, %v", len(doc.History), err)
	}
	if _, err := os.Stat(cj + ".invalid"); err == nil {
		t.Error("the large .claude.json was kept aside as invalid")
	}
	if !strings.Contains(e.log.String(), "too large to seed") {
		t.Errorf("the Runner's log does not say it left the file:\n%s", e.log.String())
	}
}

// TestWakeWithBrokenClaudeConfig: Claude Code's config files in the box are
// the box's to write; a box killed while Claude Code wrote one, or an agent,
// can leave them broken. Written broken on the session's volume while the
// session sleeps ("null" in .claude.json once panicked the Runner's seeding;
// a cut settings.json failed every wake), they are kept aside as .invalid,
// written anew, the session wakes to Claude Code's prompt, and the Runner
// says so in its log.
func TestWakeWithBrokenClaudeConfig(t *testing.T) {
	e := newEnv(t)
	for _, be := range []string{"local", "docker"} {
		name, cfg := asleepAtPrompt(t, e, "broken-", be)
		broken := map[string]string{".claude.json": "null", "settings.json": `{"env": {"A": `}
		for f, content := range broken {
			p := filepath.Join(cfg, f)
			st, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", be, err)
			}
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			sys := st.Sys().(*syscall.Stat_t)
			os.Chown(p, int(sys.Uid), int(sys.Gid))
		}
		e.pd("wake", name)
		poll(t, e, name, "wake "+be)
		for f, content := range broken {
			kept := e.pd("exec", name, "--", "cat", sandbox.HomeDir+"/.claude/"+f+".invalid")
			if kept != content {
				t.Errorf("%s: %s.invalid holds %q, want the broken file %q", be, f, kept, content)
			}
			var doc map[string]any
			if b := e.pd("exec", name, "--", "cat", sandbox.HomeDir+"/.claude/"+f); json.Unmarshal([]byte(b), &doc) != nil {
				t.Errorf("%s: %s not written anew: %q", be, f, b)
			}
		}
		e.pd("rm", "-f", name)
	}
	if n := strings.Count(e.log.String(), "kept aside as .invalid"); n != 4 {
		t.Errorf("the Runner's log warns %d times, want 4 (two files, two backends):\n%s", n, e.log.String())
	}
}
