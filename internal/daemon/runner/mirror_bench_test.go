package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/mirror"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/testkit/perf"
)

// notify is a writer that signals when its bytes contain a marker.
type notify struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	hit  chan struct{}
}

func (n *notify) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.buf.Write(p)
	if n.want != "" && strings.Contains(n.buf.String(), n.want) {
		n.want = ""
		close(n.hit)
	}
	return len(p), nil
}

func (n *notify) expect(s string) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.buf.Reset()
	n.want, n.hit = s, make(chan struct{})
	return n.hit
}

// BenchmarkTerminal: attach → first output and key → echo, through the
// mirror and through a plain `tmux attach` on a pty, in the same box, in
// one run with rounds interleaved; a local box on bwrap, then one on
// gVisor's runsc where the local backend has it. The pane runs cat, so a
// key comes back as the terminal's echo.
func BenchmarkTerminal(b *testing.B) {
	be := testBackends(b)["local"]
	rts := []string{runtimes.Bwrap}
	if slices.Contains(be.Capabilities(context.Background()).Runtimes, runtimes.Runsc) {
		rts = append(rts, runtimes.Runsc)
	}
	tb := perf.Table{Title: "Terminal: mirror vs plain tmux attach, same box (ms)", Header: []string{"runtime", "measure", "tmux attach p50", "mirror p50", "tmux attach p90", "mirror p90", "mirror added p50"}}
	for _, rt := range rts {
		mFirst, mCold, pFirst, mEcho, pEcho := terminalSamples(b, be, rt)
		tb.Add(rt, "attach → first output (mirror running)", perf.MS(perf.Pct(pFirst, .5)), perf.MS(perf.Pct(mFirst, .5)), perf.MS(perf.Pct(pFirst, .9)), perf.MS(perf.Pct(mFirst, .9)), perf.MS(perf.Pct(mFirst, .5)-perf.Pct(pFirst, .5)))
		tb.Add(rt, "first attach of a session (control client start + join)", perf.MS(perf.Pct(pFirst, .5)), perf.MS(perf.Pct(mCold, .5)), perf.MS(perf.Pct(pFirst, .9)), perf.MS(perf.Pct(mCold, .9)), perf.MS(perf.Pct(mCold, .5)-perf.Pct(pFirst, .5)))
		tb.Add(rt, "key → echo", perf.MS(perf.Pct(pEcho, .5)), perf.MS(perf.Pct(mEcho, .5)), perf.MS(perf.Pct(pEcho, .9)), perf.MS(perf.Pct(mEcho, .9)), perf.MS(perf.Pct(mEcho, .5)-perf.Pct(pEcho, .5)))
	}
	tb.Write(os.Stderr)
}

// terminalSamples is BenchmarkTerminal's measurement in one box on
// runtime rt.
func terminalSamples(b *testing.B, be sandbox.Backend, rt string) (mFirst, mCold, pFirst, mEcho, pEcho []time.Duration) {
	ctx := context.Background()
	bx, err := be.Create(ctx, sandbox.CreateOptions{Session: "bench-term-" + rt, Runtime: rt})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
	if _, err := be.Start(ctx, bx.ID); err != nil {
		b.Fatal(err)
	}
	conn, err := be.Connect(ctx, bx.ID)
	if err != nil {
		b.Fatal(err)
	}
	cl, _ := channel.NewClient(conn)
	defer cl.Close()
	env := []string{"PATH=/usr/bin:/bin", "TERM=xterm-256color", "HOME=" + sandbox.HomeDir}
	if out, code, err := runIn(cl, env, nil, "tmux", "-L", "b", "-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "80", "-y", "24", "cat"); err != nil || code != 0 {
		b.Fatalf("tmux: %s %v", out, err)
	}
	pane, _, _ := runIn(cl, env, nil, "tmux", "-L", "b", "display-message", "-p", "-t", "b", "#{pane_id}")
	pane = strings.TrimSpace(pane)

	for i := 0; i < b.N; i++ {
		for r := 0; r < 10; r++ {
			// Mirror: a control-mode client over the channel, then Join.
			pr, pw := io.Pipe()
			cold := time.Now()
			cc, err := cl.Exec(channel.ExecOptions{Argv: []string{"tmux", "-L", "b", "-C", "attach", "-t", "b"}, Env: env, Stdout: pw})
			if err != nil {
				b.Fatal(err)
			}
			m := mirror.New(cc, pr, pane)
			t0 := time.Now()
			part, err := m.Join(ctx, mirror.Driver, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := part.Read(ctx); err != nil {
				b.Fatal(err)
			}
			mFirst = append(mFirst, time.Since(t0))
			mCold = append(mCold, time.Since(cold))
			for k := 0; k < 20; k++ {
				key := fmt.Sprintf("%c", 'a'+k)
				t0 = time.Now()
				part.Send(ctx, []byte(key))
				for {
					out, err := part.Read(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if bytes.Contains(out, []byte(key)) {
						break
					}
				}
				mEcho = append(mEcho, time.Since(t0))
			}
			part.Send(ctx, []byte("\r"))
			part.Leave()
			cc.Close()
			pw.Close()

			// Plain: tmux attach on a pty over the same channel.
			n := &notify{}
			hit := n.expect("\x1b[")
			t0 = time.Now()
			p, err := cl.Exec(channel.ExecOptions{Argv: []string{"tmux", "-L", "b", "attach", "-t", "b"}, Env: env, TTY: true, Rows: 24, Cols: 80, Stdout: n})
			if err != nil {
				b.Fatal(err)
			}
			<-hit
			pFirst = append(pFirst, time.Since(t0))
			time.Sleep(20 * time.Millisecond) // let the first screen settle
			for k := 0; k < 20; k++ {
				key := fmt.Sprintf("%c", 'A'+k)
				hit := n.expect(key)
				t0 = time.Now()
				p.Write([]byte(key))
				select {
				case <-hit:
				case <-time.After(10 * time.Second):
					b.Fatal("no echo through tmux attach")
				}
				pEcho = append(pEcho, time.Since(t0))
			}
			p.Write([]byte("\r"))
			p.Close()
		}
	}
	return mFirst, mCold, pFirst, mEcho, pEcho
}
