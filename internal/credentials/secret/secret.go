// Package secret holds values that must never be printed: the owner's
// credential and the per-session tokens.
//
// A Value redacts itself everywhere a value can leak by accident: fmt (every
// verb, including %#v and %x), log/slog, encoding/json and encoding.TextMarshaler.
// The only way to the bytes is the explicitly named Reveal method, so every
// place that sends a secret anywhere is greppable. This makes "never log a
// credential" a property of the type, not of reviewer discipline.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
)

// Redacted is what a Value prints in place of its contents.
const Redacted = "[redacted]"

// Value is a secret string. The zero Value is empty and prints as Redacted
// like any other; use IsZero to tell it apart.
type Value struct {
	// s is unexported and reached only through Reveal.
	s string
}

// New wraps s. The caller should drop its own copy of s as soon as it can.
func New(s string) Value { return Value{s: s} }

// Reveal returns the secret. Call it only where the secret leaves the
// process for the place it is meant for (an upstream header, a box's process
// environment, the 0600 credential file).
func (v Value) Reveal() string { return v.s }

// IsZero reports whether the secret is empty.
func (v Value) IsZero() bool { return v.s == "" }

// Len is the length in bytes of the secret, safe to show.
func (v Value) Len() int { return len(v.s) }

// Equal compares two secrets in constant time (for equal lengths).
func (v Value) Equal(o Value) bool {
	return subtle.ConstantTimeCompare([]byte(v.s), []byte(o.s)) == 1
}

// String implements fmt.Stringer.
func (Value) String() string { return Redacted }

// GoString implements fmt.GoStringer (%#v).
func (Value) GoString() string { return "secret.Value{" + Redacted + "}" }

// Format implements fmt.Formatter so that every verb (%s %v %q %x %d ...)
// prints Redacted.
func (Value) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte("secret.Value{" + Redacted + "}"))
		return
	}
	_, _ = f.Write([]byte(Redacted))
}

// LogValue implements slog.LogValuer.
func (Value) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON implements json.Marshaler: a secret never reaches an API answer.
func (Value) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler (TOML, YAML, map keys).
func (Value) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Hash is the SHA-256 of a token. It is what paddock stores and compares
// instead of the token itself.
type Hash [sha256.Size]byte

// HashOf returns the SHA-256 of v.
func HashOf(v Value) Hash { return sha256.Sum256([]byte(v.s)) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }

// String prints a short, non-reversible prefix, safe in logs.
func (h Hash) String() string { return fmt.Sprintf("sha256:%x", h[:6]) }

// TokenPrefix starts every session token so a leaked one is easy to spot
// and never mistaken for an Anthropic credential.
const TokenPrefix = "pdk_st_"

// TokenBytes is the number of random bytes in a session token (256 bits).
const TokenBytes = 32

// NewToken returns a fresh session token: TokenPrefix followed by 256 random
// bits in unpadded base64url.
func NewToken() (Value, error) {
	var b [TokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Value{}, fmt.Errorf("read random bytes for a session token: %w", err)
	}
	return New(TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])), nil
}
