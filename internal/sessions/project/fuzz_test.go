package project

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// FuzzParse feeds any bytes to Parse, seeded with testdata (good and bad
// files) and a few hand-made ones. Parse never panics; it refuses with a
// non-empty *Error that is ErrInvalid; and what it accepts validates
// again, parses again to the same File, holds no credential-shaped value
// and no name refused for the box's environment.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "version = 1", "ports = [80, 80]", "env = { A_TOKEN = \"x\" }", "[image]\ndockerfile = \"a/../../b\"",
		"[setup]\ncommand = \"x\"\ntimeout = \"1ns\"", "[egress]\nmode = \"allowlist\"\nallow = [\"*.co.uk\"]",
		"env.A = \"1\"\nenv.B = \"2\"", "[[image]]\npackages = []", "\ufeffmodel = \"opus\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(data)
		if err != nil {
			if pf != nil {
				t.Fatal("a File came back with the error")
			}
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("%T is not an *Error and ErrInvalid: %v", err, err)
			}
			if pe.Msg == "" || err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if err := pf.Validate(); err != nil {
			t.Fatalf("accepted, then refused by Validate: %v", err)
		}
		again, err := Parse(pf.Raw)
		if err != nil {
			t.Fatalf("accepted, then refused: %v", err)
		}
		if !reflect.DeepEqual(pf, again) {
			t.Fatalf("parsed twice, two Files:\n%+v\n%+v", pf, again)
		}
		if pf.Sum != Sum(data) || string(pf.Raw) != string(data) {
			t.Fatal("Raw or Sum is not the input's")
		}
		for n, v := range pf.Env {
			if envRefusal(n, v) != "" || credentialShaped(v) != "" {
				t.Fatalf("accepted env %q", n)
			}
		}
		if credentialShaped(pf.Setup.Command) != "" {
			t.Fatal("accepted a credential in setup.command")
		}
		if d := pf.Image.Dockerfile; d != "" && relativePathRefusal(d) != "" {
			t.Fatalf("accepted dockerfile %q", d)
		}
	})
}
