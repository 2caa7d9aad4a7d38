package gitimport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// The header of a git bundle (gitformat-bundle(5)), as git 2.39 writes it:
//
//	bundle       = signature *capability *prerequisite *reference LF pack
//	signature    = "# v2 git bundle" LF / "# v3 git bundle" LF
//	capability   = "@" key ["=" value] LF          ; v3 only
//	prerequisite = "-" obj-id [SP comment] LF       ; comment: anything but LF
//	reference    = obj-id SP refname LF
//
// ParseHeader takes exactly that and no more: lowercase object ids of the
// bundle's object format, capabilities before prerequisites before
// references, no ref named twice. A reference's name may be any
// bytes but LF here: whether a name is taken is Import's decision, made
// per ref and reported (Result.Refused), not a reason to refuse the rest.

// MaxHeader bounds a bundle's header, its blank line included. A session's
// bundle names one branch or a few; a megabyte holds twenty thousand.
const MaxHeader = 1 << 20

const (
	sigV2 = "# v2 git bundle"
	sigV3 = "# v3 git bundle"
)

// Header is a parsed bundle header.
type Header struct {
	// Version is 2 or 3.
	Version int
	// ObjectFormat is "sha1" or "sha256": the v3 capability, or sha1.
	ObjectFormat string
	// Capabilities are a v3 header's capability lines without their '@',
	// in order ("object-format=sha256"). Only object-format is taken.
	Capabilities []string
	// Prerequisites are the commits the pack builds on, which the
	// receiving repository must have.
	Prerequisites []Prerequisite
	// Refs are the references the bundle offers, as the box named them.
	Refs []Ref
	// Len is the header's length in bytes, its blank line included: the
	// pack starts there.
	Len int
}

// Prerequisite is a commit a bundle's pack builds on.
type Prerequisite struct {
	OID string
	// Comment is what git wrote after the id (the commit's subject): the
	// box's bytes, for a person only once made safe (strconv.Quote).
	Comment string
	// Bare says the line had no space after the id (and so no comment).
	Bare bool
}

// Ref is a reference a bundle offers.
type Ref struct {
	OID  string
	Name string // raw: any bytes but LF
}

// errHeader is a header ParseHeader does not take: a damaged bundle, or
// one made by hand.
func errHeader(line int, format string, args ...any) error {
	return fmt.Errorf("the bundle from the box is damaged or not one git writes: header line %d: %s: %w",
		line, fmt.Sprintf(format, args...), errdefs.ErrInvalid)
}

// ParseHeader reads a bundle's header from br, at most MaxHeader bytes,
// and leaves br at the first byte of the pack. It reads nothing past the
// header's blank line.
func ParseHeader(br *bufio.Reader) (Header, error) {
	h := Header{ObjectFormat: "sha1"}
	// The signature is read by itself, so that a stream that is no bundle
	// is said to be none, not one cut short.
	sig, err := br.Peek(len(sigV2) + 1)
	if err != nil && len(sig) == 0 {
		return Header{}, errHeader(1, "the bundle is empty (cut short?)")
	}
	switch string(sig) {
	case sigV2 + "\n":
		h.Version = 2
	case sigV3 + "\n":
		h.Version = 3
	default:
		return Header{}, errHeader(1, "%s is not the signature of a v2 or v3 git bundle", quoteCut(sig))
	}
	h.Len, _ = br.Discard(len(sig))
	const (
		inCapabilities = iota
		inPrerequisites
		inRefs
	)
	stage, formatSeen := inCapabilities, false
	names := map[string]bool{}
	for n := 2; ; n++ {
		line, err := readLine(br, &h.Len, n)
		if err != nil {
			return Header{}, err
		}
		switch {
		case len(line) == 0:
			return h, nil
		case line[0] == '@':
			if h.Version < 3 {
				return Header{}, errHeader(n, "a capability in a v2 bundle")
			}
			if stage != inCapabilities {
				return Header{}, errHeader(n, "a capability after a prerequisite or a reference")
			}
			c := string(line[1:])
			switch c {
			case "object-format=sha1", "object-format=sha256":
				if formatSeen {
					return Header{}, errHeader(n, "object-format given twice")
				}
				formatSeen, h.ObjectFormat = true, c[len("object-format="):]
			default:
				if bytes.HasPrefix(line, []byte("@filter=")) {
					return Header{}, errHeader(n, "a filtered bundle (%s) lacks objects by design; make it without --filter", quoteCut(line))
				}
				return Header{}, errHeader(n, "capability %s is not one paddock takes (object-format only)", quoteCut(line))
			}
			h.Capabilities = append(h.Capabilities, c)
		case line[0] == '-':
			if stage == inRefs {
				return Header{}, errHeader(n, "a prerequisite after a reference")
			}
			stage = inPrerequisites
			oid, rest, err := cutOID(line[1:], h.ObjectFormat, n)
			if err != nil {
				return Header{}, err
			}
			p := Prerequisite{OID: oid, Bare: len(rest) == 0}
			if !p.Bare {
				if rest[0] != ' ' {
					return Header{}, errHeader(n, "no space after the prerequisite's id")
				}
				p.Comment = string(rest[1:])
			}
			h.Prerequisites = append(h.Prerequisites, p)
		default:
			stage = inRefs
			oid, rest, err := cutOID(line, h.ObjectFormat, n)
			if err != nil {
				return Header{}, err
			}
			if len(rest) < 2 || rest[0] != ' ' {
				return Header{}, errHeader(n, "a reference line is an id, a space and a name")
			}
			name := string(rest[1:])
			if names[name] {
				return Header{}, errHeader(n, "reference %s is named twice", strconv.Quote(name))
			}
			names[name] = true
			h.Refs = append(h.Refs, Ref{OID: oid, Name: name})
		}
	}
}

// readLine reads one LF-terminated line and returns it without its LF,
// adding its length to *total, which may not pass MaxHeader.
func readLine(br *bufio.Reader, total *int, n int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if *total+len(line)+len(chunk) > MaxHeader {
			return nil, errHeader(n, "the header goes on past %d bytes", MaxHeader)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			*total += len(line)
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, errHeader(n, "the bundle ends before its header does (cut short?)")
		default:
			return nil, fmt.Errorf("read the bundle from the box: %w", err)
		}
	}
}

// cutOID takes the object id of format at the start of b.
func cutOID(b []byte, format string, n int) (oid string, rest []byte, err error) {
	size := 40
	if format == "sha256" {
		size = 64
	}
	if len(b) < size || !isHex(b[:size]) {
		return "", nil, errHeader(n, "no %s object id in lowercase hex at the start of %s", format, quoteCut(b))
	}
	return string(b[:size]), b[size:], nil
}

// IsOID says s is a full object id, sha1 or sha256, in lowercase hex.
func IsOID(s string) bool { return (len(s) == 40 || len(s) == 64) && isHex([]byte(s)) }

func isHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// quoteCut is b quoted for a message, cut to 80 bytes.
func quoteCut(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "…"
	}
	return strconv.Quote(string(b))
}
