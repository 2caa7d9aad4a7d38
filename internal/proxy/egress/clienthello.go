package egress

import (
	"encoding/binary"
	"errors"
)

// ErrNotTLS: the first bytes are not a TLS handshake record.
var ErrNotTLS = errors.New("not a TLS ClientHello")

// ErrNeedMore: the ClientHello is not complete in the bytes given.
var ErrNeedMore = errors.New("ClientHello incomplete")

// MaxHello bounds the bytes read to find the ClientHello.
const MaxHello = 16 << 10

// ParseSNI reads the server_name of a TLS ClientHello from the first bytes
// a client sends in a tunnel. The hello may span several records; data is
// never modified. It returns "" with no error when the hello has no SNI.
func ParseSNI(data []byte) (string, error) {
	// Reassemble the handshake from records.
	var hs []byte
	rest := data
	for {
		if len(rest) < 5 {
			if len(hs) == 0 && len(rest) > 0 && rest[0] != 0x16 {
				return "", ErrNotTLS
			}
			return "", ErrNeedMore
		}
		if rest[0] != 0x16 || rest[1] != 0x03 {
			return "", ErrNotTLS
		}
		n := int(binary.BigEndian.Uint16(rest[3:5]))
		if n == 0 || n > 1<<14 {
			return "", ErrNotTLS
		}
		if len(rest) < 5+n {
			return "", ErrNeedMore
		}
		hs = append(hs, rest[5:5+n]...)
		rest = rest[5+n:]
		if len(hs) >= 4 {
			if hs[0] != 0x01 { // client_hello
				return "", ErrNotTLS
			}
			need := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
			if need > MaxHello {
				return "", ErrNotTLS
			}
			if len(hs) >= need {
				return sniFromHello(hs[4:need])
			}
		}
	}
}

type reader struct{ b []byte }

func (r *reader) skip(n int) bool {
	if n < 0 || len(r.b) < n {
		return false
	}
	r.b = r.b[n:]
	return true
}

func (r *reader) u8() (int, bool) {
	if len(r.b) < 1 {
		return 0, false
	}
	v := int(r.b[0])
	r.b = r.b[1:]
	return v, true
}

func (r *reader) u16() (int, bool) {
	if len(r.b) < 2 {
		return 0, false
	}
	v := int(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v, true
}

func (r *reader) bytes(n int) ([]byte, bool) {
	if n < 0 || len(r.b) < n {
		return nil, false
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v, true
}

var errBadHello = errors.New("malformed ClientHello")

func sniFromHello(body []byte) (string, error) {
	r := &reader{b: body}
	if !r.skip(2 + 32) { // version, random
		return "", errBadHello
	}
	n, ok := r.u8() // session id
	if !ok || !r.skip(n) {
		return "", errBadHello
	}
	n, ok = r.u16() // cipher suites
	if !ok || !r.skip(n) {
		return "", errBadHello
	}
	n, ok = r.u8() // compression methods
	if !ok || !r.skip(n) {
		return "", errBadHello
	}
	if len(r.b) == 0 {
		return "", nil // no extensions
	}
	n, ok = r.u16()
	if !ok {
		return "", errBadHello
	}
	ext, ok := r.bytes(n)
	if !ok {
		return "", errBadHello
	}
	er := &reader{b: ext}
	sni := ""
	seen := false
	for len(er.b) > 0 {
		typ, ok1 := er.u16()
		l, ok2 := er.u16()
		data, ok3 := er.bytes(l)
		if !ok1 || !ok2 || !ok3 {
			return "", errBadHello
		}
		if typ != 0 { // server_name
			continue
		}
		if seen {
			return "", errors.New("ClientHello has two server_name extensions")
		}
		seen = true
		sr := &reader{b: data}
		listLen, ok := sr.u16()
		list, ok2 := sr.bytes(listLen)
		if !ok || !ok2 || len(sr.b) != 0 {
			return "", errBadHello
		}
		lr := &reader{b: list}
		for len(lr.b) > 0 {
			nt, ok1 := lr.u8()
			nl, ok2 := lr.u16()
			name, ok3 := lr.bytes(nl)
			if !ok1 || !ok2 || !ok3 {
				return "", errBadHello
			}
			if nt == 0 {
				if sni != "" {
					return "", errors.New("ClientHello names two hosts")
				}
				sni = string(name)
			}
		}
	}
	return sni, nil
}
