// Package sdnotify tells a service manager how the Runner is doing, with the
// sd_notify protocol that systemd speaks to Type=notify services: one
// datagram of newline-separated KEY=VALUE assignments sent to the unix socket
// named by $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace).
//
// Only the standard library is needed: the protocol is one sendto(2).
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// The states the Runner sends.
const (
	// Ready: the Runner's sockets are bound and answer; `systemctl start`
	// returns, and units ordered after paddock may start.
	Ready = "READY=1"
	// Stopping: the Runner is shutting down; boxes keep running.
	Stopping = "STOPPING=1"
)

// Status is a one-line, human-readable state shown by `systemctl status`.
// Newlines end an assignment in the protocol, so they become spaces.
func Status(s string) string {
	return "STATUS=" + strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// Notify sends the assignments to the socket that getenv("NOTIFY_SOCKET")
// names. It reports sent=false, err=nil when no socket is named (not run by
// a service manager, or one that does not ask): callers need no check of
// their own. A socket that is named but cannot be reached is an error, for
// systemd then waits for READY=1 in vain and kills the service at its
// start timeout.
func Notify(getenv func(string) string, assignments ...string) (sent bool, err error) {
	path := getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if len(assignments) == 0 {
		return false, errors.New("sdnotify: nothing to send")
	}
	switch {
	case path[0] == '@':
		// Abstract namespace: Go spells it with a leading '@' too.
	case path[0] == '/':
	default:
		return false, fmt.Errorf("sdnotify: NOTIFY_SOCKET %q is neither an absolute path nor an abstract socket (@name)", path)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(strings.Join(assignments, "\n") + "\n")); err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	return true, nil
}
