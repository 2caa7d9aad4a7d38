package apitoken

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// TestTokens: a token is checked, listed (never its secret), kept only
// as its hash, refused once revoked, and only its owner (or an admin)
// revokes it; a wrong secret with a right id is refused like any other.
func TestTokens(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st)
	tok, info, err := s.Create(1000, api.ScopeDrive, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Reveal(), Prefix+info.ID+"_") || info.Scope != api.ScopeDrive || info.UID != 1000 {
		t.Fatalf("token %d bytes, %+v", tok.Len(), info)
	}
	if got, err := s.Check(tok); err != nil || got.ID != info.ID || got.Scope != api.ScopeDrive {
		t.Fatalf("check: %+v %v", got, err)
	}
	kvs, _ := st.List(store.BucketAPITokens)
	for _, kv := range kvs {
		secretPart := tok.Reveal()[len(Prefix)+len(info.ID)+1:]
		if strings.Contains(string(kv.Value), secretPart) {
			t.Fatalf("the store holds the token: %s", kv.Value)
		}
	}
	wrong := secret.New(tok.Reveal()[:len(tok.Reveal())-2] + "xx")
	for _, bad := range []secret.Value{wrong, secret.New(""), secret.New("pdk_at_"), secret.New(Prefix + "zzzzzzzzzzzz_abc"), secret.New(strings.Repeat("a", 1000))} {
		if _, err := s.Check(bad); !errors.Is(err, ErrBad) || !errors.Is(err, errdefs.ErrUnauthorized) {
			t.Fatalf("a bad token: %v", err)
		}
	}
	if _, _, err := s.Create(1000, "admin", ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("scope admin: %v", err)
	}
	if _, _, err := s.Create(1000, api.ScopeRead, "a\nb"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a name with a newline: %v", err)
	}
	list, err := s.List(1000)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	b, _ := json.Marshal(list)
	if strings.Contains(string(b), tok.Reveal()) {
		t.Fatal("the list shows the token")
	}
	if other, _ := s.List(1001); len(other) != 0 {
		t.Fatalf("another person's list: %+v", other)
	}
	if _, err := s.Remove(1001, false, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another person revokes it: %v", err)
	}
	if _, err := s.Remove(1000, false, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(tok); !errors.Is(err, ErrBad) {
		t.Fatalf("a revoked token: %v", err)
	}
	for i := 0; i < MaxPerPerson; i++ {
		if _, _, err := s.Create(7, api.ScopeRead, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Create(7, api.ScopeRead, ""); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("one token too many: %v", err)
	}
}

// TestHandler: the API behind tokens. No token: 401 saying how to make
// one; a read token reads but may not send a message (403, naming the
// scope needed) nor reach a socket-only route; a drive token sends; the
// request reaches the API as the token's person, marked Via the token; a
// person gone from the Runner is refused; many wrong tokens from one
// address are refused for a while (429).
func TestHandler(t *testing.T) {
	st := store.NewMemory()
	s := New(st)
	read, _, _ := s.Create(1000, api.ScopeRead, "")
	drive, dinfo, _ := s.Create(1000, api.ScopeDrive, "")
	gone, _, _ := s.Create(1002, api.ScopeOperate, "")
	var seen people.Person
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) {
		seen, _ = people.From(r.Context())
		w.Write([]byte("{}"))
	}
	mux.HandleFunc("GET /v1/sessions", ok)
	mux.HandleFunc("POST /v1/sessions/{ref}/message", ok)
	mux.HandleFunc("POST /v1/sessions/{ref}/exec", ok)
	mux.HandleFunc("GET /v1/unlisted", ok)
	who := func(uid uint32) (people.Person, error) {
		if uid == 1002 {
			return people.Person{}, errors.New("gone")
		}
		return people.Person{UID: uid, Name: "alice"}, nil
	}
	h := s.Handler(mux, who)
	do := func(method, path string, tok secret.Value, from string) (int, string) {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = from
		if !tok.IsZero() {
			r.Header.Set("Authorization", "Bearer "+tok.Reveal())
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if code, body := do("GET", "/v1/sessions", secret.Value{}, "10.0.0.1:1"); code != 401 || !strings.Contains(body, "paddock token create") {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _ := do("GET", "/v1/sessions", read, "10.0.0.1:1"); code != 200 || seen.UID != 1000 || !strings.HasPrefix(seen.Via, "token ") {
		t.Fatalf("read: %d %+v", code, seen)
	}
	if code, body := do("POST", "/v1/sessions/s/message", read, "10.0.0.1:1"); code != 403 || !strings.Contains(body, "needs a token of scope drive") {
		t.Fatalf("read sends: %d %s", code, body)
	}
	if code, _ := do("POST", "/v1/sessions/s/message", drive, "10.0.0.1:1"); code != 200 || seen.Via != "token "+dinfo.ID {
		t.Fatalf("drive sends: %d %+v", code, seen)
	}
	if code, body := do("POST", "/v1/sessions/s/exec", drive, "10.0.0.1:1"); code != 403 || !strings.Contains(body, "socket only") {
		t.Fatalf("exec through a token: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/unlisted", drive, "10.0.0.1:1"); code != 403 || !strings.Contains(body, "not open to API tokens") {
		t.Fatalf("a route not in api.Routes: %d %s", code, body)
	}
	if code, _ := do("GET", "/v1/sessions", gone, "10.0.0.1:1"); code != 403 {
		t.Fatalf("a person gone: %d", code)
	}
	bad := secret.New(Prefix + "0123456789ab_wrong")
	for i := 0; i < maxFailures; i++ {
		if code, _ := do("GET", "/v1/sessions", bad, "10.0.0.9:1"); code != 401 {
			t.Fatalf("wrong token %d: %d", i, code)
		}
	}
	if code, body := do("GET", "/v1/sessions", read, "10.0.0.9:1"); code != 429 || !strings.Contains(body, "wait a minute") {
		t.Fatalf("after %d wrong tokens: %d %s", maxFailures, code, body)
	}
	if code, _ := do("GET", "/v1/sessions", read, "10.0.0.1:1"); code != 200 {
		t.Fatalf("another address: %d", code)
	}
}

// TestLongAnswerEndsWithTheToken: an answer that lasts (an event stream)
// ends soon after its token is revoked, not when the client hangs up.
func TestLongAnswerEndsWithTheToken(t *testing.T) {
	s := New(store.NewMemory())
	s.every = 20 * time.Millisecond
	tok, info, _ := s.Create(1000, api.ScopeRead, "")
	started, ended := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(ended)
	})
	h := s.Handler(mux, func(uid uint32) (people.Person, error) { return people.Person{UID: uid, Name: "alice"}, nil })
	r := httptest.NewRequest("GET", "/v1/events", nil)
	r.Header.Set("Authorization", "Bearer "+tok.Reveal())
	go h.ServeHTTP(httptest.NewRecorder(), r)
	<-started
	select {
	case <-ended:
		t.Fatal("the answer ended while its token held")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := s.Remove(1000, false, info.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer outlived its token")
	}
}
