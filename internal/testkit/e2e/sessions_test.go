package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// proxyStatus sends one request with token to the Runner's host proxy socket.
func proxyStatus(t *testing.T, dir, token string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", dir+"/proxy.sock")
	}}}
	req, _ := http.NewRequest("POST", "http://localhost/v1/messages?beta=true", strings.NewReader(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSessionLifecycle is the main job on each backend: run -d, a prompt
// typed into the terminal, the answer on screen, a tool turn writing into
// /workspace, sleep (the old token is refused at once), wake (claude
// --resume redraws the history and the next request carries it), rm.
//
// local-gvisor and docker-gvisor are the same on gVisor: runsc run
// directly by the local backend, and Docker's runsc runtime (`make deps
// GVISOR=1` builds and registers it): the box's kernel is gVisor's, and
// claude's git compares size and mtime only (gVisor's inode numbers are
// new in every box).
func TestSessionLifecycle(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ label, backend, runtime string }{{"local", "local", ""}, {"local-gvisor", "local", "gvisor"}, {"docker", "docker", ""}, {"docker-gvisor", "docker", "gvisor"}} {
		backend := tc.backend
		t.Run(tc.label, func(t *testing.T) {
			e.t = t
			name := "life-" + tc.label
			args := []string{"run", "-d", "--name", name, "--backend", backend}
			if tc.runtime != "" {
				args = append(args, "--runtime", tc.runtime)
			}
			id := strings.TrimSpace(e.pd(args...))
			if len(id) != 12 {
				t.Fatalf("run -d printed %q", id)
			}
			if tc.runtime != "" {
				if k := e.pd("exec", name, "--", "uname", "-r"); !strings.HasSuffix(strings.TrimSpace(k), "-gvisor") {
					t.Fatalf("a box on %s runs on kernel %q", tc.runtime, k)
				}
				if g := e.pd("exec", name, "--", "git", "config", "core.checkstat"); g != "minimal\n" {
					t.Fatalf("git's checkstat in a gVisor box: %q", g)
				}
				if g := e.pd("exec", name, "--", "git", "config", "core.createobject"); g != "rename\n" {
					t.Fatalf("git's createobject in a gVisor box: %q", g)
				}
				if rt := e.inspect(name).Runtime; rt != "runsc" {
					t.Fatalf("the session records runtime %q, want runsc", rt)
				}
				if ls := e.pd("ls"); !strings.Contains(ls, "RUNTIME") || !strings.Contains(ls, " runsc ") {
					t.Fatalf("ls does not show the runtime:\n%s", ls)
				}
			}
			e.waitScreen(name, promptReady, 30*time.Second)
			e.typeLine(name, "say hi")
			e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
			e.typeLine(name, "TOOLTEST: echo hello > /workspace/proof.txt")
			e.waitScreen(name, "The tool ran. Done.", 30*time.Second)
			if out := e.pd("exec", name, "--", "cat", "/workspace/proof.txt"); out != "hello\n" {
				t.Fatalf("proof: %q", out)
			}
			// The ledger joins the transcript: the request that carried the
			// tool's result names the tool_use id Claude Code recorded.
			// The entry is written once the response has ended: poll.
			var ledgerIDs []string
			for i := 0; len(ledgerIDs) == 0 && i < 50; i++ {
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				for _, l := range strings.Split(strings.TrimSpace(e.pd("logs", name, "--json")), "\n") {
					var en struct {
						ToolResultIDs []string `json:"tool_result_ids"`
					}
					json.Unmarshal([]byte(l), &en)
					ledgerIDs = append(ledgerIDs, en.ToolResultIDs...)
				}
			}
			if len(ledgerIDs) != 1 {
				t.Fatalf("ledger tool ids %v", ledgerIDs)
			}
			// Claude Code records the tool call (its id) in the transcript's
			// assistant message; the ledger has the same id on the request
			// that carried the result. Claude writes its transcript
			// asynchronously: poll.
			joined := false
			for i := 0; !joined && i < 100; i++ {
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				transcript := e.pd("exec", name, "--", "sh", "-c", `cat "$CLAUDE_CONFIG_DIR"/projects/-workspace/*.jsonl 2>/dev/null; true`)
				for _, l := range strings.Split(transcript, "\n") {
					joined = joined || strings.Contains(l, `"type":"assistant"`) && strings.Contains(l, `"id":"`+ledgerIDs[0]+`"`) && strings.Contains(l, `"type":"tool_use"`)
				}
			}
			if !joined {
				t.Fatalf("no tool call %s in the transcript after 10 s", ledgerIDs[0])
			}
			// exec runs with claude's environment and passes the exit code.
			tok1 := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
			if !strings.HasPrefix(tok1, "pdk_st_") {
				t.Fatalf("box credential %q is not a session token", tok1)
			}
			if _, code := e.pdCode("exec", name, "--", "sh", "-c", "exit 42"); code != 42 {
				t.Fatalf("exit code %d", code)
			}
			if st := proxyStatus(t, e.dir, tok1); st != 200 {
				t.Fatalf("live token: %d", st)
			}

			e.pd("sleep", name)
			before := len(e.fake.Requests())
			if st := proxyStatus(t, e.dir, tok1); st != 401 {
				t.Fatalf("a sleeping session's token got %d", st)
			}
			if len(e.fake.Requests()) != before {
				t.Fatal("the revoked token reached the upstream")
			}
			if out, code := e.pdCode("attach", name); code == 0 || !strings.Contains(out, "it is asleep") {
				t.Fatalf("attach to a sleeping session: %d %s", code, out)
			}

			e.pd("wake", name)
			e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second) // --resume redraws the history
			e.waitScreen(name, promptReady, 30*time.Second)
			tok2 := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
			if tok2 == tok1 || !strings.HasPrefix(tok2, "pdk_st_") {
				t.Fatal("wake did not issue a new token")
			}
			e.typeLine(name, "and now")
			e.waitScreen(name, "hi from the fake server (turn 3)", 30*time.Second)
			reqs := e.fake.Requests()
			last := reqs[len(reqs)-1]
			if last.Messages < 5 {
				t.Fatalf("the request after wake carries %d messages, not the history", last.Messages)
			}
			if out := e.pd("logs", name); !strings.Contains(out, "forwarded") {
				t.Fatalf("logs: %s", out)
			}

			if out := e.pd("sleep", "--freeze", name); !strings.Contains(out, name+" is frozen: paddock wake "+name) {
				t.Fatalf("sleep --freeze: %q", out)
			}
			// A frozen session is removed as any other, and said so (it
			// was said to be frozen).
			if out := e.pd("rm", "-f", name); !strings.Contains(out, name+" is removed") {
				t.Fatalf("rm -f of a frozen session: %q", out)
			}
			if objs := e.objectsOf(id); len(objs) != 0 {
				t.Fatalf("rm left %+v", objs)
			}
			if out, code := e.pdCode("wake", name); code == 0 || !strings.Contains(out, `cannot wake session "`+name+`": it is removed`) {
				t.Fatalf("wake after rm: %d %s", code, out)
			}
		})
	}
}

// TestRunnerKill9 kills the Runner with SIGKILL while a session streams.
// Claude Code sees its stream cut (a clean, retryable error: the guest
// closes its connection when the channel drops) and retries; the
// restarted Runner re-adopts the running box, the retry gets the whole
// answer, and the session goes on.
func TestRunnerKill9(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			name := "k9-" + backend
			id := strings.TrimSpace(e.pd("run", "-d", "--name", name, "--backend", backend))
			e.waitScreen(name, promptReady, 30*time.Second)
			// A slow stream (an event a second; the answer has seven
			// words): the Runner dies in the middle of it.
			e.fake.SetPace(time.Second, 30)
			n, started := len(e.fake.Requests()), e.fake.Started()
			e.typeLine(name, "a long answer please")
			for i := 0; e.fake.Started() == started; i++ {
				if i == 400 {
					t.Fatal("the turn's request never arrived")
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(1500 * time.Millisecond) // a couple of events into the stream
			e.stop(syscall.SIGKILL)
			e.fake.SetPace(0, 2)
			e.start()
			deadline := time.Now().Add(30 * time.Second)
			for {
				out := e.pd("ls")
				if strings.Contains(out, name) && strings.Contains(out, "running") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not re-adopted: %s", out)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Usable: exec works.
			if out := e.pd("exec", name, "--", "echo", "alive"); out != "alive\n" {
				t.Fatalf("exec after restart: %q", out)
			}
			// The cut stream was a clean, retryable error to Claude Code: it
			// sends the turn again, the restarted Runner forwards it, and
			// the whole answer arrives.
			var msgs []fakeapi.Request
			for deadline := time.Now().Add(90 * time.Second); len(msgs) < 2 || msgs[len(msgs)-1].Status != 200; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("Claude Code did not retry the cut turn: %+v\nscreen:\n%s", msgs, e.screen(name))
				}
				msgs = msgs[:0]
				for _, r := range e.fake.Requests()[n:] {
					if r.Path == "/v1/messages" {
						msgs = append(msgs, r)
					}
				}
			}
			if !msgs[0].Ended.Before(msgs[0].Time.Add(5 * time.Second)) {
				t.Fatalf("the first request was not cut: %v to %v", msgs[0].Time, msgs[0].Ended)
			}
			e.waitScreen(name, "hi from the fake server (turn 1)", 60*time.Second)
			e.waitScreen(name, promptReady, 60*time.Second)
			e.typeLine(name, "still there")
			e.waitScreen(name, "hi from the fake server (turn 2)", 60*time.Second)
			e.pd("rm", "-f", name)
			e.pd("prune")
			if objs := e.objectsOf(id); len(objs) != 0 {
				t.Fatalf("rm and prune left %+v", objs)
			}
		})
	}
	// Nothing labelled is left of any session this Runner had, and the
	// local backend (private to this state directory) holds nothing at all.
	for name, be := range e.backends() {
		objs, err := be.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if name == "local" || strings.Contains(e.pd("ls", "-a", "--json"), o.Session) {
				t.Errorf("%s left %+v", name, o)
			}
		}
	}
}

// TestDirectModeGates: the gates refuse with clear errors; a direct-mode
// box has the owner's token in its environment and nowhere on disk.
func TestDirectModeGates(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	out, code := e.pdCode("run", "-d", "--credential-mode", "direct", "--workspace", ws)
	if code != 5 || !strings.Contains(out, "direct-mode box never mounts a host workspace") || !strings.Contains(out, "two") && !strings.Contains(out, "proxy-mode session for the workspace") {
		t.Fatalf("co-mount: %d %s", code, out)
	}
	out, code = e.pdCode("run", "-d", "--credential-mode", "direct", "--egress", "allowlist")
	if code != 5 || !strings.Contains(out, "needs egress offline or anthropic") {
		t.Fatalf("egress gate: %d %s", code, out)
	}
	out, code = e.pdCode("run", "-d", "--credential-mode", "sideways")
	if code != 2 || !strings.Contains(out, "not proxy or direct") {
		t.Fatalf("bad mode: %d %s", code, out)
	}
	for _, backend := range []string{"local", "docker"} {
		name := "direct-" + backend
		e.pd("run", "-d", "--name", name, "--backend", backend, "--credential-mode", "direct")
		if got := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN")); got != ownerToken {
			t.Fatalf("%s: env credential %q", backend, got)
		}
		if out, _ := e.pdCode("exec", name, "--", "printenv", "ANTHROPIC_BASE_URL"); strings.TrimSpace(out) != "" {
			t.Fatalf("%s: direct mode points at %q", backend, out)
		}
		// Nothing written to disk: the needle comes on stdin.
		var stdout strings.Builder
		es := e.execStdin(name, ownerToken+"\n", "sh", "-c", "grep -rlF -f /dev/stdin $HOME /workspace /tmp 2>/dev/null; echo scanned")
		stdout.WriteString(es)
		if strings.TrimSpace(stdout.String()) != "scanned" {
			t.Fatalf("%s: the token is on disk: %q", backend, stdout.String())
		}
		e.pd("rm", "-f", name)
	}
}

// execStdin runs paddock exec -i with stdin.
func (e *env) execStdin(name, stdin string, argv ...string) string {
	e.t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := mainWithStdin(ctx, e, stdin, &out, append([]string{"exec", "-i", name, "--"}, argv...)...)
	if code != 0 {
		e.t.Fatalf("exec: %d %s", code, out.String())
	}
	return out.String()
}

// csi matches terminal control sequences; the terminal draws spaces
// between words as cursor moves.
var csi = regexp.MustCompile(`\x1b\[[0-9;?>]*[A-Za-z]|\x1b\][^\a]*\a|\x1b[=>()B]`)

// plain turns terminal output into words separated by single spaces.
func plain(s string) string {
	return strings.Join(strings.Fields(csi.ReplaceAllString(s, " ")), " ")
}

// slowReader hands out its chunks one by one with a pause, like a person
// typing; then blocks until closed. If gate is set, it is called before
// each chunk with the chunk's index (a person waiting to see something).
type slowReader struct {
	chunks [][]byte
	pause  time.Duration
	done   chan struct{}
	gate   func(i int)
	sent   int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		<-s.done
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	if s.gate != nil {
		s.gate(s.sent)
	}
	s.sent++
	n := copy(p, s.chunks[0])
	s.chunks = s.chunks[1:]
	return n, nil
}

// TestAttachAndDetach: attach is a terminal into claude's tmux session;
// keys go in, the screen comes out, ctrl-p ctrl-q detaches and the session
// keeps running.
func TestAttachAndDetach(t *testing.T) {
	e := newEnv(t)
	name := "att"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 30*time.Second)
	var out testenv.Buffer
	in := &slowReader{pause: 700 * time.Millisecond, done: make(chan struct{}),
		chunks: [][]byte{[]byte("say hi"), []byte("\r"), {0x10}, {0x11}},
		// Detach once the answer is on the screen (a loaded machine may
		// take longer than the pauses), or after 30 s to fail below.
		gate: func(i int) {
			for end := time.Now().Add(30 * time.Second); i == 2 && time.Now().Before(end) &&
				!strings.Contains(plain(out.String()), "hi from the fake server"); {
				time.Sleep(50 * time.Millisecond)
			}
		}}
	defer close(in.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := mainWithStdin2(ctx, e, in, &out, "attach", name)
	if code != 0 || !strings.Contains(out.String(), "detached from att") {
		t.Fatalf("attach: %d %q", code, out.String())
	}
	if !strings.Contains(plain(out.String()), "hi from the fake server") {
		t.Fatalf("the answer was not drawn through attach: %q", out.String())
	}
	if got := e.pd("ls"); !strings.Contains(got, "running") {
		t.Fatalf("detach stopped the session: %s", got)
	}
	e.waitScreen(name, "hi from the fake server (turn 1)", 10*time.Second)

	// An observer sees the screen (the earlier answer, from the snapshot)
	// and its keys never reach claude.
	obs := &slowReader{pause: 500 * time.Millisecond, done: make(chan struct{}),
		chunks: [][]byte{[]byte("typed by the observer"), []byte("\r"), {0x10}, {0x11}}}
	defer close(obs.done)
	var oout testenv.Buffer
	code = mainWithStdin2(ctx, e, obs, &oout, "attach", "--read-only", name)
	if code != 0 || !strings.Contains(plain(oout.String()), "hi from the fake server (turn 1)") {
		t.Fatalf("observer: %d %q", code, oout.String())
	}
	if s := e.screen(name); strings.Contains(s, "typed by the observer") {
		t.Fatalf("an observer's keys reached claude:\n%s", s)
	}

	// Other detach keys, in docker's syntax: ctrl-a then d.
	keys := &slowReader{pause: 300 * time.Millisecond, done: make(chan struct{}), chunks: [][]byte{{0x01}, []byte("d")}}
	defer close(keys.done)
	var kout testenv.Buffer
	code = mainWithStdin2(ctx, e, keys, &kout, "attach", "--detach-keys", "ctrl-a,d", name)
	if code != 0 || !strings.Contains(kout.String(), "detached from att") {
		t.Fatalf("attach --detach-keys ctrl-a,d: %d %q", code, kout.String())
	}

	// A freeze sends whoever is attached away, and their attach says why.
	idle := &slowReader{done: make(chan struct{})} // no keys: stays attached
	defer close(idle.done)
	var fout testenv.Buffer
	attached := make(chan int, 1)
	go func() { attached <- mainWithStdin2(ctx, e, idle, &fout, "attach", name) }()
	for end := time.Now().Add(20 * time.Second); !strings.Contains(plain(fout.String()), "turn 1") && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	e.pd("sleep", "--freeze", name)
	select {
	case code := <-attached:
		if want := "att was frozen; paddock attach att (or paddock wake att) thaws it"; code != 0 || !strings.Contains(fout.String(), want) {
			t.Fatalf("attach through a freeze: %d, want %q in %q", code, want, fout.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a freeze left an attach in place")
	}
	e.pd("wake", name)

	// A sleep, then an rm, end the terminal before they are done: the
	// attach waits for them and says which.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sleep", name}, "att is asleep"},
		{[]string{"rm", "-f", name}, "att was removed"},
	} {
		if c.args[0] == "rm" {
			e.pd("wake", name)
		}
		var out testenv.Buffer
		attached := make(chan int, 1)
		go func() { attached <- mainWithStdin2(ctx, e, idle, &out, "attach", name) }()
		for end := time.Now().Add(20 * time.Second); !strings.Contains(plain(out.String()), "turn 1") && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
		e.pd(c.args...)
		select {
		case code := <-attached:
			if code != 0 || !strings.Contains(out.String(), c.want) {
				t.Fatalf("attach through %v: %d, want %q in %q", c.args, code, c.want, out.String())
			}
		case <-time.After(40 * time.Second):
			t.Fatalf("%v left an attach in place", c.args)
		}
	}
}

// TestSetModelAndKeepVolume: set restarts claude with --resume and the new
// model and effort; rm --keep-volume is recorded and prune keeps that
// volume until --volumes.
func TestSetModelAndKeepVolume(t *testing.T) {
	e := newEnv(t)
	name := "setter"
	id := strings.TrimSpace(e.pd("run", "-d", "--name", name, "--backend", "local"))
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "first")
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second)
	// The owner's plan (config) reaches the box's Claude Code with its token.
	if got := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_SUBSCRIPTION_TYPE")); got != "max" {
		t.Fatalf("plan in the box: %q", got)
	}
	// A token budget below what the session used refuses its next request
	// with 429 at once; raising it lets requests through again.
	tok := strings.TrimSpace(e.pd("exec", name, "--", "printenv", "CLAUDE_CODE_OAUTH_TOKEN"))
	if out := e.pd("set", name, "--budget", "10"); !strings.Contains(out, "token budget 10") {
		t.Fatalf("set --budget: %s", out)
	}
	if st := proxyStatus(t, e.dir, tok); st != 429 {
		t.Fatalf("over budget: %d", st)
	}
	e.pd("set", name, "--budget", "0")
	if st := proxyStatus(t, e.dir, tok); st != 200 {
		t.Fatalf("budget lifted: %d", st)
	}
	if out := e.pd("set", name, "--model", "claude-test-model", "--effort", "high"); !strings.Contains(out, "model claude-test-model, effort high") {
		t.Fatalf("set: %s", out)
	}
	e.waitScreen(name, "hi from the fake server (turn 1)", 30*time.Second) // resumed, history redrawn
	e.waitScreen(name, promptReady, 30*time.Second)
	ps := e.pd("exec", name, "--", "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
	if !strings.Contains(ps, "--resume") || !strings.Contains(ps, "--model claude-test-model") || !strings.Contains(ps, "--effort high") {
		t.Fatalf("claude was not restarted with the new choice: %s", ps)
	}
	n := len(e.fake.Requests())
	e.typeLine(name, "second")
	reqs := e.fake.WaitFor(n+1, 30*time.Second)
	if got := reqs[len(reqs)-1].Model; got != "claude-test-model" {
		t.Fatalf("the next request asks for %q", got)
	}
	if out, code := e.pdCode("set", name, "--effort", "extreme"); code != 2 || !strings.Contains(out, "not one of") {
		t.Fatalf("bad effort: %d %s", code, out)
	}

	e.pd("rm", "-f", "--keep-volume", name)
	if out := e.pd("ls", "-a", "--json"); !strings.Contains(out, `"keep_volume": true`) {
		t.Fatalf("keep-volume not recorded: %s", out)
	}
	hasVolume := func() bool {
		for _, o := range e.objectsOf(id) {
			if o.Kind == "volume" {
				return true
			}
		}
		return false
	}
	e.pd("prune")
	if !hasVolume() {
		t.Fatal("prune removed a volume that rm --keep-volume kept")
	}
	e.pd("prune", "--volumes")
	if hasVolume() || len(e.objectsOf(id)) != 0 {
		t.Fatalf("prune --volumes left %+v", e.objectsOf(id))
	}
}

// TestSmoke runs paddock smoke on each backend against the fake upstream.
func TestSmoke(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		out, code := e.pdCode("smoke", "--backend", backend, "--claude-version", "2.1.328")
		if code != 0 {
			t.Fatalf("%s: smoke failed:\n%s", backend, out)
		}
		for _, want := range []string{"ok   banner", "ok   prompt", "ok   /status", "ok   tool turn", "ok   401"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in:\n%s", backend, want, out)
			}
		}
	}
}

// TestRelayFromTheBox: a session created with its secret for a relay
// route reaches the relay from inside its box with its session token
// only; the relay upstream sees the secret, the box never holds it.
func TestRelayFromTheBox(t *testing.T) {
	e := newEnv(t)
	secretFile := filepath.Join(t.TempDir(), "hub-secret")
	const hubSecret = "fake-hub-secret-for-e2e"
	os.WriteFile(secretFile, []byte(hubSecret+"\n"), 0o600)
	name := "relay"
	e.pd("run", "-d", "--name", name, "--backend", "local", "--relay-secret", "mod="+secretFile)
	out := e.pd("exec", name, "--", "sh", "-c", `curl -sS -H "Authorization: Bearer $CLAUDE_CODE_OAUTH_TOKEN" http://127.0.0.1:4141/mod/items/7`)
	if out != "relayed" {
		t.Fatalf("from the box: %q", out)
	}
	e.relay.mu.Lock()
	got, path := e.relay.secret, e.relay.path
	e.relay.mu.Unlock()
	if len(got) != 1 || got[0] != hubSecret || path != "/items/7" {
		t.Fatalf("the relay saw %v at %s", got, path)
	}
	var scan strings.Builder
	mainWithStdin(context.Background(), e, hubSecret+"\n", &scan, "exec", "-i", name, "--", "sh", "-c",
		"grep -rlF -f /dev/stdin $HOME /workspace /tmp /proc/[0-9]*/environ 2>/dev/null; echo scanned")
	if strings.TrimSpace(scan.String()) != "scanned" {
		t.Fatalf("the relay secret is in the box: %q", scan.String())
	}
	e.pd("rm", "-f", name)
}
