// Package channel is the one byte stream between the Runner and a box's
// guest, multiplexed with yamux. The Runner is the yamux client, the guest
// the server; either side may open streams.
//
// Every stream starts with one header line of JSON (at most MaxHeader bytes,
// ended by '\n') from the side that opened it, answered by one Reply line.
// What follows depends on the header's Type:
//
//	ping     nothing; the Reply is the answer.
//	exec     frames (see frame.go): stdin, resize and signal from the Runner,
//	         stdout, stderr and exit from the guest.
//	listen   nothing more; the guest now listens on Addr in the box and opens
//	         one "forward" stream per accepted connection.
//	forward  (guest → Runner) raw bytes of one forwarded connection to Service.
//	dial     (Runner → guest) raw bytes of one connection to a port on the
//	         box's loopback (dial.go).
//	events   lines of JSON from the guest: reports about claude (events.go).
//
// The channel itself tells the Runner which session a stream belongs to: a
// Conn is made for one box, so anything arriving on it is that box's.
package channel

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"

	"github.com/hashicorp/yamux"
)

// MaxHeader bounds a header or reply line.
const MaxHeader = 64 << 10

// Header opens a stream.
type Header struct {
	Type string `json:"type"`
	// exec
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
	// listen / forward
	Addr    string `json:"addr,omitempty"`
	Service string `json:"service,omitempty"`
	// put
	Files []PutFile `json:"files,omitempty"`
	Aside []string  `json:"aside,omitempty"`
}

// Reply answers a Header.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Code classifies an exec's failure to start: CodeNotFound or
	// CodeCannotRun ("" for any other error, and from older guests).
	Code string `json:"code,omitempty"`
	// ping
	Version string `json:"version,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

// Stream types.
const (
	TypePing    = "ping"
	TypeExec    = "exec"
	TypeListen  = "listen"
	TypeForward = "forward"
)

// A keepalive every keepAliveInterval; a ping or a write that takes
// longer than writeTimeout ends the channel. (Variables for the tests.)
var (
	keepAliveInterval = 15 * time.Second
	writeTimeout      = 30 * time.Second
)

// yamuxConfig is shared by both ends: keepalives find a dead peer; the
// stream window is large enough for terminal bursts and API streams.
func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = true
	c.KeepAliveInterval = keepAliveInterval
	c.ConnectionWriteTimeout = writeTimeout
	c.MaxStreamWindowSize = 1 << 20
	c.LogOutput = io.Discard
	c.AcceptBacklog = 1024
	return c
}

// Client is the Runner's end of one box's channel.
type Client struct {
	sess   *yamux.Session
	paused atomic.Bool // keepalive (PauseKeepAlive)
}

// NewClient starts the Runner's end over conn. Its keepalive is its own
// (keepAlive), not yamux's, so that it can pause while the box is frozen.
func NewClient(conn io.ReadWriteCloser) (*Client, error) {
	cfg := yamuxConfig()
	cfg.EnableKeepAlive = false
	s, err := yamux.Client(conn, cfg)
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	c := &Client{sess: s}
	go c.keepAlive(cfg.KeepAliveInterval)
	return c, nil
}

// keepAlive pings the guest every interval and ends the channel when a
// ping fails (yamux's Ping gives up after ConnectionWriteTimeout), as
// yamux's own keepalive does; but not while paused, nor for a ping that
// failed while paused.
func (c *Client) keepAlive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.sess.CloseChan():
			return
		case <-t.C:
		}
		if c.paused.Load() {
			continue
		}
		if _, err := c.sess.Ping(); err != nil && !c.paused.Load() {
			c.sess.Close()
			return
		}
	}
}

// PauseKeepAlive stops pinging the guest until ResumeKeepAlive: a frozen
// guest answers nothing, and its channel must not end for that.
func (c *Client) PauseKeepAlive() { c.paused.Store(true) }

// ResumeKeepAlive pings the guest again.
func (c *Client) ResumeKeepAlive() { c.paused.Store(false) }

// Close ends the channel and every stream on it.
func (c *Client) Close() error { return c.sess.Close() }

// Done is closed when the channel ends (box stopped, connection lost).
func (c *Client) Done() <-chan struct{} { return c.sess.CloseChan() }

// open opens a stream and exchanges the header and reply.
func (c *Client) open(h Header, deadline time.Time) (net.Conn, *bufio.Reader, error) {
	st, err := wrapStream(c.sess.OpenStream())
	if err != nil {
		return nil, nil, fmt.Errorf("channel: open stream: %w", err)
	}
	br, _, err := exchange(st, h, deadline)
	if err != nil {
		return nil, nil, err
	}
	return st, br, nil
}

// exchange sends the header on a fresh stream and reads the reply; a
// refusal is a *RemoteError. On any error the stream is closed.
func exchange(st net.Conn, h Header, deadline time.Time) (*bufio.Reader, Reply, error) {
	if !deadline.IsZero() {
		_ = st.SetDeadline(deadline)
	}
	if err := WriteJSONLine(st, h); err != nil {
		st.Close()
		return nil, Reply{}, err
	}
	br := bufio.NewReaderSize(st, 32<<10)
	var r Reply
	if err := ReadJSONLine(br, &r); err != nil {
		st.Close()
		return nil, Reply{}, fmt.Errorf("channel: %s: read reply: %w", h.Type, err)
	}
	_ = st.SetDeadline(time.Time{})
	if !r.OK {
		st.Close()
		return nil, r, &RemoteError{Op: h.Type, Msg: r.Error, Code: r.Code}
	}
	return br, r, nil
}

// Reply codes of an exec that could not start.
const (
	CodeNotFound  = "not_found"
	CodeCannotRun = "cannot_run"
)

// RemoteError is an error the guest reported. Its Code, if any, makes it
// errdefs.ErrCommandNotFound or errdefs.ErrCommandCannotRun.
type RemoteError struct{ Op, Msg, Code string }

func (e *RemoteError) Error() string { return "guest: " + e.Op + ": " + e.Msg }

// Unwrap gives the sentinel of the error's code.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return errdefs.ErrCommandNotFound
	case CodeCannotRun:
		return errdefs.ErrCommandCannotRun
	}
	return nil
}

// Ping asks the guest for its version and pid and measures the round trip.
func (c *Client) Ping(deadline time.Time) (Reply, time.Duration, error) {
	t0 := time.Now()
	st, err := wrapStream(c.sess.OpenStream())
	if err != nil {
		return Reply{}, 0, err
	}
	_, r, err := exchange(st, Header{Type: TypePing}, deadline)
	if err != nil {
		return Reply{}, 0, err
	}
	st.Close()
	return r, time.Since(t0), nil
}

// Listen asks the guest to listen on addr inside the box ("127.0.0.1:PORT"
// or "unix:/path") and forward each connection to the Runner's service.
func (c *Client) Listen(addr, service string, deadline time.Time) error {
	st, _, err := c.open(Header{Type: TypeListen, Addr: addr, Service: service}, deadline)
	if err != nil {
		return err
	}
	return st.Close()
}

// Accept waits for the next stream the guest opens (a forwarded
// connection) and returns it with its header. The Runner must answer it
// with Accept/Refuse through ReplyTo.
func (c *Client) Accept() (net.Conn, Header, *bufio.Reader, error) {
	for {
		st, err := wrapStream(c.sess.AcceptStream())
		if err != nil {
			return nil, Header{}, nil, err
		}
		_ = st.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReaderSize(st, 32<<10)
		var h Header
		if err := ReadJSONLine(br, &h); err != nil {
			st.Close()
			continue
		}
		_ = st.SetDeadline(time.Time{})
		return st, h, br, nil
	}
}

// wrapStream gives a yamux stream as a stream.
func wrapStream(st *yamux.Stream, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	return stream{st}, nil
}

// stream is a yamux stream whose deadline errors are
// os.ErrDeadlineExceeded. yamux's ErrTimeout is a Timeout but not
// Temporary, and crypto/tls makes a read error that is not Temporary
// permanent: net/http sets a read deadline in the past after every
// response (to stop its background read), which would kill a tls.Conn
// over the stream, and the next request on that kept-alive connection
// would get EOF before any handler ran (a POST, which clients do not
// retry, failed: gh's GraphQL call through the service proxy under load).
type stream struct{ *yamux.Stream }

func (s stream) Read(b []byte) (int, error) {
	n, err := s.Stream.Read(b)
	return n, deadlineErr(err)
}

func (s stream) Write(b []byte) (int, error) {
	n, err := s.Stream.Write(b)
	return n, deadlineErr(err)
}

func deadlineErr(err error) error {
	if errors.Is(err, yamux.ErrTimeout) {
		return os.ErrDeadlineExceeded // a Timeout, and Temporary
	}
	return err
}

// WriteJSONLine writes v as one line.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) >= MaxHeader {
		return errors.New("channel: header too large")
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ErrHeaderTooLong is returned for a header line over MaxHeader.
var ErrHeaderTooLong = errors.New("channel: header line too long")

// ReadJSONLine reads one line of at most MaxHeader bytes into v.
func ReadJSONLine(br *bufio.Reader, v any) error {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > MaxHeader {
			return ErrHeaderTooLong
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("channel: bad header: %w", err)
	}
	return nil
}

// Server is the guest's end of one channel.
type Server struct {
	sess *yamux.Session
}

// NewServer starts the guest's end over conn.
func NewServer(conn io.ReadWriteCloser) (*Server, error) {
	s, err := yamux.Server(conn, yamuxConfig())
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	return &Server{sess: s}, nil
}

// AcceptHeader waits for the Runner's next stream and reads its header.
func (s *Server) AcceptHeader() (net.Conn, *bufio.Reader, Header, error) {
	for {
		st, err := wrapStream(s.sess.AcceptStream())
		if err != nil {
			return nil, nil, Header{}, err
		}
		br := bufio.NewReaderSize(st, 32<<10)
		var h Header
		_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := ReadJSONLine(br, &h); err != nil {
			_ = WriteJSONLine(st, Reply{Error: err.Error()})
			st.Close()
			continue
		}
		_ = st.SetReadDeadline(time.Time{})
		return st, br, h, nil
	}
}

// OpenForward opens a stream to the Runner for one forwarded connection
// and waits for the Runner's reply.
func (s *Server) OpenForward(service string) (net.Conn, *bufio.Reader, error) {
	st, err := wrapStream(s.sess.OpenStream())
	if err != nil {
		return nil, nil, err
	}
	br, _, err := exchange(st, Header{Type: TypeForward, Service: service}, time.Time{})
	if err != nil {
		return nil, nil, err
	}
	return st, br, nil
}

// Done is closed when the channel ends.
func (s *Server) Done() <-chan struct{} { return s.sess.CloseChan() }

// Close ends the channel.
func (s *Server) Close() error { return s.sess.Close() }
