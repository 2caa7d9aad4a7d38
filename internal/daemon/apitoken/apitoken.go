// Package apitoken keeps people's API tokens: bearer secrets with which a
// program calls the Runner's HTTP API on its web listener as that person,
// within a scope (read, drive, operate; api.Scope).
//
// A token is "pdk_at_" + its id + "_" + 256 random bits, base64url. It is
// shown once, when it is made; the store keeps its id, owner, scope, name
// and the SHA-256 of the whole token, never the token. Check finds the
// record by the id in the token and compares the hashes in constant time,
// so a token is checked with one lookup and no timing tells how much of a
// guess was right. Revoking deletes the record: the token is refused from
// the next request on. A token is the person's, checked afresh on every
// request (people.Directory): one whose owner left the Runner's group is
// refused with them.
package apitoken

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
)

// Prefix starts every API token.
const Prefix = "pdk_at_"

// Bounds: tokens one person may hold, and a token name's length.
const (
	MaxPerPerson = 50
	MaxName      = 64
)

// record is what the store keeps of a token.
type record struct {
	ID      string    `json:"id"`
	UID     uint32    `json:"uid"`
	Scope   api.Scope `json:"scope"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Hash    string    `json:"sha256"`
	// Used is the last time the token was checked, to the minute (not
	// written more often).
	Used time.Time `json:"used,omitzero"`
}

func (r record) info() api.TokenInfo {
	return api.TokenInfo{ID: r.ID, UID: r.UID, Scope: r.Scope, Name: r.Name, Created: r.Created, Used: r.Used}
}

// Store is the tokens in a store.Store.
type Store struct {
	st  store.Store
	now func() time.Time
	mu  sync.Mutex
	// every is how often a long answer checks its token again
	// (api.Recheck; tests shorten it).
	every time.Duration
}

func (s *Store) recheck() time.Duration {
	if s.every > 0 {
		return s.every
	}
	return api.Recheck
}

// New keeps tokens in st.
func New(st store.Store) *Store { return &Store{st: st, now: time.Now} }

// Create makes a token for uid: its secret, shown this once, and its info.
func (s *Store) Create(uid uint32, scope api.Scope, name string) (secret.Value, api.TokenInfo, error) {
	if _, err := api.ParseScope(string(scope)); err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	if len(name) > MaxName || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return secret.Value{}, api.TokenInfo{}, fmt.Errorf("a token's name is at most %d bytes of printable text: %w", MaxName, errdefs.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine, err := s.list(uid)
	if err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	if len(mine) >= MaxPerPerson {
		return secret.Value{}, api.TokenInfo{}, fmt.Errorf("you hold %d API tokens, the most one person may; revoke one (paddock token rm ID): %w", len(mine), errdefs.ErrLimit)
	}
	var idb [6]byte
	var key [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	if _, err := rand.Read(key[:]); err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	id := hex.EncodeToString(idb[:])
	tok := secret.New(Prefix + id + "_" + base64.RawURLEncoding.EncodeToString(key[:]))
	h := secret.HashOf(tok)
	r := record{ID: id, UID: uid, Scope: scope, Name: name, Created: s.now().UTC().Truncate(time.Second), Hash: hex.EncodeToString(h[:])}
	b, err := json.Marshal(r)
	if err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	if err := s.st.Put(store.BucketAPITokens, id, b); err != nil {
		return secret.Value{}, api.TokenInfo{}, err
	}
	return tok, r.info(), nil
}

// ErrBad is Check's error for any token it does not know: malformed,
// unknown, revoked or wrong. It says nothing of which.
var ErrBad = fmt.Errorf("the API token is not one this Runner knows (revoked, or mistyped); make one with paddock token create: %w", errdefs.ErrUnauthorized)

// Check returns the info of the token presented.
func (s *Store) Check(tok secret.Value) (api.TokenInfo, error) {
	v := tok.Reveal()
	rest, ok := strings.CutPrefix(v, Prefix)
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 12 || len(v) > 128 {
		return api.TokenInfo{}, ErrBad
	}
	r, err := s.get(id)
	if err != nil {
		return api.TokenInfo{}, ErrBad
	}
	want, err := hex.DecodeString(r.Hash)
	h := secret.HashOf(tok)
	if err != nil || len(want) != len(h) || !secret.Hash(want).Equal(h) {
		return api.TokenInfo{}, ErrBad
	}
	if now := s.now().UTC(); now.Sub(r.Used) > time.Minute {
		s.mu.Lock()
		if cur, err := s.get(id); err == nil && cur.Hash == r.Hash {
			cur.Used = now.Truncate(time.Second)
			if b, err := json.Marshal(cur); err == nil {
				_ = s.st.Put(store.BucketAPITokens, id, b)
			}
			r = cur
		}
		s.mu.Unlock()
	}
	return r.info(), nil
}

// List is uid's tokens, oldest first.
func (s *Store) List(uid uint32) ([]api.TokenInfo, error) {
	rs, err := s.list(uid)
	out := make([]api.TokenInfo, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.info())
	}
	return out, err
}

// Remove revokes uid's token id (an admin's call passes any's: admin).
func (s *Store) Remove(uid uint32, admin bool, id string) (api.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.get(id)
	if err != nil || (r.UID != uid && !admin) {
		return api.TokenInfo{}, fmt.Errorf("no API token %q of yours (paddock token ls lists them): %w", id, errdefs.ErrNotFound)
	}
	if err := s.st.Delete(store.BucketAPITokens, id); err != nil {
		return api.TokenInfo{}, err
	}
	return r.info(), nil
}

func (s *Store) get(id string) (record, error) {
	b, err := s.st.Get(store.BucketAPITokens, id)
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.ID != id {
		return record{}, fmt.Errorf("API token record %q is unreadable: %w", id, errdefs.ErrNotFound)
	}
	return r, nil
}

func (s *Store) list(uid uint32) ([]record, error) {
	kvs, err := s.st.List(store.BucketAPITokens)
	if err != nil {
		return nil, err
	}
	var out []record
	for _, kv := range kvs {
		var r record
		if json.Unmarshal(kv.Value, &r) == nil && r.UID == uid {
			out = append(out, r)
		}
	}
	return out, nil
}
