package guest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/channel"
)

// TestDial: a dial stream reaches a server on the box's loopback, both
// ways, with the server's half-close carried; a port nothing answers on,
// and a port that is not one, are each refused with the reason.
func TestDial(t *testing.T) {
	cl := startGuest(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	greeting := []byte("hello from the box\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write(greeting) // before anything is read: kept in the reply's buffer
				io.Copy(c, c)
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := cl.Dial(port, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("paddock"), 100000)
	go func() { c.Write(msg); c.(interface{ CloseWrite() error }).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, append(greeting, msg...)) {
		t.Fatalf("through the dial: %d bytes (want %d), %v", len(got), len(greeting)+len(msg), err)
	}

	free, _ := net.Listen("tcp", "127.0.0.1:0")
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	_, err = cl.Dial(freePort, time.Now().Add(5*time.Second))
	var re *channel.RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "nothing in the box answers on port") {
		t.Fatalf("dial of a closed port: %v", err)
	}
	if _, err := cl.Dial(0, time.Now().Add(5*time.Second)); err == nil {
		t.Fatal("dial of port 0 was not refused")
	}
}

// TestDialOfAnOlderGuest: a guest without dial says so as ErrUnknownType.
func TestDialOfAnOlderGuest(t *testing.T) {
	c1, c2 := net.Pipe()
	go func() {
		srv, err := channel.NewServer(c2)
		if err != nil {
			return
		}
		st, _, h, err := srv.AcceptHeader()
		if err != nil {
			return
		}
		unknownType(st, h)
	}()
	cl, err := channel.NewClient(c1)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Dial(80, time.Now().Add(5*time.Second)); !errors.Is(err, channel.ErrUnknownType) {
		t.Fatalf("older guest: %v", err)
	}
}
