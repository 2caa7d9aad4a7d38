package seccomp

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The filter is tested in a child process (this test binary again, with
// childEnv set): a seccomp filter cannot be taken off the process that
// loads it.
const childEnv = "PADDOCK_SECCOMP_TEST_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(child(dir))
	}
	os.Exit(m.Run())
}

// child loads the filter and tries every way to make a set-id file; it
// prints each call's errno ("" for success) as JSON.
func child(dir string) int {
	if err := Install(); err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	res := map[string]string{}
	try := func(name string, err error) {
		res[name] = ""
		if err != nil {
			var en unix.Errno
			if errors.As(err, &en) {
				res[name] = en.Error()
			} else {
				res[name] = err.Error()
			}
		}
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(p("f"), nil, 0o644)
	try("chmod plain", unix.Chmod(p("f"), 0o755))
	try("chmod setuid", unix.Chmod(p("f"), 0o4755))
	try("chmod setgid", unix.Chmod(p("f"), 0o2755))
	try("fchmodat setuid", unix.Fchmodat(unix.AT_FDCWD, p("f"), 0o4700, 0))
	fd, err := unix.Open(p("f"), unix.O_RDONLY, 0)
	if err == nil {
		try("fchmod setgid", unix.Fchmod(fd, 0o2700))
		try("fchmod plain", unix.Fchmod(fd, 0o700))
		unix.Close(fd)
	}
	fd, err = unix.Open(p("g"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	try("open creat setuid", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, p("h"), unix.O_CREAT|unix.O_WRONLY, 0o2755)
	try("openat creat setgid", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, p("i"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	try("openat creat plain", err)
	if err == nil {
		unix.Close(fd)
	}
	_, _, en := unix.Syscall(unix.SYS_CREAT, uintptrPath(p("j")), 0o6755, 0)
	try("creat setid", errnoErr(en))
	try("mknod setuid", unix.Mknod(p("k"), unix.S_IFREG|0o4644, 0))
	try("mknod plain", unix.Mknod(p("l"), unix.S_IFREG|0o644, 0))
	try("mkdir setgid", unix.Mkdir(p("d"), 0o2755))
	_, err = unix.Openat2(unix.AT_FDCWD, p("f"), &unix.OpenHow{Flags: unix.O_RDONLY})
	try("openat2", err)
	// Go's os package works on in the box: files and modes as usual.
	try("os.WriteFile", os.WriteFile(p("m"), []byte("x"), 0o600))
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func TestSetIDGuard(t *testing.T) {
	if _, err := Program(); errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	var res map[string]string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{
		"chmod plain": "", "chmod setuid": "operation not permitted", "chmod setgid": "operation not permitted",
		"fchmodat setuid": "operation not permitted", "fchmod setgid": "operation not permitted", "fchmod plain": "",
		"open creat setuid": "operation not permitted", "openat creat setgid": "operation not permitted",
		"openat creat plain": "", "creat setid": "operation not permitted", "mknod setuid": "operation not permitted",
		"mknod plain": "", "mkdir setgid": "", "openat2": "function not implemented", "os.WriteFile": "",
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s: got %q, want %q", k, res[k], v)
		}
	}
	// And nothing on disk carries either bit.
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s has mode %v", p, fi.Mode())
		}
		return nil
	})
}

// TestBytes: the encoding bwrap reads is 8 bytes an instruction, in order.
func TestBytes(t *testing.T) {
	p, err := Program()
	if err != nil {
		t.Skip(err)
	}
	b := Bytes(p)
	if len(b) != 8*len(p) {
		t.Fatalf("%d bytes for %d instructions", len(b), len(p))
	}
	last := p[len(p)-1]
	if got := Bytes([]unix.SockFilter{last}); string(got) != string(b[len(b)-8:]) {
		t.Fatal("the last instruction does not end the encoding")
	}
}

func uintptrPath(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}
