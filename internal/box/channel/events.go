package channel

import (
	"bufio"
	"net"
	"time"
)

// TypeEvents opens the guest's report stream (Runner → guest): after the
// Reply, the guest writes one line per report about claude (a hook that
// fired, its pane that died; see activity.Report), each at most
// MaxEventLine bytes with its newline, until either side closes. The
// guest drops reports rather than wait for a slow reader, and rate-limits
// them; the Runner checks and bounds them again (box input).
const TypeEvents = "events"

// MaxEventLine bounds one line on an events stream, newline included.
const MaxEventLine = 1024

// Events opens the guest's report stream. The caller reads lines from
// the returned reader and closes the stream when done. A guest that does
// not know the stream type (an older image) answers with a *RemoteError.
func (c *Client) Events(deadline time.Time) (net.Conn, *bufio.Reader, error) {
	return c.open(Header{Type: TypeEvents}, deadline)
}
