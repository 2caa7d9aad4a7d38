package cli

import (
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// DefaultDetachKeys are docker's: ctrl-p then ctrl-q.
const DefaultDetachKeys = "ctrl-p,ctrl-q"

// parseDetachKeys reads docker's --detach-keys syntax: keys separated by
// commas, each a single character or ctrl-X with X one of a-z @ [ \ ] ^ _.
func parseDetachKeys(s string) ([]byte, error) {
	bad := func(why string) error {
		return fmt.Errorf("--detach-keys %q: %s; write keys like docker's, e.g. ctrl-p,ctrl-q or ctrl-a,d: %w", s, why, errdefs.ErrInvalid)
	}
	if strings.TrimSpace(s) == "" {
		return nil, bad("no key")
	}
	var seq []byte
	for _, k := range strings.Split(s, ",") {
		switch {
		case len(k) == 1:
			seq = append(seq, k[0])
		case strings.HasPrefix(strings.ToLower(k), "ctrl-") && len(k) == 6:
			c := strings.ToLower(k)[5]
			switch {
			case c >= 'a' && c <= 'z':
				seq = append(seq, c-'a'+1)
			case c == '@':
				seq = append(seq, 0)
			case c >= '[' && c <= '_': // [ \ ] ^ _
				seq = append(seq, c-'['+0x1b)
			default:
				return nil, bad("no such control key: " + k)
			}
		default:
			return nil, bad("not a key: " + k)
		}
	}
	return seq, nil
}

// detacher finds a detach sequence in what a person types. Bytes that
// could begin the sequence are held back until it completes (they are
// then dropped) or breaks (they are then passed on, in order).
type detacher struct {
	seq  []byte
	held int // how many bytes of seq were typed last
}

// feed returns what to pass on of in and whether the sequence completed;
// after it completes, the rest of in is not looked at.
func (d *detacher) feed(in []byte) (out []byte, detach bool) {
	out = make([]byte, 0, len(in)+len(d.seq))
	for _, b := range in {
		if b == d.seq[d.held] {
			d.held++
			if d.held == len(d.seq) {
				d.held = 0
				return out, true
			}
			continue
		}
		out = append(out, d.seq[:d.held]...)
		d.held = 0
		if b == d.seq[0] {
			d.held = 1
			if len(d.seq) == 1 {
				d.held = 0
				return out, true
			}
			continue
		}
		out = append(out, b)
	}
	return out, false
}
