package channel

import (
	"bufio"
	"fmt"
	"net"
	"time"
)

// TypeDial asks the guest to connect to a TCP port on the box's own
// loopback (Runner → guest): Header.Addr is the port, "PORT" alone. After
// an OK reply the stream carries the connection's bytes both ways; a
// refusal says why (nothing listens there, a port out of range). The
// guest dials nothing but its box's loopback, whatever Addr holds. A
// guest older than this answers "unknown stream type" (ErrUnknownType).
//
// This is how a box port is published (paddock port, the web page's
// previews): the box keeps no network interface but loopback, and the
// Runner carries each connection over the channel.
const TypeDial = "dial"

// Dial connects to port on the box's loopback. The returned Conn reads
// through the reply's buffer, so no byte the box sent early is lost.
func (c *Client) Dial(port int, deadline time.Time) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("channel: dial: port %d is not a TCP port (1-65535)", port)
	}
	st, br, err := c.open(Header{Type: TypeDial, Addr: fmt.Sprint(port)}, deadline)
	if err != nil {
		return nil, unknownType(err)
	}
	return &bufConn{Conn: st, r: br}, nil
}

// bufConn is a stream read through the bufio.Reader that read its reply.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes: a yamux stream's Close sends FIN and keeps
// reading until the peer's, which is what a half-close is.
func (c *bufConn) CloseWrite() error { return c.Conn.Close() }
