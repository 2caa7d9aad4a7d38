package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDialInRoot: in this process's own root, a socket is reached; a
// symlink at the socket or in place of a directory on the way, another
// kind of file, and a path with "." or ".." are refused without a
// connection.
func TestDialInRoot(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o700)
	l, err := net.Listen("unix", filepath.Join(real, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	os.Symlink(filepath.Join(real, "s.sock"), filepath.Join(dir, "link.sock"))
	os.Symlink(real, filepath.Join(dir, "linkdir"))
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o600)
	ctx := context.Background()
	pid := os.Getpid()

	c, err := DialInRoot(ctx, pid, filepath.Join(real, "s.sock"))
	if err != nil {
		t.Fatalf("the socket itself: %v", err)
	}
	c.Close()
	<-accepted
	for _, p := range []string{"link.sock", "linkdir/s.sock", "file"} {
		if _, err := DialInRoot(ctx, pid, filepath.Join(dir, p)); !errors.Is(err, ErrNotSocket) {
			t.Errorf("%s: %v, want ErrNotSocket", p, err)
		}
	}
	for _, p := range []string{dir + "/real/../real/s.sock", dir + "/./real/s.sock", dir + "//real/s.sock", dir[1:] + "/real/s.sock"} {
		if _, err := DialInRoot(ctx, pid, p); err == nil {
			t.Errorf("%s: connected", p)
		}
	}
	if _, err := DialInRoot(ctx, pid, filepath.Join(dir, "missing.sock")); err == nil || errors.Is(err, ErrNotSocket) {
		t.Errorf("a missing socket: %v, want a plain error (the guest may still be starting)", err)
	}
	select {
	case <-accepted:
		t.Fatal("a refused path reached the socket")
	default:
	}
}
