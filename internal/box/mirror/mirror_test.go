package mirror

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// realTmux starts a tmux server running sh in a 80x24 pane and a control
// client attached to it; it returns the mirror and a function that reads
// the pane the way tmux itself sees it.
func realTmux(t *testing.T) (*Mirror, func() string) {
	t.Helper()
	testenv.LookPath(t, "tmux")
	sock := fmt.Sprintf("pdk-mirror-%d", time.Now().UnixNano())
	tm := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v %s", args, err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", "m", "-x", "80", "-y", "24", "env", "PS1=$ ", "TERM=xterm", "sh")
	t.Cleanup(func() { exec.Command("tmux", "-L", sock, "kill-server").Run() })
	pane := strings.TrimSpace(tm("display-message", "-p", "-t", "m", "#{pane_id}"))
	cc := exec.Command("tmux", "-L", sock, "-C", "attach", "-t", "m")
	w, _ := cc.StdinPipe()
	r, _ := cc.StdoutPipe()
	if err := cc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); cc.Process.Kill(); cc.Wait() })
	return New(w, r, pane), func() string { return tm("capture-pane", "-p", "-t", pane) }
}

func readUntil(t *testing.T, p *Participant, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var all strings.Builder
	for !strings.Contains(all.String(), want) {
		b, err := p.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v; got %q", want, err, all.String())
		}
		all.Write(b)
	}
	return all.String()
}

func TestLateJoinerSeesTheScreen(t *testing.T) {
	m, _ := realTmux(t)
	ctx := context.Background()
	d, err := m.Join(ctx, Driver, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(ctx, []byte("echo mark-$((40+2))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, d, "mark-42")
	late, err := m.Join(ctx, Observer, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := late.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(snap, []byte("\x1b[0m\x1b[H\x1b[2J")) || !bytes.Contains(snap, []byte("mark-42")) || !bytes.Contains(snap, []byte("echo mark-$((40+2))")) {
		t.Fatalf("the late joiner's first output is not the screen: %q", snap)
	}
	// And then the live output.
	d.Send(ctx, []byte("echo live-$((1+1))\r"))
	readUntil(t, late, "live-2")
}

func TestObserverCannotType(t *testing.T) {
	m, screen := realTmux(t)
	ctx := context.Background()
	o, err := m.Join(ctx, Observer, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m.Join(ctx, Driver, 24, 80)
	if err := o.Send(ctx, []byte("echo observer-typed\r")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("observer send: %v", err)
	}
	d.Send(ctx, []byte("echo driver-$((2*3))\r"))
	readUntil(t, d, "driver-6")
	if s := screen(); strings.Contains(s, "observer-typed") || !strings.Contains(s, "driver-6") {
		t.Fatalf("screen: %s", s)
	}
}

func TestStalledParticipantDoesNotSlowDriver(t *testing.T) {
	m, _ := realTmux(t)
	m.SetQueueLen(8)
	ctx := context.Background()
	stalled, err := m.Join(ctx, Observer, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m.Join(ctx, Driver, 24, 80)
	// Much more output than a queue holds, which the stalled one never reads.
	start := time.Now()
	d.Send(ctx, []byte("i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; echo done-$((7*6))\r"))
	readUntil(t, d, "done-42")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the driver waited %v", took)
	}
	// The stalled one fell behind: what it had queued is gone, and its next
	// read is a fresh snapshot of the screen as it is now.
	rs, err := stalled.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(rs, []byte("\x1b[0m\x1b[H\x1b[2J")) || !bytes.Contains(rs, []byte("done-42")) {
		t.Fatalf("after falling behind, the participant got %q, not a fresh screen", rs)
	}
}

func TestSizePolicySmallestDriver(t *testing.T) {
	m, _ := realTmux(t)
	ctx := context.Background()
	a, _ := m.Join(ctx, Driver, 30, 100)
	b, _ := m.Join(ctx, Driver, 20, 70)
	_, _ = m.Join(ctx, Observer, 10, 40) // observers do not shrink the pane
	lines, err := m.command(ctx, "display-message -p -t "+m.pane+" '#{pane_width}x#{pane_height}'")
	if err != nil || len(lines) != 1 || lines[0] != "70x20" {
		t.Fatalf("pane size %v %v", lines, err)
	}
	b.Leave()
	a.Resize(ctx, 30, 100)
	lines, _ = m.command(ctx, "display-message -p -t "+m.pane+" '#{pane_width}x#{pane_height}'")
	if len(lines) != 1 || lines[0] != "100x30" {
		t.Fatalf("pane size after the small driver left %v", lines)
	}
}

// TestCommandsWaitForAttach: tmux may run commands it reads before the
// attach itself has finished, and sends the client no output until then;
// so no command goes out before the attach's reply (flags 0), and a reply
// with flags 0 is never taken for the answer to one of ours.
func TestCommandsWaitForAttach(t *testing.T) {
	inR, inW := io.Pipe()   // what the mirror writes (tmux's stdin)
	outR, outW := io.Pipe() // what tmux writes
	m := New(inW, outR, "%0")
	got := make(chan []string, 1)
	go func() {
		lines, err := m.command(context.Background(), "display-message -p x")
		if err != nil {
			t.Error(err)
		}
		got <- lines
	}()
	wire := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(inR).ReadString('\n')
		wire <- l
	}()
	select {
	case l := <-wire:
		t.Fatalf("%q went out before the client was attached", l)
	case <-time.After(200 * time.Millisecond):
	}
	io.WriteString(outW, "%begin 10 1 0\n%end 10 1 0\n") // the attach's reply
	select {
	case l := <-wire:
		if l != "display-message -p x\n" {
			t.Fatalf("wire: %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the command never went out after the attach")
	}
	io.WriteString(outW, "%begin 10 2 0\n%end 10 2 0\n%begin 10 3 1\nours\n%end 10 3 1\n")
	select {
	case lines := <-got:
		if len(lines) != 1 || lines[0] != "ours" {
			t.Fatalf("the command got %q", lines)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	outW.Close()
}

// TestQueueBytesBound: the chunks come from the box, up to a megabyte
// each, so a stalled participant's queue is bounded in bytes as well as
// in chunks: past QueueBytes it is dropped for a resync, and what Read
// takes out is no longer counted.
func TestQueueBytesBound(t *testing.T) {
	p := &Participant{q: make(chan []byte, QueueLen)}
	chunk := make([]byte, 1<<20)
	for i := 0; i < QueueBytes>>20; i++ {
		p.offer(chunk)
	}
	if p.resync || p.queued.Load() != QueueBytes {
		t.Fatalf("within the bound: resync %v, %d bytes queued", p.resync, p.queued.Load())
	}
	p.offer(chunk)
	if !p.resync || len(p.q) != 0 || p.queued.Load() != 0 {
		t.Fatalf("past the bound: resync %v, %d chunks and %d bytes queued", p.resync, len(p.q), p.queued.Load())
	}
	p = &Participant{q: make(chan []byte, QueueLen)}
	p.offer([]byte("abc"))
	p.offer([]byte("de"))
	for _, want := range []string{"abc", "de"} {
		b, err := p.Read(context.Background())
		if err != nil || string(b) != want {
			t.Fatalf("read %q %v", b, err)
		}
	}
	if p.queued.Load() != 0 {
		t.Fatalf("%d bytes still counted after reading all", p.queued.Load())
	}
}

// TestEvict: every participant's Read ends with ErrClosed and a Leave
// after it is harmless, while the mirror goes on: a new participant joins
// and drives.
func TestEvict(t *testing.T) {
	m, _ := realTmux(t)
	ctx := context.Background()
	d, err := m.Join(ctx, Driver, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	o, err := m.Join(ctx, Observer, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	m.Evict()
	for _, p := range []*Participant{d, o} {
		for {
			if _, err := p.Read(ctx); errors.Is(err, ErrClosed) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		p.Leave()
	}
	select {
	case <-m.Done():
		t.Fatal("the mirror ended with its participants")
	default:
	}
	again, err := m.Join(ctx, Driver, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	again.Send(ctx, []byte("echo after-$((3+4))\r"))
	readUntil(t, again, "after-7")
}

// TestPaste: text goes in as one bracketed paste, byte for byte, in
// pieces when long; an ESC in it is refused and nothing is typed.
func TestPaste(t *testing.T) {
	m, _ := realTmux(t)
	ctx := context.Background()
	d, err := m.Join(ctx, Driver, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 3*pasteChunk; i++ {
		fmt.Fprintf(&text, "line %d: ünïcode `quotes` \"and\" $HOME;\n", i)
	}
	want := pasteStart + text.String() + pasteEnd + "\r" // and Keys' Enter
	out := t.TempDir() + "/pasted"
	// The pane's reader takes exactly the bytes the paste should be.
	if err := d.Send(ctx, []byte(fmt.Sprintf("stty raw -echo; head -c %d > %s; stty sane; echo got-$((6*7))\r", len(want), out))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // stty has run
	if err := m.Paste(ctx, []byte("a\x1b[201~b")); !errors.Is(err, ErrPasteEscape) {
		t.Fatalf("a paste with an ESC: %v", err)
	}
	if err := m.Paste(ctx, text.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := m.Keys(ctx, []byte("\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, d, "got-42") // not the typed line's echo: head has ended
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("the pane read %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(string(got), want))
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
