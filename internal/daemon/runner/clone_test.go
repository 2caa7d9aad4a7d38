package runner

import (
	"bytes"
	"testing"
)

// TestSafeText: a box's diff reaches a terminal with its text, newlines,
// tabs and (when asked) colours, and nothing else a terminal acts on.
func TestSafeText(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    []string // written in these pieces
		color bool
		want  string
	}{
		{"text", []string{"+a\tb\n-c\n"}, false, "+a\tb\n-c\n"},
		{"colour kept", []string{"\x1b[31m-x\x1b[m\n"}, true, "\x1b[31m-x\x1b[m\n"},
		{"colour off", []string{"\x1b[31m-x\n"}, false, "?[31m-x\n"},
		{"colour cut across writes", []string{"\x1b", "[3", "2m+y"}, true, "\x1b[32m+y"},
		{"title set", []string{"\x1b]0;pwned\x07x"}, true, "?]0;pwned?x"},
		{"clipboard", []string{"\x1b]52;c;aGk=\x1b\\"}, true, "?]52;c;aGk=?\\"},
		{"cursor moved", []string{"\x1b[2J\x1b[H"}, true, "?[2J?[H"},
		{"bell, backspace, CR", []string{"a\x07b\x08c\rd"}, false, "a?b?c?d"},
		{"DEL", []string{"\x7f"}, false, "?"},
		{"long SGR", []string{"\x1b[" + string(bytes.Repeat([]byte("1;"), 40)) + "m"}, true, ""},
		{"escape at the end", []string{"x\x1b["}, true, "x?["},
		{"UTF-8 passes", []string{"é ✓\n"}, false, "é ✓\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			st := &safeText{w: &out, color: c.color}
			for _, p := range c.in {
				if n, err := st.Write([]byte(p)); err != nil || n != len(p) {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			if err := st.flush(); err != nil {
				t.Fatal(err)
			}
			if c.name == "long SGR" {
				if bytes.Contains(out.Bytes(), []byte("\x1b")) {
					t.Fatalf("a sequence longer than any colour passed: %q", out.String())
				}
				return
			}
			if out.String() != c.want {
				t.Fatalf("got %q, want %q", out.String(), c.want)
			}
		})
	}
}

// FuzzSafeText: whatever a box prints, what reaches the terminal holds no
// control byte but newline and tab, and an escape only as the start of a
// colour sequence (ESC [ digits and ';' m) when colours were asked for.
func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"+a\n", "\x1b[31mx\x1b[m", "\x1b]0;t\x07", "\x1b[2J", "\x1b", "\x1b[", "\x1b[1;2;3m\x1b[", "a\rb\x08"} {
		f.Add([]byte(s), true, 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, color bool, split int) {
		var out bytes.Buffer
		st := &safeText{w: &out, color: color}
		if split > 0 && split < len(in) {
			st.Write(in[:split])
			st.Write(in[split:])
		} else {
			st.Write(in)
		}
		st.flush()
		b := out.Bytes()
		for i := 0; i < len(b); i++ {
			c := b[i]
			switch {
			case c == 0x1b:
				if !color {
					t.Fatalf("an escape passed without colours: %q → %q", in, b)
				}
				j := i + 1
				if j >= len(b) || b[j] != '[' {
					t.Fatalf("an escape not of a colour: %q → %q", in, b)
				}
				for j++; j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == ';'); j++ {
				}
				if j >= len(b) || b[j] != 'm' {
					t.Fatalf("an escape not of a colour: %q → %q", in, b)
				}
				i = j
			case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
				t.Fatalf("control byte %#x passed: %q → %q", c, in, b)
			}
		}
	})
}
