package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
)

// The exec and attach streams: a hijacked HTTP connection carrying the
// channel's frames, both ways (serveExec, serveAttach; Client.Exec,
// Client.Attach).

// frameOut writes frames to a hijacked connection once it is open.
type frameOut struct {
	mu    sync.Mutex
	w     io.Writer
	typ   byte
	ready chan struct{}
}

func (f *frameOut) Write(p []byte) (int, error) {
	<-f.ready
	f.mu.Lock()
	defer f.mu.Unlock()
	for off := 0; off < len(p); off += 32 << 10 {
		if err := channel.WriteFrame(f.w, f.typ, p[off:min(off+32<<10, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func serveExec(w http.ResponseWriter, r *http.Request, b Backend) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeExec) {
		writeErr(w, fmt.Errorf("exec needs Upgrade: %s: %w", UpgradeExec, errdefs.ErrInvalid))
		return
	}
	var req ExecRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	ready := make(chan struct{})
	var wmu sync.Mutex
	var conn net.Conn
	out := &frameOut{typ: channel.FrameStdout, ready: ready, mu: sync.Mutex{}}
	errw := &frameOut{typ: channel.FrameStderr, ready: ready}
	// Both writers share one lock on the connection.
	lw := &lockedWriter{mu: &wmu}
	out.w, errw.w = lw, lw
	p, err := b.StartExec(r.Context(), r.PathValue("ref"), req, out, errw)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer p.Close()
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	conn = c
	defer conn.Close()
	lw.w = conn
	_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+UpgradeExec+"\r\nConnection: Upgrade\r\n\r\n")
	close(ready)
	go func() {
		var buf []byte
		for {
			typ, payload, nb, err := channel.ReadFrame(brw.Reader, buf)
			buf = nb
			if err != nil {
				p.Close() // the caller is gone: so is the process's stream
				return
			}
			switch typ {
			case channel.FrameStdin:
				_, _ = p.Write(payload)
			case channel.FrameStdinEOF:
				_ = p.CloseStdin()
			case channel.FrameResize:
				if rows, cols, ok := channel.ParseResize(payload); ok {
					_ = p.Resize(rows, cols)
				}
			case channel.FrameSignal:
				if len(payload) == 1 {
					_ = p.Signal(sysSignal(payload[0]))
				}
			}
		}
	}()
	code, err := p.Wait()
	if err != nil {
		code = 255
	}
	wmu.Lock()
	_ = channel.WriteFrame(conn, channel.FrameExit, channel.ExitPayload(code))
	wmu.Unlock()
}

// serveAttach joins the mirror and relays: its output out, keys and
// resizes in. The stream ends when the mirror does or the caller leaves.
func serveAttach(w http.ResponseWriter, r *http.Request, b Backend) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeExec) {
		writeErr(w, fmt.Errorf("attach needs Upgrade: %s: %w", UpgradeExec, errdefs.ErrInvalid))
		return
	}
	var req AttachRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	// The participant outlives the request context: the connection is
	// hijacked. It keeps the caller (people.From) for the access checks.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	p, err := b.Attach(ctx, r.PathValue("ref"), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer p.Leave()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	role := ""
	if jr, ok := p.(interface{ JoinedAs() string }); ok {
		role = "Paddock-Role: " + jr.JoinedAs() + "\r\n"
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+UpgradeExec+"\r\nConnection: Upgrade\r\n"+role+"\r\n"); err != nil {
		return
	}
	go func() {
		defer cancel()
		var buf []byte
		for {
			typ, payload, nb, err := channel.ReadFrame(brw.Reader, buf)
			buf = nb
			if err != nil {
				return
			}
			switch typ {
			case channel.FrameStdin:
				_ = p.Send(ctx, payload) // an observer's keys are refused, quietly
			case channel.FrameResize:
				if rows, cols, ok := channel.ParseResize(payload); ok {
					_ = p.Resize(ctx, int(rows), int(cols))
				}
			}
		}
	}()
	for {
		out, err := p.Read(ctx)
		if err != nil {
			_ = channel.WriteFrame(conn, channel.FrameExit, channel.ExitPayload(0))
			return
		}
		for off := 0; off < len(out); off += 32 << 10 {
			if err := channel.WriteFrame(conn, channel.FrameStdout, out[off:min(off+32<<10, len(out))]); err != nil {
				return
			}
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Session calls.

// ExecStream is an exec over the API: write stdin with Write, send frames
// with Resize/Signal/CloseStdin, read output with Copy.
type ExecStream struct {
	// Role is the role an attach joined with (Paddock-Role), if said.
	Role string
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
}

// Exec opens an exec stream.
func (c *Client) Exec(ctx context.Context, ref string, req ExecRequest) (*ExecStream, error) {
	return c.upgrade(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/exec", req)
}

// Attach joins the session's terminal mirror as a driver or an observer.
func (c *Client) Attach(ctx context.Context, ref string, req AttachRequest) (*ExecStream, error) {
	return c.upgrade(ctx, "/v1/sessions/"+url.PathEscape(ref)+"/attach", req)
}

// upgrade opens a framed stream: a POST upgraded to UpgradeExec.
func (c *Client) upgrade(ctx context.Context, path string, req any) (*ExecStream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, c.dialError(err)
	}
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequest("POST", "http://paddock"+path, bytes.NewReader(body))
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", UpgradeExec)
	hr.Header.Set("Content-Type", "application/json")
	if err := hr.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, hr)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("exec: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		return nil, responseError(resp)
	}
	return &ExecStream{conn: conn, br: br, Role: resp.Header.Get("Paddock-Role")}, nil
}

func (e *ExecStream) send(typ byte, p []byte) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return channel.WriteFrame(e.conn, typ, p)
}

// Write sends stdin.
func (e *ExecStream) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += 32 << 10 {
		if err := e.send(channel.FrameStdin, p[off:min(off+32<<10, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// CloseStdin closes the process's stdin.
func (e *ExecStream) CloseStdin() error { return e.send(channel.FrameStdinEOF, nil) }

// Resize changes the terminal size.
func (e *ExecStream) Resize(rows, cols uint16) error {
	return e.send(channel.FrameResize, channel.ResizePayload(rows, cols))
}

// Signal sends a signal.
func (e *ExecStream) Signal(sig byte) error { return e.send(channel.FrameSignal, []byte{sig}) }

// Copy writes output until the process ends and returns its exit code.
func (e *ExecStream) Copy(stdout, stderr io.Writer) (int, error) {
	var buf []byte
	for {
		typ, payload, nb, err := channel.ReadFrame(e.br, buf)
		buf = nb
		if err != nil {
			return -1, fmt.Errorf("exec stream ended before the exit code: %w", err)
		}
		switch typ {
		case channel.FrameStdout:
			if _, err := stdout.Write(payload); err != nil {
				return -1, err
			}
		case channel.FrameStderr:
			if _, err := stderr.Write(payload); err != nil {
				return -1, err
			}
		case channel.FrameExit:
			code, ok := channel.ParseExit(payload)
			if !ok {
				return -1, errors.New("bad exit frame")
			}
			return code, nil
		}
	}
}

// Close ends the stream (and the process, if it still runs).
func (e *ExecStream) Close() error { return e.conn.Close() }
