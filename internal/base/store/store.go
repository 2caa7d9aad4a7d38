// Package store is paddock's embedded key-value store: named buckets of
// byte keys and values, behind a small interface with two implementations,
// Bolt (on disk, pure Go bbolt) and Memory (for tests).
//
// Schema. Values are JSON documents owned by the package that writes them:
//
//	meta/
//	  schema_version   "1"            (SchemaVersion; checked at Open)
//	  runner_id        12 hex digits  (labels this Runner's Docker objects)
//	sessions/
//	  <session id>     session record (internal/sessions/session)
//	tokens/
//	  <sha256 hex>     token record: session id, kind, issued, revoked (internal/credentials/sessiontoken)
//	api_tokens/
//	  <token id>       API token: owner uid, scope, name, sha256 of the secret (internal/daemon/apitoken)
//
// Every Put is durable when it returns (bbolt fsyncs each transaction).
package store

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// SchemaVersion is written to meta/schema_version on first open. A store
// with another version is refused rather than misread.
const SchemaVersion = "1"

// Bucket names in use (see the package doc).
const (
	BucketMeta     = "meta"
	BucketSessions = "sessions"
	BucketTokens   = "tokens"
	// BucketAPITokens holds people's API tokens (package apitoken).
	BucketAPITokens = "api_tokens"
)

// KV is one entry of a bucket.
type KV struct {
	Key   string
	Value []byte
}

// Store is the interface every implementation satisfies. Methods are safe
// for concurrent use. Get and List return copies the caller may keep.
type Store interface {
	// Get returns the value, or an error wrapping errdefs.ErrNotFound.
	Get(bucket, key string) ([]byte, error)
	// Put creates or replaces the value.
	Put(bucket, key string, value []byte) error
	// Delete removes the key; deleting a missing key is not an error.
	Delete(bucket, key string) error
	// List returns the bucket's entries sorted by key; an unknown bucket is empty.
	List(bucket string) ([]KV, error)
	// Close releases the store. Calls after Close fail.
	Close() error
}

// ErrClosed is returned by a closed store.
var ErrClosed = errors.New("store is closed")

// Memory is the in-memory twin of Bolt, with the same contract.
type Memory struct {
	mu      sync.RWMutex
	buckets map[string]map[string][]byte
	closed  bool
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{buckets: map[string]map[string][]byte{}} }

// Get implements Store.
func (m *Memory) Get(bucket, key string) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	v, ok := m.buckets[bucket][key]
	if !ok {
		return nil, fmt.Errorf("%s/%s: %w", bucket, key, errdefs.ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

// Put implements Store.
func (m *Memory) Put(bucket, key string, value []byte) error {
	if bucket == "" || key == "" {
		return fmt.Errorf("empty bucket or key: %w", errdefs.ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	b := m.buckets[bucket]
	if b == nil {
		b = map[string][]byte{}
		m.buckets[bucket] = b
	}
	b[key] = append([]byte(nil), value...)
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(bucket, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.buckets[bucket], key)
	return nil
}

// List implements Store.
func (m *Memory) List(bucket string) ([]KV, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]KV, 0, len(m.buckets[bucket]))
	for k, v := range m.buckets[bucket] {
		out = append(out, KV{Key: k, Value: append([]byte(nil), v...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
