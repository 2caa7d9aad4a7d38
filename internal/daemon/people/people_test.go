package people

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// TestPeerUID: the kernel's word on who connected, not the client's.
func TestPeerUID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", p)
		if err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uid, err := PeerUID(c)
	if err != nil || uid != uint32(os.Getuid()) {
		t.Fatalf("peer uid %d %v, want %d", uid, err, os.Getuid())
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := PeerUID(a); err == nil {
		t.Fatal("a pipe has no peer credentials")
	}
}

func TestDirectory(t *testing.T) {
	d := Directory{Group: "", AdminUID: 4242}
	if p, err := d.Person(0); err != nil || !p.Admin || p.Name != "root" {
		t.Fatalf("root: %+v %v", p, err)
	}
	if p, err := d.Person(4242); err != nil || !p.Admin {
		t.Fatalf("the Runner's user: %+v %v", p, err)
	}
	// Without a group the Runner serves its own user only.
	if _, err := d.Person(1); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "api.group") {
		t.Fatalf("another user, no group: %v", err)
	}
	// uid 1 (daemon on Debian) is not in group root.
	d.Group = "root"
	if _, err := d.Person(1); !errors.Is(err, ErrNotMember) || !strings.Contains(err.Error(), `not in group "root"`) {
		t.Fatalf("a non-member: %v", err)
	}
	if _, err := d.Lookup("no-such-user-here"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an unknown name: %v", err)
	}
	if _, err := d.Person(4000000000); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a uid with no entry: %v", err)
	}
	ctx := With(context.Background(), Person{UID: 7, Name: "x"})
	if p, ok := From(ctx); !ok || p.UID != 7 {
		t.Fatal(p, ok)
	}
	if _, ok := From(context.Background()); ok {
		t.Fatal("a person from nowhere")
	}
}
