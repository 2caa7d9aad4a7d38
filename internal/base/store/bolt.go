package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bolt is the on-disk store, one bbolt file.
type Bolt struct{ db *bolt.DB }

var _ Store = (*Bolt)(nil)

// OpenBolt opens (creating if needed, mode 0600) the store at path and checks
// its schema version. bbolt's own file lock makes a second opener fail after
// a short wait; the Runner also holds the state directory lock (statedir).
func OpenBolt(path string) (*Bolt, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: another process has it open: %w", path, errdefs.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(BucketMeta))
		if err != nil {
			return err
		}
		v := b.Get([]byte("schema_version"))
		if v == nil {
			return b.Put([]byte("schema_version"), []byte(SchemaVersion))
		}
		if string(v) != SchemaVersion {
			return fmt.Errorf("store %s has schema version %q; this paddock understands %q: %w",
				path, v, SchemaVersion, errdefs.ErrConflict)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Bolt{db: db}, nil
}

// Get implements Store.
func (s *Bolt) Get(bucket, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		var v []byte
		if b != nil {
			v = b.Get([]byte(key))
		}
		if v == nil {
			return fmt.Errorf("%s/%s: %w", bucket, key, errdefs.ErrNotFound)
		}
		out = append([]byte(nil), v...) // v is only valid inside the transaction
		return nil
	})
	return out, mapClosed(err)
}

// Put implements Store.
func (s *Bolt) Put(bucket, key string, value []byte) error {
	if bucket == "" || key == "" {
		return fmt.Errorf("empty bucket or key: %w", errdefs.ErrInvalid)
	}
	err := mapClosed(s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), value)
	}))
	if err != nil && !errors.Is(err, ErrClosed) {
		// E.g. a full disk: nothing of this Put is kept, all before it is.
		return fmt.Errorf("store: save %s/%s: %w", bucket, key, err)
	}
	return err
}

// Delete implements Store.
func (s *Bolt) Delete(bucket, key string) error {
	return mapClosed(s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	}))
}

// List implements Store.
func (s *Bolt) List(bucket string) ([]KV, error) {
	var out []KV
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out = append(out, KV{Key: string(k), Value: append([]byte(nil), v...)})
			return nil
		})
	})
	return out, mapClosed(err)
}

// Close implements Store.
func (s *Bolt) Close() error { return s.db.Close() }

func mapClosed(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}
