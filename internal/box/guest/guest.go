// Package guest is `paddock guest`, PID 1 in every box. It reaps orphans,
// runs processes with or without a terminal, and serves the channel
// (internal/box/channel) on a unix socket inside the box, which the backend
// connects to the Runner: directly for the local backend, through
// `paddock guest bridge` under `docker exec -i` for Docker.
//
// The guest trusts whoever can reach its socket, which is only the box
// itself and the Runner: anything the agent could ask of it (run a process,
// listen on a port in the box) it can already do. It grants no way out.
package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/sessions/activity"
)

// DefaultSocket is where the guest listens inside a box (a private tmpfs).
const DefaultSocket = "/run/paddock/guest.sock"

// Options configure the guest.
type Options struct {
	Socket string
	// Reap makes the guest reap every child, as PID 1 must.
	Reap bool
	Log  *slog.Logger
}

// Guest serves channels.
type Guest struct {
	opts    Options
	log     *slog.Logger
	procs   *procs
	reports *reportHub // hook reports, fanned out to events streams (hook.go)

	mu        sync.Mutex
	listeners map[string]net.Listener // by address; a new listen replaces the old
}

// Run serves until ctx ends or SIGTERM; then it stops every process.
func Run(ctx context.Context, o Options) error {
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	g := &Guest{opts: o, log: o.Log, procs: newProcs(o.Reap), reports: newReportHub(), listeners: map[string]net.Listener{}}
	g.procs.orphan = func() { g.reports.publish(activity.Report{Event: activity.EventReaped}) }
	if err := os.MkdirAll(dirOf(o.Socket), 0o700); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	_ = os.Remove(o.Socket)
	ln, err := net.Listen("unix", o.Socket)
	if err != nil {
		return fmt.Errorf("guest: listen: %w", err)
	}
	_ = os.Chmod(o.Socket, 0o600)
	// After the socket is up, so the Runner does not wait for it.
	go prestartThreads(8)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := g.listenHooks(ctx, dirOf(o.Socket)+"/"+HookSocketName); err != nil {
		g.log.Warn("guest: no hook socket; claude's activity will not be reported", "error", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				g.shutdown()
				return nil
			}
			return fmt.Errorf("guest: accept: %w", err)
		}
		go g.serve(c)
	}
}

// prestartThreads makes the Go runtime start n OS threads now, while the
// box's pids limit has room; the runtime keeps idle threads for reuse, so
// the guest can still serve the channel when a fork bomb in the box has
// used up every pid. (A Go program that cannot start a thread it needs dies.)
func prestartThreads(n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := syscall.Timespec{Nsec: 5e6}
			_ = syscall.Nanosleep(&ts, nil) // a blocking syscall holds its thread
		}()
	}
	wg.Wait()
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}

// shutdown ends every process of the box: SIGTERM to all, then SIGKILL.
func (g *Guest) shutdown() {
	if os.Getpid() != 1 {
		return
	}
	_ = syscall.Kill(-1, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !hasChildren() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-1, syscall.SIGKILL)
}

func hasChildren() bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name() != "1" && e.Name() != "self" && e.Name() != "thread-self" && e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			return true
		}
	}
	return false
}

// serve runs one channel.
func (g *Guest) serve(c net.Conn) {
	srv, err := channel.NewServer(c)
	if err != nil {
		c.Close()
		return
	}
	defer srv.Close()
	for {
		st, br, h, err := srv.AcceptHeader()
		if err != nil {
			return
		}
		go g.handle(srv, st, br, h)
	}
}

func (g *Guest) handle(srv *channel.Server, st net.Conn, br *bufio.Reader, h channel.Header) {
	if pre21Streams && (h.Type == channel.TypePut || h.Type == channel.TypeSelfTest) {
		unknownType(st, h)
		return
	}
	switch h.Type {
	case channel.TypePing:
		_ = channel.WriteJSONLine(st, channel.Reply{OK: true, Version: version.String(), PID: os.Getpid()})
		st.Close()
	case channel.TypeExec:
		g.exec(st, br, h)
	case channel.TypeEvents:
		g.events(srv, st)
	case channel.TypePut:
		g.put(st, br, h)
	case channel.TypeSelfTest:
		// In the guest's own process: no new process in the box for it.
		if err := channel.WriteJSONLine(st, channel.Reply{OK: true}); err == nil {
			_ = WriteChecks(st, SelfTest(h.Addr))
		}
		st.Close()
	case channel.TypeDial:
		g.dial(st, br, h.Addr)
	case channel.TypeListen:
		err := g.listen(srv, h.Addr, h.Service)
		r := channel.Reply{OK: err == nil}
		if err != nil {
			r.Error = err.Error()
		}
		_ = channel.WriteJSONLine(st, r)
		st.Close()
	default:
		unknownType(st, h)
	}
}

// unknownType answers a stream type this guest does not know; the Runner
// then does the work another way (channel.ErrUnknownType).
func unknownType(st net.Conn, h channel.Header) {
	_ = channel.WriteJSONLine(st, channel.Reply{Error: fmt.Sprintf("unknown stream type %q", h.Type)})
	st.Close()
}

// listen opens addr in the box and forwards each connection over srv.
func (g *Guest) listen(srv *channel.Server, addr, service string) error {
	network, a := "tcp", addr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, a = "unix", p
		_ = os.Remove(p)
	}
	g.mu.Lock()
	if old := g.listeners[addr]; old != nil {
		old.Close() // a new channel (a restarted Runner) takes the address over
		delete(g.listeners, addr)
	}
	g.mu.Unlock()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old listener's port may take a moment to free
		if ln, err = net.Listen(network, a); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.listeners[addr] = ln
	g.mu.Unlock()
	go func() {
		<-srv.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				st, br, err := srv.OpenForward(service)
				if err != nil {
					return
				}
				defer st.Close()
				pipe(c, st, br)
			}()
		}
	}()
	return nil
}

// dial connects a dial stream to a port on the box's loopback: 127.0.0.1
// first, then ::1 (a dev server on "localhost" may listen on either).
// Nothing but loopback is dialled, whatever the header holds.
func (g *Guest) dial(st net.Conn, br *bufio.Reader, addr string) {
	defer st.Close()
	port, err := strconv.Atoi(addr)
	if err != nil || port < 1 || port > 65535 {
		_ = channel.WriteJSONLine(st, channel.Reply{Error: fmt.Sprintf("%q is not a TCP port (1-65535)", addr)})
		return
	}
	var c net.Conn
	for _, host := range []string{"127.0.0.1", "::1"} {
		if c, err = net.DialTimeout("tcp", net.JoinHostPort(host, addr), 5*time.Second); err == nil {
			break
		}
	}
	if err != nil {
		_ = channel.WriteJSONLine(st, channel.Reply{Error: fmt.Sprintf("nothing in the box answers on port %d (%v)", port, errors.Unwrap(err))})
		return
	}
	defer c.Close()
	if channel.WriteJSONLine(st, channel.Reply{OK: true}) != nil {
		return
	}
	pipe(c, st, br)
}

// pipe copies both ways until either side ends, half-closing where it can.
func pipe(local net.Conn, remote net.Conn, rbuf io.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(remote, local)
		// A yamux stream's Close is a half-close: it sends FIN and
		// keeps reading until the peer's FIN.
		_ = remote.Close()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(local, rbuf)
		if cw, ok := local.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// exec runs one process for an exec stream.
func (g *Guest) exec(st net.Conn, br *bufio.Reader, h channel.Header) {
	defer st.Close()
	fail := func(err error) {
		_ = channel.WriteJSONLine(st, channel.Reply{Error: err.Error(), Code: startCode(err)})
	}
	if len(h.Argv) == 0 {
		fail(errors.New("empty argv"))
		return
	}
	path := h.Argv[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path, h.Env)
		if err != nil {
			fail(err)
			return
		}
		path = p
	}
	var (
		proc    *os.Process
		statusc <-chan syscall.WaitStatus
		stdin   io.WriteCloser
		outs    []io.Reader
		master  *os.File
		err     error
	)
	attr := &os.ProcAttr{Dir: h.Dir, Env: h.Env, Sys: &syscall.SysProcAttr{}}
	if h.TTY {
		var slave *os.File
		master, slave, err = openPTY(h.Rows, h.Cols)
		if err != nil {
			fail(err)
			return
		}
		attr.Files = []*os.File{slave, slave, slave}
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
		proc, statusc, err = g.procs.start(path, h.Argv, attr)
		slave.Close()
		if err != nil {
			master.Close()
			fail(err)
			return
		}
		stdin, outs = master, []io.Reader{master}
	} else {
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		errR, errW, _ := os.Pipe()
		attr.Files = []*os.File{inR, outW, errW}
		attr.Sys.Setpgid = true
		proc, statusc, err = g.procs.start(path, h.Argv, attr)
		inR.Close()
		outW.Close()
		errW.Close()
		if err != nil {
			inW.Close()
			outR.Close()
			errR.Close()
			fail(err)
			return
		}
		stdin, outs = inW, []io.Reader{outR, errR}
	}
	if err := channel.WriteJSONLine(st, channel.Reply{OK: true, PID: proc.Pid}); err != nil {
		_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
		return
	}

	var wmu sync.Mutex
	send := func(typ byte, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return channel.WriteFrame(st, typ, b)
	}
	var outWG sync.WaitGroup
	for i, r := range outs {
		typ := channel.FrameStdout
		if i == 1 {
			typ = channel.FrameStderr
		}
		outWG.Add(1)
		go func() {
			defer outWG.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 && send(typ, buf[:n]) != nil {
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	// Frames from the Runner. When the stream ends while the process
	// runs, its process group is killed: nobody is left to see it. Once it
	// has exited, what it left in the background lives on, as with docker exec.
	var exited atomic.Bool
	go func() {
		var buf []byte
		for {
			typ, payload, nb, err := channel.ReadFrame(br, buf)
			buf = nb
			if err != nil {
				if !exited.Load() {
					_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
				}
				return
			}
			switch typ {
			case channel.FrameStdin:
				_, _ = stdin.Write(payload)
			case channel.FrameStdinEOF:
				if !h.TTY {
					stdin.Close()
				} else {
					_, _ = stdin.Write([]byte{4}) // ^D on a terminal
				}
			case channel.FrameResize:
				if rows, cols, ok := channel.ParseResize(payload); ok && master != nil {
					_ = setSize(master, rows, cols)
				}
			case channel.FrameSignal:
				if len(payload) == 1 {
					_ = syscall.Kill(-proc.Pid, syscall.Signal(payload[0]))
				}
			}
		}
	}()
	ws := <-statusc
	exited.Store(true)
	// Output may still be in flight; background children can hold the
	// pipes open forever, so wait for EOF only a short while.
	drained := make(chan struct{})
	go func() { outWG.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(300 * time.Millisecond):
	}
	for _, r := range outs {
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
	}
	if !h.TTY {
		stdin.Close()
	}
	_ = send(channel.FrameExit, channel.ExitPayload(exitCode(ws)))
}

// startCode classifies why a command could not start, as docker exec
// does with its 127 and 126: not there, or there but not runnable.
func startCode(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return channel.CodeNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return channel.CodeCannotRun
	}
	return ""
}

// lookPath resolves a command name with the PATH of the process's env.
func lookPath(name string, env []string) (string, error) {
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// Bridge copies between stdio and the guest's socket: the channel's path
// through `docker exec -i`.
func Bridge(socket string, stdin io.Reader, stdout io.Writer) error {
	var c net.Conn
	var err error
	for i := 0; i < 100; i++ { // the guest may still be starting
		if c, err = net.Dial("unix", socket); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("guest bridge: %w", err)
	}
	defer c.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c, stdin); _ = c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stdout, c); done <- struct{}{} }()
	<-done
	return nil
}

// Put writes the NUL-separated parts of r to paths, one part each, each
// atomically (writeFile), creating parent directories. Config files in
// JSON never hold a NUL. It is `paddock guest put`, for a Runner whose
// guest is older than the put stream (put).
func Put(r io.Reader, paths []string) error {
	data, err := io.ReadAll(io.LimitReader(r, channel.MaxPut))
	if err != nil {
		return err
	}
	parts := strings.SplitN(string(data), "\x00", len(paths))
	if len(parts) != len(paths) {
		return fmt.Errorf("guest put: %d parts on stdin for %d files", len(parts), len(paths))
	}
	for i, p := range paths {
		if err := writeFile(p, []byte(parts[i])); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data to p atomically (a temporary file in the same
// directory, then rename), mode 0600, creating parent directories 0700.
func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(dirOf(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".paddock-tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// put is channel.TypePut: the files come on the stream after the reply,
// and are written by this process (no new one in the box), after the
// files to keep aside are renamed to <path>.invalid. A second reply says
// how it went.
func (g *Guest) put(st net.Conn, br *bufio.Reader, h channel.Header) {
	defer st.Close()
	refuse := func(msg string) { _ = channel.WriteJSONLine(st, channel.Reply{Error: msg}) }
	total := 0
	for _, f := range h.Files {
		if f.Size < 0 || f.Size > channel.MaxPut || !cleanAbs(f.Path) {
			refuse(fmt.Sprintf("put: %q (%d bytes): a file must have a clean absolute path and a size within %d", f.Path, f.Size, channel.MaxPut))
			return
		}
		total += f.Size
	}
	for _, p := range h.Aside {
		if !cleanAbs(p) {
			refuse(fmt.Sprintf("put: keep aside %q: not a clean absolute path", p))
			return
		}
	}
	if total > channel.MaxPut {
		refuse(fmt.Sprintf("put: %d bytes, more than %d", total, channel.MaxPut))
		return
	}
	if channel.WriteJSONLine(st, channel.Reply{OK: true}) != nil {
		return
	}
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	data := make([][]byte, len(h.Files))
	for i, f := range h.Files {
		data[i] = make([]byte, f.Size)
		if _, err := io.ReadFull(br, data[i]); err != nil {
			refuse("put: read " + f.Path + ": " + err.Error())
			return
		}
	}
	for _, p := range h.Aside {
		if err := os.Rename(p, p+".invalid"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.log.Warn("guest: put: keep aside", "path", p, "error", err)
		}
	}
	for i, f := range h.Files {
		if err := writeFile(f.Path, data[i]); err != nil {
			refuse("put: " + err.Error())
			return
		}
	}
	_ = channel.WriteJSONLine(st, channel.Reply{OK: true})
}

func cleanAbs(p string) bool { return strings.HasPrefix(p, "/") && path.Clean(p) == p }
