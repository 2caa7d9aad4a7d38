package channel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types on an exec stream.
const (
	FrameStdin    byte = 'i' // Runner → guest: bytes for the process's stdin
	FrameStdinEOF byte = 'I' // Runner → guest: close stdin
	FrameResize   byte = 'r' // Runner → guest: rows, cols (2 × uint16)
	FrameSignal   byte = 's' // Runner → guest: one signal number
	FrameStdout   byte = 'o' // guest → Runner
	FrameStderr   byte = 'e' // guest → Runner
	FrameExit     byte = 'x' // guest → Runner: int32 exit code (128+n for signal n), last frame
)

// MaxFrame bounds a frame's payload.
const MaxFrame = 1 << 20

// ErrFrameTooLarge is returned for a frame over MaxFrame.
var ErrFrameTooLarge = errors.New("channel: frame too large")

// WriteFrame writes one frame: type, big-endian uint32 length, payload.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return ErrFrameTooLarge
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame into buf (grown as needed) and returns its type
// and payload, which aliases buf.
func ReadFrame(r io.Reader, buf []byte) (byte, []byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, buf, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, buf, err
	}
	return hdr[0], buf, buf, nil
}

// ResizePayload encodes a terminal size.
func ResizePayload(rows, cols uint16) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, rows)
	binary.BigEndian.PutUint16(b[2:], cols)
	return b
}

// ParseResize decodes a terminal size.
func ParseResize(p []byte) (rows, cols uint16, ok bool) {
	if len(p) != 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), true
}

// ExitPayload encodes an exit code.
func ExitPayload(code int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(int32(code)))
	return b
}

// ParseExit decodes an exit code.
func ParseExit(p []byte) (int, bool) {
	if len(p) != 4 {
		return 0, false
	}
	return int(int32(binary.BigEndian.Uint32(p))), true
}
