package channel

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The Runner reads the guest's bytes — a box's, so untrusted — in three
// forms: a JSON header or reply line (ReadJSONLine), an exec stream's
// frames (ReadFrame, through Process.readLoop) and the payloads of the
// resize and exit frames. These targets feed them arbitrary bytes.

// FuzzReadJSONLine: a line is read only within MaxHeader (else
// ErrHeaderTooLong), a bad
// line is an error and never a panic, and what WriteJSONLine writes reads
// back the same.
func FuzzReadJSONLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"forward","service":"anthropic"}` + "\n",
		`{"ok":true,"version":"1.2.3","pid":7}` + "\n",
		`{"ok":false,"error":"no","code":"not_found"}` + "\n",
		`{"type":"exec","argv":["sh","-c","x"],"rows":65535,"cols":1}` + "\n",
		`{"type":"put","files":[{"path":"/a","mode":420,"size":3}]}` + "\n",
		"{\"type\":\"\\u0000\"}\n", "\n", "{", "null\n", `{"rows":-1}` + "\n", `{"rows":70000}` + "\n",
		strings.Repeat(" ", MaxHeader) + "{}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []any{&Header{}, &Reply{}} {
			br := bufio.NewReaderSize(bytes.NewReader(data), 32<<10)
			err := ReadJSONLine(br, v)
			line, _, _ := bytes.Cut(data, []byte{'\n'})
			if errors.Is(err, ErrHeaderTooLong) && len(line)+1 <= MaxHeader {
				t.Fatalf("a line of %d bytes refused as too long", len(line)+1)
			}
			if err == nil && len(line)+1 > MaxHeader {
				t.Fatalf("a line of %d bytes accepted", len(line)+1)
			}
			if err != nil {
				continue
			}
			// What was read writes and reads back as itself.
			var buf bytes.Buffer
			if err := WriteJSONLine(&buf, v); err != nil {
				continue // too large once re-encoded (escapes): refused, not cut
			}
			again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := ReadJSONLine(bufio.NewReader(&buf), again); err != nil {
				t.Fatalf("re-reading %q: %v", buf.Bytes(), err)
			}
			// (As JSON: an empty list and none are one on the wire.)
			if a, b := mustJSON(t, v), mustJSON(t, again); a != b {
				t.Fatalf("round trip: %s became %s", a, b)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	var b bytes.Buffer
	if err := WriteJSONLine(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// FuzzExecStream: Process.readLoop, which the Runner runs on an exec's
// stream, against a reference reading of the same bytes. Output goes to
// stdout and stderr exactly as framed until the exit frame; the exit code
// is the frame's; a frame over MaxFrame, a bad exit frame or a stream
// that ends first is an error; the stream is closed at the end.
func FuzzExecStream(f *testing.F) {
	frame := func(typ byte, p string) string {
		var b bytes.Buffer
		if err := WriteFrame(&b, typ, []byte(p)); err != nil {
			f.Fatal(err)
		}
		return b.String()
	}
	f.Add([]byte(frame(FrameStdout, "hello\n") + frame(FrameStderr, "oops") + frame(FrameExit, string(ExitPayload(3)))))
	f.Add([]byte(frame(FrameStdout, "") + frame('z', "unknown") + frame(FrameExit, string(ExitPayload(-1)))))
	f.Add([]byte(frame(FrameExit, "abc")))
	f.Add([]byte(frame(FrameStdout, "cut")[:7]))
	f.Add([]byte{FrameStdout, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{FrameStdout, 0, 0x10, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The reference: frames by hand.
		var wantOut, wantErr bytes.Buffer
		wantCode, wantOK := -1, false
		rest := data
		for {
			if len(rest) < 5 {
				break
			}
			n := binary.BigEndian.Uint32(rest[1:5])
			if n > MaxFrame || uint64(len(rest)-5) < uint64(n) {
				break
			}
			typ, p := rest[0], rest[5:5+n]
			rest = rest[5+n:]
			if typ == FrameStdout {
				wantOut.Write(p)
			}
			if typ == FrameStderr {
				wantErr.Write(p)
			}
			if typ == FrameExit {
				if len(p) == 4 {
					wantCode, wantOK = int(int32(binary.BigEndian.Uint32(p))), true
				} else {
					wantCode = 0 // ParseExit's zero, reported with an error
				}
				break
			}
		}

		ours, theirs := net.Pipe()
		defer theirs.Close()
		var out, errb bytes.Buffer
		p := &Process{st: ours, br: bufio.NewReader(bytes.NewReader(data)), done: make(chan struct{}), code: -1, stdout: &out, stderr: &errb}
		p.readLoop()
		if !bytes.Equal(out.Bytes(), wantOut.Bytes()) || !bytes.Equal(errb.Bytes(), wantErr.Bytes()) {
			t.Fatalf("output %q / %q, want %q / %q", out.Bytes(), errb.Bytes(), wantOut.Bytes(), wantErr.Bytes())
		}
		if p.code != wantCode || (p.err == nil) != wantOK {
			t.Fatalf("exit %d (err %v), want %d (ok %v)", p.code, p.err, wantCode, wantOK)
		}
		ours.SetWriteDeadline(time.Now().Add(time.Second)) // an open pipe nobody reads would block
		if _, err := ours.Write([]byte{0}); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("the stream was left open: %v", err)
		}
	})
}

// FuzzReadFrame: the buffer ReadFrame returns never grows past MaxFrame,
// whatever length a frame claims, and a frame WriteFrame wrote reads back.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{FrameResize, 0, 0, 0, 4, 0, 24, 0, 80}, byte(FrameStdin), []byte("x"))
	f.Add([]byte{FrameStdout, 0x7f, 0xff, 0xff, 0xff}, byte(FrameExit), []byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte, typ byte, payload []byte) {
		var buf []byte
		r := bytes.NewReader(data)
		for {
			_, p, nb, err := ReadFrame(r, buf)
			buf = nb
			if cap(buf) > MaxFrame || len(p) > MaxFrame {
				t.Fatalf("a buffer of %d bytes", cap(buf))
			}
			if err != nil {
				break
			}
			if len(p) == 4 {
				if rows, cols, ok := ParseResize(p); !ok || ResizePayload(rows, cols) == nil || !bytes.Equal(ResizePayload(rows, cols), p) {
					t.Fatalf("resize %x", p)
				}
				if code, ok := ParseExit(p); !ok || !bytes.Equal(ExitPayload(code), p) {
					t.Fatalf("exit %x", p)
				}
			}
		}
		var w bytes.Buffer
		if err := WriteFrame(&w, typ, payload); err != nil {
			if len(payload) <= MaxFrame {
				t.Fatal(err)
			}
			return
		}
		gotTyp, got, _, err := ReadFrame(&w, nil)
		if err != nil || gotTyp != typ || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %v %q %q", err, gotTyp, got)
		}
	})
}
