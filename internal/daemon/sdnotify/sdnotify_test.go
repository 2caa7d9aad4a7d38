package sdnotify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen opens a datagram socket as systemd does for a Type=notify service.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recv(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestNotifyPathAndAbstract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	abstract := "@paddock-sdnotify-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	for _, name := range []string{path, abstract} {
		c := listen(t, name)
		sent, err := Notify(env(map[string]string{"NOTIFY_SOCKET": name}), Ready, Status("2 sessions\nrunning"))
		if err != nil || !sent {
			t.Fatalf("%s: sent=%v err=%v", name, sent, err)
		}
		if got, want := recv(t, c), "READY=1\nSTATUS=2 sessions running\n"; got != want {
			t.Fatalf("%s: got %q, want %q", name, got, want)
		}
	}
}

func TestNotifyWithoutManager(t *testing.T) {
	sent, err := Notify(env(nil), Ready)
	if sent || err != nil {
		t.Fatalf("no NOTIFY_SOCKET: sent=%v err=%v, want false, nil", sent, err)
	}
}

func TestNotifyErrors(t *testing.T) {
	for name, sock := range map[string]string{
		"relative path": "run/notify",
		"nobody there":  filepath.Join(t.TempDir(), "absent"),
	} {
		if sent, err := Notify(env(map[string]string{"NOTIFY_SOCKET": sock}), Ready); err == nil || sent {
			t.Errorf("%s: sent=%v err=%v, want an error", name, sent, err)
		}
	}
	if _, err := Notify(env(map[string]string{"NOTIFY_SOCKET": "/x"})); err == nil {
		t.Error("no assignments: want an error")
	}
}
