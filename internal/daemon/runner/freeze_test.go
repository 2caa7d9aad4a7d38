package runner

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/perf"
)

// freezeRunner is a Runner on every backend this host has, against the
// fake upstream, with the config cfg changes.
func freezeRunner(t testing.TB, change func(*config.Config)) (*Runner, *fakeapi.Server) {
	t.Helper()
	backends := testBackends(t)
	return runnerWith(t, map[string]sandbox.Backend{"local": backends["local"], "docker": backends["docker"]}, nil, change)
}

// runnerWith serves a Runner on backends, with the fake upstream (for
// the owner's OAuth token) and log (nil: none).
func runnerWith(t testing.TB, backends map[string]sandbox.Backend, log *slog.Logger, change func(*config.Config)) (*Runner, *fakeapi.Server) {
	t.Helper()
	fake := fakeapi.New(ownerOAuth)
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Anthropic.Upstream = up.URL
	if change != nil {
		change(&cfg)
	}
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth},
		Log: log, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	return r, fake
}

// boxToken is the session token in claude's environment.
func boxToken(t testing.TB, r *Runner, id string) string {
	t.Helper()
	var out strings.Builder
	p, err := r.Exec(context.Background(), id, channel.ExecOptions{Argv: []string{"printenv", "CLAUDE_CODE_OAUTH_TOKEN"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	p.Wait()
	return strings.TrimSpace(out.String())
}

// proxied sends one request through the credential proxy with tok.
func proxied(t testing.TB, r *Runner, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+r.ProxyAddr()+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// panePID is the pid of claude's tmux pane: the same while claude runs on.
func panePID(t testing.TB, r *Runner, id string) string {
	t.Helper()
	var out strings.Builder
	p, err := r.Exec(context.Background(), id, channel.ExecOptions{Argv: []string{"tmux", "-L", TmuxSocket, "display", "-p", "-t", "claude", "#{pane_pid}"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	p.Wait()
	return strings.TrimSpace(out.String())
}

// TestFreezeAndThaw, on each backend: a frozen session keeps its box and
// claude's process; its token is refused exactly as a revoked one; an
// exec thaws it, as does a wake, and the same token works again with the
// same claude; a frozen session sleeps and wakes as any other.
func TestFreezeAndThaw(t *testing.T) {
	r, _ := freezeRunner(t, nil)
	ctx := context.Background()
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			s, err := r.CreateSession(ctx, api.CreateRequest{Name: "fz-" + backend, Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer r.RemoveSession(ctx, s.ID, false)
			// The start is on record, step by step, each step inside it.
			ls := s.LastStart
			total := session.MS(ls.Launched.Sub(ls.Began))
			if ls.Began.IsZero() || ls.BoxMS <= 0 || ls.ChannelMS <= 0 || ls.SelfTestMS <= 0 || ls.ClaudeMS <= 0 ||
				ls.BoxMS+ls.ChannelMS+ls.SelfTestMS+ls.ClaudeMS > total {
				t.Fatalf("the start's record: %+v (%.3f ms in all)", ls, total)
			}
			tok := boxToken(t, r, s.ID)
			pid := panePID(t, r, s.ID)
			if code, body := proxied(t, r, tok); code != 200 {
				t.Fatalf("before freezing: %d %s", code, body)
			}
			_, revokedBody := proxied(t, r, "pdk_st_"+strings.Repeat("A", 43))
			// Someone attached: a freeze sends them away; the channel stays.
			part, err := r.Attach(ctx, s.ID, api.AttachRequest{Role: "observer", Rows: 24, Cols: 80})
			if err != nil {
				t.Fatal(err)
			}
			defer part.Leave()
			link := r.getLive(s.ID).link

			fs, err := r.Freeze(ctx, s.Name)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			for {
				if _, err := part.Read(rctx); err != nil {
					if rctx.Err() != nil {
						t.Fatal("an attached participant stayed through the freeze")
					}
					break
				}
			}
			cancel()
			if lv := r.getLive(s.ID); lv == nil || lv.link != link {
				t.Fatal("the freeze closed the session's channel")
			}
			if !fs.Frozen || fs.Observed != session.Running || fs.BoxID != s.BoxID {
				t.Fatalf("frozen: %+v", fs)
			}
			reqID := regexp.MustCompile(`"request_id":"[^"]*"`)
			if code, body := proxied(t, r, tok); code != 401 || reqID.ReplaceAllString(body, "") != reqID.ReplaceAllString(revokedBody, "") {
				t.Fatalf("a frozen session's token: %d %s (a revoked one: %s)", code, body, revokedBody)
			}
			if again, err := r.Freeze(ctx, s.Name); err != nil || !again.Frozen {
				t.Fatalf("freezing a frozen session: %+v %v", again, err)
			}
			// Frozen for real: the box's processes do not run.
			if backend == "local" {
				if !boxFrozen(t, r, s.ID) {
					t.Fatal("the box's cgroup is not frozen")
				}
			}
			// An exec thaws it: the same claude, the same token, the same channel.
			if got := panePID(t, r, s.ID); got != pid {
				t.Fatalf("claude's pane after a thaw: %s, was %s", got, pid)
			}
			if lv := r.getLive(s.ID); lv == nil || lv.link != link {
				t.Fatal("the thaw made a new channel")
			}
			if cur, _ := r.Session(ctx, s.ID); cur.Frozen {
				t.Fatal("still frozen after an exec")
			}
			if code, _ := proxied(t, r, tok); code != 200 {
				t.Fatalf("the token after a thaw: %d", code)
			}
			// A wake thaws it too.
			if _, err := r.Freeze(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			ws, err := r.Wake(ctx, s.Name)
			if err != nil || ws.Frozen || ws.Observed != session.Running {
				t.Fatalf("wake of a frozen session: %+v %v", ws, err)
			}
			if got := panePID(t, r, s.ID); got != pid {
				t.Fatalf("claude's pane after a wake from frozen: %s, was %s", got, pid)
			}
			// A frozen session sleeps (its box stops) and wakes anew.
			if _, err := r.Freeze(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			ss, err := r.Sleep(ctx, s.Name)
			if err != nil || ss.Frozen || ss.Observed != session.Asleep {
				t.Fatalf("sleep of a frozen session: %+v %v", ss, err)
			}
			if code, _ := proxied(t, r, tok); code != 401 {
				t.Fatalf("the token of a slept session: %d", code)
			}
			if _, err := r.Wake(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			if code, _ := proxied(t, r, boxToken(t, r, s.ID)); code != 200 {
				t.Fatalf("after sleep and wake: %d", code)
			}
		})
	}
	// Only a running session freezes.
	if _, err := r.Freeze(ctx, "no-such"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("freeze of no session: %v", err)
	}
}

// boxFrozen reads the local box's cgroup state.
func boxFrozen(t testing.TB, r *Runner, id string) bool {
	t.Helper()
	s, _ := r.Session(context.Background(), id)
	matches, _ := filepath.Glob("/sys/fs/cgroup/unified/paddock/" + s.BoxID + "/cgroup.events")
	more, _ := filepath.Glob("/sys/fs/cgroup/paddock/" + s.BoxID + "/cgroup.events")
	matches = append(matches, more...)
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		return bytes.Contains(b, []byte("frozen 1"))
	}
	t.Fatalf("no cgroup.events for box %s", s.BoxID)
	return false
}

// TestAutoFreezeAndSleep: sessions.freeze_after freezes a session that
// waited that long, recording why; sessions.sleep_after then sleeps it.
func TestAutoFreezeAndSleep(t *testing.T) {
	r, _ := freezeRunner(t, func(c *config.Config) {
		c.Sessions.FreezeAfter = config.Duration(10 * time.Second)
		c.Sessions.SleepAfter = config.Duration(20 * time.Second)
	})
	ctx := context.Background()
	s, err := r.CreateSession(ctx, api.CreateRequest{Name: "auto", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(ctx, s.ID, false)
	waitFor := func(what string, ok func(session.Session) bool) session.Session {
		t.Helper()
		var cur session.Session
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if cur, _ = r.Session(ctx, s.ID); ok(cur) {
				return cur
			}
		}
		t.Fatalf("never %s: %+v", what, cur)
		return cur
	}
	fz := waitFor("frozen", func(c session.Session) bool { return c.Frozen })
	if !strings.Contains(fz.Reason, "sessions.freeze_after") {
		t.Fatalf("the reason: %q", fz.Reason)
	}
	sl := waitFor("asleep", func(c session.Session) bool { return c.Observed == session.Asleep })
	if sl.Frozen || !strings.Contains(sl.Reason, "sessions.sleep_after") {
		t.Fatalf("asleep: %+v", sl)
	}
}

// BenchmarkFreezeWake: wake → a key echoed in claude's prompt, from a
// frozen session and from a stopped box, per backend, in one run with the
// rounds interleaved. The key goes in through the terminal mirror, as a
// person's would.
func BenchmarkFreezeWake(b *testing.B) {
	r, _ := freezeRunner(b, nil)
	ctx := context.Background()
	type row struct{ awake, frozen, thawed, stopped []time.Duration }
	rows := map[string]*row{}
	backends := []string{"local", "docker"}
	ids := map[string]string{}
	for _, be := range backends {
		s, err := r.CreateSession(ctx, api.CreateRequest{Name: "fzb-" + be, Backend: be})
		if err != nil {
			b.Fatal(err)
		}
		defer r.RemoveSession(ctx, s.ID, false)
		ids[be], rows[be] = s.ID, &row{}
		echo(b, r, s.ID, 'ω') // the prompt is up
	}
	// Letters no redraw of claude's screen holds.
	keys := []rune("αβγδεζηθικλμνξοπρστυφχψ")
	k := 0
	for i := 0; i < b.N; i++ {
		for round := 0; round < perf.Rounds(5); round++ {
			for _, be := range backends {
				id := ids[be]
				// The baseline: the same attach and echo, nothing frozen.
				t0 := time.Now()
				echo(b, r, id, keys[k%len(keys)])
				rows[be].awake = append(rows[be].awake, time.Since(t0))
				k++
				if _, err := r.Freeze(ctx, id); err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				if _, err := r.Wake(ctx, id); err != nil {
					b.Fatal(err)
				}
				rows[be].thawed = append(rows[be].thawed, time.Since(t0))
				echo(b, r, id, keys[k%len(keys)])
				rows[be].frozen = append(rows[be].frozen, time.Since(t0))
				k++
				if _, err := r.Sleep(ctx, id); err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				if _, err := r.Wake(ctx, id); err != nil {
					b.Fatal(err)
				}
				echo(b, r, id, keys[k%len(keys)])
				rows[be].stopped = append(rows[be].stopped, time.Since(t0))
				k++
			}
		}
	}
	t := perf.Table{Title: "Wake → a key echoed in claude's prompt (ms)", Header: []string{"backend", "awake: attach → echo p50", "from frozen p50", "p90", "of it, the wake call p50", "from stopped p50", "p90"}}
	for _, be := range backends {
		rw := rows[be]
		t.Add(be, perf.MS(perf.Pct(rw.awake, .5)), perf.MS(perf.Pct(rw.frozen, .5)), perf.MS(perf.Pct(rw.frozen, .9)), perf.MS(perf.Pct(rw.thawed, .5)), perf.MS(perf.Pct(rw.stopped, .5)), perf.MS(perf.Pct(rw.stopped, .9)))
		b.ReportMetric(float64(perf.Pct(rw.frozen, .5).Microseconds())/1000, "frozen-wake-p50-ms/"+be)
	}
	t.Write(os.Stderr)
}

// echo attaches as a driver, types key once claude's prompt is drawn and
// waits until the key comes back on the screen, then erases it.
func echo(b testing.TB, r *Runner, id string, key rune) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var part api.Participant
	var err error
	for {
		if part, err = r.Attach(ctx, id, api.AttachRequest{Role: "driver", Rows: 40, Cols: 120}); err == nil {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("attach: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer part.Leave()
	var screen bytes.Buffer
	for !bytes.Contains(screen.Bytes(), []byte("bypass permissions")) {
		out, err := part.Read(ctx)
		if err != nil {
			b.Fatalf("the prompt never showed: %v\n%q", err, screen.String())
		}
		screen.Write(out)
	}
	if err := part.Send(ctx, []byte(string(key))); err != nil {
		b.Fatal(err)
	}
	for {
		out, err := part.Read(ctx)
		if err != nil {
			b.Fatalf("no echo of %q: %v", key, err)
		}
		if bytes.ContainsRune(out, key) {
			break
		}
	}
	part.Send(ctx, []byte{0x7f}) // erased: the prompt stays empty
}

// TestReconcileStopsAnAsleepSessionsBox: a box of an asleep session found
// running at the Runner's start (an export that started it, cut short by a
// restart) is stopped; the session stays asleep and gets no token.
func TestReconcileStopsAnAsleepSessionsBox(t *testing.T) {
	r, _ := freezeRunner(t, nil)
	ctx := context.Background()
	s, err := r.CreateSession(ctx, api.CreateRequest{Name: "asleep-box", Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(ctx, s.ID, false)
	if s, err = r.Sleep(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	be, _ := r.backend(ctx, "local")
	if _, err := be.Start(ctx, s.BoxID); err != nil {
		t.Fatal(err)
	}
	unlock := r.sessionLock(s.ID)
	r.reconcileOne(ctx, &s)
	unlock()
	bx, err := be.Inspect(ctx, s.BoxID)
	if err != nil || bx.State == sandbox.StateRunning {
		t.Fatalf("the asleep session's box after reconcile: %+v %v", bx, err)
	}
	cur, _ := r.Session(ctx, s.ID)
	if cur.Observed != session.Asleep || r.tokens.Live(s.ID) {
		t.Fatalf("after reconcile: %s, token %v", cur.Observed, r.tokens.Live(s.ID))
	}
}
