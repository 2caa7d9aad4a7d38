package guest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/version"
)

// TestMainUsage: the guest's command line answers a wrong call with exit
// code 2 and a line that says what it takes, and prints its version.
func TestMainUsage(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, _ := run("guest", "version"); code != 0 || strings.TrimSpace(out) != version.String() {
		t.Fatalf("guest version: %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "only runs paddock's guest"},
		{[]string{"version"}, "only runs paddock's guest"},
		{[]string{"guest", "nope"}, `unknown command "nope"`},
		{[]string{"guest", "hook"}, "takes 1 argument"},
		{[]string{"guest", "hook", "a", "b"}, "takes 1 argument"},
		{[]string{"guest", "unpack"}, "takes 1 argument"},
		{[]string{"guest", "put"}, "at least 1"},
		{[]string{"guest", "selftest", "--nope"}, "flag provided but not defined"},
		{[]string{"guest", "version", "extra"}, "takes 0 argument"},
	} {
		code, _, errOut := run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// Flags after positional arguments, and the socket flag on a subcommand.
	if code, _, errOut := run("guest", "hook", "Stop", "--socket", filepath.Join(t.TempDir(), "none.sock")); code != 0 {
		t.Fatalf("hook with --socket after its argument: %d %s", code, errOut)
	}
}

// TestFindBinary: paddock-guest beside paddock is chosen only when it is
// an executable that reports this paddock's version; otherwise paddock
// itself, with the reason.
func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "paddock")
	cand := filepath.Join(dir, BinaryName)
	ctx := context.Background()
	script := func(body string, mode os.FileMode) {
		os.Remove(cand) // WriteFile keeps an existing file's mode
		if err := os.WriteFile(cand, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if p, why := FindBinary(ctx, self); p != self || !strings.Contains(why, "no "+BinaryName) {
		t.Errorf("none there: %s, %q", p, why)
	}
	script(`echo "`+version.String()+`"`, 0o644)
	if p, why := FindBinary(ctx, self); p != self || !strings.Contains(why, "not an executable") {
		t.Errorf("not executable: %s, %q", p, why)
	}
	script(`echo 0.0.1`, 0o755)
	if p, why := FindBinary(ctx, self); p != self || !strings.Contains(why, "is version 0.0.1") {
		t.Errorf("another version: %s, %q", p, why)
	}
	script(`exit 3`, 0o755)
	if p, why := FindBinary(ctx, self); p != self || !strings.Contains(why, "guest version") {
		t.Errorf("one that fails: %s, %q", p, why)
	}
	script(`[ "$1 $2" = "guest version" ] && echo "`+version.String()+`"`, 0o755)
	if p, why := FindBinary(ctx, self); p != cand || why != "" {
		t.Errorf("the right one: %s, %q", p, why)
	}
}
