// Package sessiontoken issues, checks and revokes the per-session tokens
// that stand in for the owner's credential inside a box.
//
// A token is 256 random bits (secret.NewToken). Only its SHA-256 is kept, in
// memory and in the store (bucket "tokens", key = hex hash), so a copy of the
// store cannot be replayed. A session has at most one live token: issuing a
// new one revokes the old. Revocation deletes the hash, so a revoked token is
// refused by the very next Lookup.
package sessiontoken

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Record is what is known of a live token.
type Record struct {
	Session string          `json:"session"`
	Kind    credential.Kind `json:"kind"`
	Issued  time.Time       `json:"issued"`
}

// Registry is safe for concurrent use.
type Registry struct {
	st store.Store

	mu        sync.RWMutex
	byHash    map[secret.Hash]Record
	bySession map[string]secret.Hash
	suspended map[string]bool // by session: refused as if revoked, until Resume
}

// New loads the live tokens from st.
func New(st store.Store) (*Registry, error) {
	r := &Registry{st: st, byHash: map[secret.Hash]Record{}, bySession: map[string]secret.Hash{}, suspended: map[string]bool{}}
	kvs, err := st.List(store.BucketTokens)
	if err != nil {
		return nil, fmt.Errorf("load session tokens: %w", err)
	}
	for _, kv := range kvs {
		var h secret.Hash
		b, err := hex.DecodeString(kv.Key)
		var rec Record
		if err != nil || len(b) != len(h) || json.Unmarshal(kv.Value, &rec) != nil || rec.Session == "" {
			// A damaged entry grants nothing; drop it rather than guess.
			_ = st.Delete(store.BucketTokens, kv.Key)
			continue
		}
		copy(h[:], b)
		if old, ok := r.bySession[rec.Session]; ok {
			// At most one live token per session: keep the newest.
			if r.byHash[old].Issued.After(rec.Issued) {
				_ = st.Delete(store.BucketTokens, kv.Key)
				continue
			}
			delete(r.byHash, old)
			_ = st.Delete(store.BucketTokens, hex.EncodeToString(old[:]))
		}
		r.byHash[h] = rec
		r.bySession[rec.Session] = h
	}
	return r, nil
}

// Issue creates the session's token for a credential of kind, revoking any
// earlier one. The token is returned once; paddock cannot show it again.
func (r *Registry) Issue(session string, kind credential.Kind) (secret.Value, error) {
	if session == "" || kind.EnvVar() == "" {
		return secret.Value{}, fmt.Errorf("issue token: session %q kind %q: %w", session, kind, errdefs.ErrInvalid)
	}
	tok, err := secret.NewToken()
	if err != nil {
		return secret.Value{}, err
	}
	h := secret.HashOf(tok)
	rec := Record{Session: session, Kind: kind, Issued: time.Now().UTC()}
	b, _ := json.Marshal(rec)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.st.Put(store.BucketTokens, hex.EncodeToString(h[:]), b); err != nil {
		return secret.Value{}, fmt.Errorf("store token: %w", err)
	}
	if old, ok := r.bySession[session]; ok {
		delete(r.byHash, old)
		if err := r.st.Delete(store.BucketTokens, hex.EncodeToString(old[:])); err != nil {
			return secret.Value{}, fmt.Errorf("revoke old token: %w", err)
		}
	}
	r.byHash[h] = rec
	r.bySession[session] = h
	return tok, nil
}

// Revoke invalidates the session's token, if it has one. The token is
// refused from the moment Revoke returns, even if the store write failed
// (the error is still returned).
func (r *Registry) Revoke(session string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.bySession[session]
	if !ok {
		return nil
	}
	delete(r.byHash, h)
	delete(r.bySession, session)
	if err := r.st.Delete(store.BucketTokens, hex.EncodeToString(h[:])); err != nil {
		return fmt.Errorf("revoke token of %s: %w", session, err)
	}
	return nil
}

// Lookup returns the record of a live token.
func (r *Registry) Lookup(tok secret.Value) (Record, bool) {
	if tok.Len() != len(secret.TokenPrefix)+43 {
		return Record{}, false // not a paddock token: skip the hash
	}
	h := secret.HashOf(tok)
	r.mu.RLock()
	rec, ok := r.byHash[h]
	if ok && r.suspended[rec.Session] {
		rec, ok = Record{}, false // exactly as a revoked token
	}
	r.mu.RUnlock()
	// The map lookup is on a hash of the token, which an attacker cannot
	// steer byte by byte, so its timing says nothing about live tokens.
	return rec, ok
}

// Live reports whether the session has a live token.
func (r *Registry) Live(session string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.bySession[session]
	return ok
}

// Suspend makes the session's token refused exactly as a revoked one,
// while it stays issued (a frozen session's: its box keeps it in memory),
// until Resume. It holds in memory only: the Runner suspends again at
// start what it knows to be frozen. Suspending a session without a token
// holds for the next one issued.
func (r *Registry) Suspend(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suspended[session] = true
}

// Resume ends a suspension.
func (r *Registry) Resume(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.suspended, session)
}
