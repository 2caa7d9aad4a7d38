// Package gitproto reads what a git client sends to a smart-HTTP server,
// for a proxy that must judge a push before any byte of it goes upstream:
// the receive-pack commands (pkt-lines: which refs move from where to
// where) and, in the pack after them, the commits, to tell a fast-forward
// from a rewrite. It also writes the answer a refused push gets, in the
// form git prints to its user.
//
// Everything here reads untrusted bytes: lengths are bounded, and a
// malformed stream is an error, never a panic (FuzzCommands, FuzzPack).
package gitproto

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxPktLine is the largest pkt-line git sends (LARGE_PACKET_MAX).
const MaxPktLine = 65520

// MaxCommands bounds the ref updates of one push.
const MaxCommands = 1000

// ErrMalformed is wrapped by every error about the stream's form.
var ErrMalformed = errors.New("malformed git request")

// ZeroID is the object id of a ref that does not exist (SHA-1).
const ZeroID = "0000000000000000000000000000000000000000"

// Command is one ref update of a push: Ref moves from Old to New. Old is
// ZeroID for a ref the push creates, New is ZeroID for one it deletes.
type Command struct {
	Old, New, Ref string
}

// Create reports whether the command makes a new ref.
func (c Command) Create() bool { return c.Old == ZeroID }

// Delete reports whether the command deletes the ref.
func (c Command) Delete() bool { return c.New == ZeroID }

// String is the update as git's own messages show it: old..new ref.
func (c Command) String() string {
	return short(c.Old) + ".." + short(c.New) + " " + c.Ref
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Request is the head of a receive-pack request: everything before the
// pack. Raw is those bytes exactly as read, to send on before the pack.
type Request struct {
	Commands     []Command
	Capabilities []string
	PushOptions  []string
	Raw          []byte
}

// Has reports whether the client asked for capability c (a bare name, or
// the name of a name=value one).
func (r *Request) Has(c string) bool {
	for _, x := range r.Capabilities {
		if x == c || strings.HasPrefix(x, c+"=") {
			return true
		}
	}
	return false
}

// readPkt reads one pkt-line: its payload, or flush (nil, true).
func readPkt(r *bufio.Reader, raw *bytes.Buffer) (payload []byte, flush bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, false, fmt.Errorf("the request ends inside its commands: %w", ErrMalformed)
		}
		return nil, false, err
	}
	raw.Write(hdr[:])
	var n [2]byte
	if _, err := hex.Decode(n[:], hdr[:]); err != nil {
		return nil, false, fmt.Errorf("pkt-line length %q is not hex: %w", hdr[:], ErrMalformed)
	}
	size := int(n[0])<<8 | int(n[1])
	switch {
	case size == 0:
		return nil, true, nil
	case size < 4:
		return nil, false, fmt.Errorf("pkt-line length %d is not one a receive-pack request uses: %w", size, ErrMalformed)
	case size > MaxPktLine:
		return nil, false, fmt.Errorf("pkt-line length %d is over git's %d: %w", size, MaxPktLine, ErrMalformed)
	}
	p := make([]byte, size-4)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, false, fmt.Errorf("the request ends inside a pkt-line: %w", ErrMalformed)
	}
	raw.Write(p)
	return p, false, nil
}

// ReadRequest reads a receive-pack request's commands (and its push
// options, if asked for) from r, leaving r at the pack. Shallow lines are
// accepted and kept in Raw; a signed push (push-cert) is refused: its
// commands are inside the certificate, where a proxy would have to trust
// its form twice.
func ReadRequest(r *bufio.Reader) (*Request, error) {
	req := &Request{}
	var raw bytes.Buffer
	first := true
	for {
		p, flush, err := readPkt(r, &raw)
		if err != nil {
			return nil, err
		}
		if flush {
			break
		}
		line := p
		if first {
			if bytes.HasPrefix(line, []byte("push-cert")) {
				return nil, fmt.Errorf("a signed push (push-cert) is not supported through paddock: %w", ErrMalformed)
			}
			if i := bytes.IndexByte(line, 0); i >= 0 {
				req.Capabilities = strings.Fields(string(bytes.TrimRight(line[i+1:], "\n")))
				line = line[:i]
			}
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if bytes.HasPrefix(line, []byte("shallow ")) {
			if !isOID(string(line[len("shallow "):])) {
				return nil, fmt.Errorf("a shallow line without an object id: %w", ErrMalformed)
			}
			continue // before the commands; the first command still carries the capabilities
		}
		first = false
		c, err := parseCommand(string(line))
		if err != nil {
			return nil, err
		}
		if len(req.Commands) >= MaxCommands {
			return nil, fmt.Errorf("more than %d ref updates in one push: %w", MaxCommands, ErrMalformed)
		}
		req.Commands = append(req.Commands, c)
	}
	if len(req.Commands) == 0 {
		return nil, fmt.Errorf("a push with no ref update: %w", ErrMalformed)
	}
	if req.Has("push-options") {
		for {
			p, flush, err := readPkt(r, &raw)
			if err != nil {
				return nil, err
			}
			if flush {
				break
			}
			if len(req.PushOptions) >= MaxCommands {
				return nil, fmt.Errorf("more than %d push options: %w", MaxCommands, ErrMalformed)
			}
			req.PushOptions = append(req.PushOptions, strings.TrimSuffix(string(p), "\n"))
		}
	}
	req.Raw = raw.Bytes()
	return req, nil
}

func parseCommand(s string) (Command, error) {
	f := strings.Split(s, " ")
	if len(f) != 3 || !isOID(f[0]) || !isOID(f[1]) || f[2] == "" {
		return Command{}, fmt.Errorf("a ref update that is not \"old new ref\": %q: %w", clip(s), ErrMalformed)
	}
	if f[0] == ZeroID && f[1] == ZeroID {
		return Command{}, fmt.Errorf("a ref update from nothing to nothing (%s): %w", clip(f[2]), ErrMalformed)
	}
	return Command{Old: f[0], New: f[1], Ref: f[2]}, nil
}

// isOID reports whether s is a SHA-1 object id in lower-case hex.
func isOID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// PktLine encodes one pkt-line.
func PktLine(s string) []byte {
	return []byte(fmt.Sprintf("%04x%s", len(s)+4, s))
}

// Flush is the flush pkt-line.
var Flush = []byte("0000")

// RefusedResult is the body of a receive-pack answer that refuses every
// command of req with its reason (by ref), and says why on git's progress
// band first, so that git prints both: "remote: <message>" lines, then
// "! [remote rejected] <ref> (<reason>)" for each ref. Without side-band
// only the report is sent; without report-status nothing would be shown,
// and the caller answers with an HTTP error instead.
func RefusedResult(req *Request, message string, reasons map[string]string) []byte {
	var report bytes.Buffer
	report.Write(PktLine("unpack ok\n"))
	for _, c := range req.Commands {
		why := reasons[c.Ref]
		if why == "" {
			why = "refused with the rest of this push"
		}
		report.Write(PktLine("ng " + c.Ref + " " + oneLine(why) + "\n"))
	}
	report.Write(Flush)
	if !req.Has("side-band-64k") && !req.Has("side-band") {
		return report.Bytes()
	}
	max := 999
	if req.Has("side-band-64k") {
		max = MaxPktLine - 5
	}
	var out bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(message, "\n"), "\n") {
		out.Write(PktLine("\x02" + l + "\n"))
	}
	b := report.Bytes()
	for len(b) > 0 {
		n := min(len(b), max)
		out.Write(PktLine("\x01" + string(b[:n])))
		b = b[n:]
	}
	out.Write(Flush)
	return out.Bytes()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}
