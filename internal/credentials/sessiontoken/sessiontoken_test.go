package sessiontoken

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

func TestIssueLookupRevoke(t *testing.T) {
	st := store.NewMemory()
	r, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	t1, err := r.Issue("s1", credential.KindAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := r.Lookup(t1)
	if !ok || rec.Session != "s1" || rec.Kind != credential.KindAPIKey {
		t.Fatalf("%+v %v", rec, ok)
	}
	// Only the hash is stored.
	kvs, _ := st.List(store.BucketTokens)
	for _, kv := range kvs {
		if strings.Contains(kv.Key+string(kv.Value), t1.Reveal()) || strings.Contains(kv.Key+string(kv.Value), t1.Reveal()[7:]) {
			t.Fatal("token stored in clear")
		}
	}
	// A second token for the session revokes the first.
	t2, _ := r.Issue("s1", credential.KindAPIKey)
	if _, ok := r.Lookup(t1); ok {
		t.Fatal("old token still live")
	}
	if _, ok := r.Lookup(t2); !ok {
		t.Fatal("new token not live")
	}
	if err := r.Revoke("s1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup(t2); ok || r.Live("s1") {
		t.Fatal("revoked token live")
	}
	if kvs, _ := st.List(store.BucketTokens); len(kvs) != 0 {
		t.Fatalf("revoked hash still stored: %d", len(kvs))
	}
	if _, ok := r.Lookup(secret.New("pdk_st_unknown")); ok {
		t.Fatal("unknown token accepted")
	}
	if _, err := r.Issue("", credential.KindOAuth); err == nil {
		t.Fatal("empty session accepted")
	}
}

func TestSurvivesRestart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "db")
	st, err := store.OpenBolt(p)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := New(st)
	tok, _ := r.Issue("s1", credential.KindOAuth)
	other, _ := r.Issue("s2", credential.KindOAuth)
	r.Revoke("s2")
	st.Put(store.BucketTokens, "zz-damaged", []byte("{"))
	st.Close()

	st, err = store.OpenBolt(p)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err = New(st)
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok := r.Lookup(tok); !ok || rec.Session != "s1" {
		t.Fatal("live token lost across restart")
	}
	if _, ok := r.Lookup(other); ok {
		t.Fatal("revoked token back after restart")
	}
	if _, err := st.Get(store.BucketTokens, "zz-damaged"); err == nil {
		t.Fatal("damaged entry kept")
	}
}

// TestSuspendResume: a suspended token is refused exactly as a revoked one
// (Lookup finds nothing), another session's is untouched, and Resume
// brings the same token back.
func TestSuspendResume(t *testing.T) {
	r, err := New(store.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := r.Issue("s1", credential.KindOAuth)
	t2, _ := r.Issue("s2", credential.KindOAuth)
	r.Suspend("s1")
	if rec, ok := r.Lookup(t1); ok || rec != (Record{}) {
		t.Fatalf("a suspended token: %+v %v", rec, ok)
	}
	if _, ok := r.Lookup(t2); !ok {
		t.Fatal("another session's token suspended too")
	}
	if !r.Live("s1") {
		t.Fatal("a suspended token is still issued")
	}
	r.Resume("s1")
	if rec, ok := r.Lookup(t1); !ok || rec.Session != "s1" {
		t.Fatalf("after Resume: %+v %v", rec, ok)
	}
}
