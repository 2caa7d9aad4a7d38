package cli

import (
	"bytes"
	"testing"
)

func TestParseDetachKeys(t *testing.T) {
	for in, want := range map[string][]byte{
		"ctrl-p,ctrl-q": {0x10, 0x11},
		"ctrl-a,d":      {0x01, 'd'},
		"CTRL-@":        {0x00},
		"ctrl-[,ctrl-_": {0x1b, 0x1f},
		"ctrl-\\":       {0x1c},
	} {
		got, err := parseDetachKeys(in)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ctrl-", "ctrl-1", "ctrl-pq", "ab", "ctrl-p,,ctrl-q"} {
		if _, err := parseDetachKeys(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestDetacher: the sequence detaches wherever it falls, split across
// reads too; a broken start is passed on in order; nothing else is held.
func TestDetacher(t *testing.T) {
	seq := []byte{0x10, 0x11}
	for _, c := range []struct {
		name   string
		reads  []string
		out    string
		detach bool
	}{
		{"plain", []string{"ls -l\r"}, "ls -l\r", false},
		{"detach", []string{"ab\x10\x11cd"}, "ab", true},
		{"split", []string{"ab\x10", "\x11cd"}, "ab", true},
		{"broken", []string{"a\x10b"}, "a\x10b", false},
		{"broken across reads", []string{"a\x10", "b"}, "a\x10b", false},
		{"double start", []string{"\x10\x10\x11"}, "\x10", true},
		{"second only", []string{"\x11x"}, "\x11x", false},
	} {
		d := &detacher{seq: seq}
		var out []byte
		detach := false
		for _, r := range c.reads {
			o, dt := d.feed([]byte(r))
			out = append(out, o...)
			if dt {
				detach = true
				break
			}
		}
		if string(out) != c.out || detach != c.detach {
			t.Errorf("%s: %q %v, want %q %v", c.name, out, detach, c.out, c.detach)
		}
	}
	// A one-key sequence detaches at once.
	d := &detacher{seq: []byte{0x1d}}
	if out, dt := d.feed([]byte("x\x1dy")); string(out) != "x" || !dt {
		t.Errorf("one key: %q %v", out, dt)
	}
}
