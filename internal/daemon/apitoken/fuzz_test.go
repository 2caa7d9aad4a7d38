package apitoken

import (
	"errors"
	"testing"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
)

// FuzzCheck: any bytes as a presented token are refused with ErrBad,
// never a panic, unless they are the one token made.
func FuzzCheck(f *testing.F) {
	s := New(store.NewMemory())
	tok, _, err := s.Create(1, api.ScopeRead, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok.Reveal())
	f.Add(tok.Reveal()[:20])
	f.Add(Prefix)
	f.Add(Prefix + "000000000000_")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, v string) {
		info, err := s.Check(secret.New(v))
		if v == tok.Reveal() {
			if err != nil || info.UID != 1 {
				t.Fatalf("the token made: %+v %v", info, err)
			}
			return
		}
		if !errors.Is(err, ErrBad) {
			t.Fatalf("%q: %v", v, err)
		}
	})
}
