package statedir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Setenv(EnvVar, "/from/env")
	if d, _ := Resolve("/from/flag"); d != "/from/flag" {
		t.Fatalf("flag lost: %s", d)
	}
	if d, _ := Resolve(""); d != "/from/env" {
		t.Fatalf("env lost: %s", d)
	}
	t.Setenv(EnvVar, "")
	d, err := Resolve("")
	if err != nil || !filepath.IsAbs(d) || !strings.HasSuffix(d, "paddock") {
		t.Fatalf("default %q %v", d, err)
	}
}

func TestEnsureTightens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if err := Ensure(dir); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o711 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestSecondLockRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description, so a second Acquire in
	// the same process conflicts just like a second process would.
	_, err = Acquire(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	if !strings.Contains(err.Error(), "another paddock serve (pid ") || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("message not clear: %v", err)
	}
	// A separate process is refused too.
	if _, err := exec.LookPath("flock"); err == nil {
		out, err := exec.Command("flock", "-n", filepath.Join(dir, LockFile), "true").CombinedOutput()
		if err == nil {
			t.Fatalf("other process got the lock: %s", out)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}
