package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// conformance runs the Store contract against one implementation.
func conformance(t *testing.T, s Store) {
	t.Helper()
	if _, err := s.Get("b", "k"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if l, err := s.List("nobucket"); err != nil || len(l) != 0 {
		t.Fatalf("empty bucket: %v %v", l, err)
	}
	val := []byte("v1")
	if err := s.Put("b", "k2", val); err != nil {
		t.Fatal(err)
	}
	val[0] = 'X' // the store must have copied
	if err := s.Put("b", "k1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("b", "k2")
	if err != nil || string(got) != "v1" {
		t.Fatalf("get %q %v", got, err)
	}
	got[0] = 'Y' // and the caller's copy is its own
	if again, _ := s.Get("b", "k2"); string(again) != "v1" {
		t.Fatal("store shares memory with the caller")
	}
	l, err := s.List("b")
	if err != nil || len(l) != 2 || l[0].Key != "k1" || l[1].Key != "k2" {
		t.Fatalf("list %v %v", l, err)
	}
	if err := s.Put("", "k", nil); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("empty bucket: %v", err)
	}
	if err := s.Delete("b", "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("b", "k1"); err != nil {
		t.Fatal("second delete:", err)
	}
	if err := s.Delete("nobucket", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("b", "k1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal("deleted key still there")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("b", "k2"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
}

func TestMemory(t *testing.T) { conformance(t, NewMemory()) }

func TestBolt(t *testing.T) {
	s, err := OpenBolt(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, s)
}

func TestBoltPersistsAndChecksSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.db")
	s, err := OpenBolt(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("sessions", "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBolt(p); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second open: %v", err)
	}
	if err := s.Put(BucketMeta, "schema_version", []byte("99")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenBolt(p); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("future schema accepted: %v", err)
	}
}
