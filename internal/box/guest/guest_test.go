package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// startGuest runs a guest in this process (without reaping) and connects.
func startGuest(t *testing.T) *channel.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Socket: sock}) }()
	t.Cleanup(func() { cancel(); <-done })
	return dialGuest(t, sock)
}

// dialGuest connects a channel to the guest at sock once it listens
// (within 2 s); the channel is closed at the test's end.
func dialGuest(t *testing.T, sock string) *channel.Client {
	t.Helper()
	var c net.Conn
	var err error
	for i := 0; i < 400; i++ {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	cl, err := channel.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

var env = []string{"PATH=/usr/bin:/bin", "LANG=C"}

func TestPing(t *testing.T) {
	cl := startGuest(t)
	r, rtt, err := cl.Ping(time.Now().Add(5 * time.Second))
	if err != nil || !r.OK || r.PID != os.Getpid() || rtt <= 0 {
		t.Fatalf("%+v %v %v", r, rtt, err)
	}
}

func TestExecOutputsAndExitCode(t *testing.T) {
	cl := startGuest(t)
	var out, errb bytes.Buffer
	p, err := cl.Exec(channel.ExecOptions{Argv: []string{"sh", "-c", "echo out; echo err >&2; cat; exit 7"}, Env: env, Dir: "/tmp", Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("from stdin\n"))
	p.CloseStdin()
	code, err := p.Wait()
	if err != nil || code != 7 || out.String() != "out\nfrom stdin\n" || errb.String() != "err\n" {
		t.Fatalf("code %d err %v out %q errb %q", code, err, out.String(), errb.String())
	}
	// The environment is exactly the one given.
	out.Reset()
	p, _ = cl.Exec(channel.ExecOptions{Argv: []string{"env"}, Env: []string{"A=1", "PATH=/usr/bin:/bin"}, Stdout: &out})
	p.Wait()
	if strings.TrimSpace(out.String()) != "A=1\nPATH=/usr/bin:/bin" {
		t.Fatalf("env %q", out.String())
	}
	if _, err := cl.Exec(channel.ExecOptions{Argv: []string{"no-such-program"}, Env: env}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing program: %v", err)
	}
}

func TestExecLargeOutput(t *testing.T) {
	cl := startGuest(t)
	var out bytes.Buffer
	p, err := cl.Exec(channel.ExecOptions{Argv: []string{"head", "-c", "5000000", "/dev/zero"}, Env: env, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 0 || err != nil || out.Len() != 5000000 {
		t.Fatalf("%d %v %d", code, err, out.Len())
	}
}

func TestExecTTYAndSignal(t *testing.T) {
	cl := startGuest(t)
	var out testenv.Buffer
	p, err := cl.Exec(channel.ExecOptions{Argv: []string{"sh", "-c", "stty size; tty; read x; echo got $x"}, Env: env, TTY: true, Rows: 33, Cols: 111, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "33 111")
	p.Write([]byte("hello\r"))
	code, err := p.Wait()
	if err != nil || code != 0 || !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "got hello") {
		t.Fatalf("%d %v %q", code, err, out.String())
	}
	// Signals reach the process; the code says which.
	p, _ = cl.Exec(channel.ExecOptions{Argv: []string{"sleep", "30"}, Env: env})
	time.Sleep(100 * time.Millisecond)
	p.Signal(syscall.SIGTERM)
	if code, _ := p.Wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("code %d", code)
	}
}

func TestExecKilledWhenStreamCloses(t *testing.T) {
	cl := startGuest(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	p, err := cl.Exec(channel.ExecOptions{Argv: []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 60"}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for i := 0; i < 100 && pid == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		pid = atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	p.Close()
	for i := 0; i < 200; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("process outlived its stream")
}

func TestListenForward(t *testing.T) {
	cl := startGuest(t)
	sock := filepath.Join(t.TempDir(), "fwd.sock")
	if err := cl.Listen("unix:"+sock, "echo", time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := cl.Listen("127.0.0.1:0", "echo", time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The Runner's side: answer "echo" streams by echoing, refuse others.
	go func() {
		for {
			st, h, br, err := cl.Accept()
			if err != nil {
				return
			}
			if h.Type != channel.TypeForward || h.Service != "echo" {
				channel.WriteJSONLine(st, channel.Reply{Error: "no such service"})
				st.Close()
				continue
			}
			channel.WriteJSONLine(st, channel.Reply{OK: true})
			go func() { io.Copy(st, br); st.Close() }()
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("paddock"), 100000)
	go func() { c.Write(msg); c.(*net.UnixConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through the channel: %d bytes, %v", len(got), err)
	}
}

func TestPut(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "x", "a.json"), filepath.Join(dir, "b.json")
	if err := Put(strings.NewReader("{\"a\":1}\x00{\"b\":2}"), []string{a, b}); err != nil {
		t.Fatal(err)
	}
	ga, _ := os.ReadFile(a)
	gb, _ := os.ReadFile(b)
	if string(ga) != `{"a":1}` || string(gb) != `{"b":2}` {
		t.Fatalf("%q %q", ga, gb)
	}
	if err := Put(strings.NewReader("only one"), []string{a, b}); err == nil {
		t.Fatal("missing part accepted")
	}
}

// TestSelfTestOfAnOlderGuest: a guest that does not know the selftest
// and put streams (an image built before it) answers as every guest answers an
// unknown type, and the client says so with ErrUnknownType, which the
// Runner takes to run `paddock guest selftest` as a process instead.
func TestSelfTestOfAnOlderGuest(t *testing.T) {
	a, b := net.Pipe()
	srv, err := channel.NewServer(b)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			st, _, h, err := srv.AcceptHeader()
			if err != nil {
				return
			}
			// What Guest.handle's default case answers.
			_ = channel.WriteJSONLine(st, channel.Reply{Error: fmt.Sprintf("unknown stream type %q", h.Type)})
			st.Close()
		}
	}()
	cl, err := channel.NewClient(a)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.SelfTest("127.0.0.1:3128", time.Now().Add(5*time.Second)); !errors.Is(err, channel.ErrUnknownType) {
		t.Fatalf("an older guest's answer: %v", err)
	}
	// The same for put, which the Runner then leaves to the start script.
	if err := cl.Put([]channel.PutFile{{Path: "/tmp/x", Data: []byte("x")}}, nil, time.Now().Add(5*time.Second)); !errors.Is(err, channel.ErrUnknownType) {
		t.Fatalf("an older guest's answer to put: %v", err)
	}
	// And this guest knows it: its answer is the checks, as the command prints them.
	out, err := startGuest(t).SelfTest("", time.Now().Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range ParseChecks(out) {
		names = append(names, c.Name)
	}
	var want []string
	for _, c := range SelfTest("") {
		want = append(want, c.Name)
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("checks over the channel %v, in process %v", names, want)
	}
}

// TestPutOverTheChannel: the guest writes the files it is sent, after
// keeping aside the ones named, and refuses a path that is not clean and
// absolute, or a put that sends less than it announced, writing nothing.
func TestPutOverTheChannel(t *testing.T) {
	cl := startGuest(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "cfg", "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(b, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	dl := time.Now().Add(10 * time.Second)
	if err := cl.Put([]channel.PutFile{{Path: a, Data: []byte(`{"a":1}`)}, {Path: b, Data: []byte(`{"b":2}`)}, {Path: filepath.Join(dir, "empty"), Data: nil}}, []string{b}, dl); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{a: `{"a":1}`, b: `{"b":2}`, b + ".invalid": "not json", filepath.Join(dir, "empty"): ""} {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", p, got, err, want)
		}
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of a written file: %v %v", fi.Mode(), err)
	}
	for _, bad := range []string{"rel/x", dir + "/../x", dir + "//x", ""} {
		err := cl.Put([]channel.PutFile{{Path: bad, Data: []byte("x")}}, nil, dl)
		var re *channel.RemoteError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, "clean absolute path") {
			t.Errorf("put to %q: %v", bad, err)
		}
	}
	if err := cl.Put(nil, []string{"../x"}, dl); err == nil {
		t.Error("keeping aside a relative path was not refused")
	}
	// A file announced larger than what follows: the stream ends first,
	// and nothing is written.
	short := filepath.Join(dir, "short")
	g := &Guest{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	runner, guestEnd := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.put(guestEnd, bufio.NewReader(guestEnd), channel.Header{Type: channel.TypePut, Files: []channel.PutFile{{Path: short, Size: 10}}})
	}()
	br := bufio.NewReader(runner)
	var r channel.Reply
	if err := channel.ReadJSONLine(br, &r); err != nil || !r.OK {
		t.Fatalf("the put's first reply: %+v %v", r, err)
	}
	runner.Write([]byte("abc"))
	runner.Close()
	<-done
	if _, err := os.Stat(short); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a short put wrote its file: %v", err)
	}
}
