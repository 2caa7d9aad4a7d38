package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// TestPasskeyRefusals: the ceremonies answer only the page's own
// requests (X-Paddock: 1, its own Origin); an enrolment token is good
// only as minted; passkeys off says how to turn them on; the login and
// enrolment pages are public, the rest of the site is not.
func TestPasskeyRefusals(t *testing.T) {
	who := func(uid uint32) (people.Person, error) { return people.Person{UID: uid, Name: "alice"}, nil }
	off := New(nil, who, nil)
	s := New(nil, who, nil)
	if err := s.EnablePasskeys(PasskeyConfig{RPID: "paddock.test", Origins: []string{"https://paddock.test:7777"}}, store.NewMemory()); err != nil {
		t.Fatal(err)
	}
	do := func(srv *Server, method, path, body string, hdr map[string]string) (int, string) {
		r := httptest.NewRequest(method, "https://paddock.test:7777"+path, strings.NewReader(body))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	own := map[string]string{"X-Paddock": "1", "Origin": "https://paddock.test:7777"}
	if code, body := do(off, "POST", "/passkey/login/begin", "{}", own); code != 503 || !strings.Contains(body, "web.hosts") {
		t.Fatalf("passkeys off: %d %s", code, body)
	}
	if code, _ := do(s, "POST", "/passkey/login/begin", "{}", map[string]string{"Origin": "https://paddock.test:7777"}); code != 403 {
		t.Fatalf("without X-Paddock: %d", code)
	}
	if code, _ := do(s, "POST", "/passkey/login/begin", "{}", map[string]string{"X-Paddock": "1", "Origin": "https://evil.test"}); code != 403 {
		t.Fatalf("from another origin: %d", code)
	}
	if code, body := do(s, "POST", "/passkey/login/begin", "{}", own); code != 200 || !strings.Contains(body, `"challenge"`) || !strings.Contains(body, `"rpId":"paddock.test"`) {
		t.Fatalf("a login's options: %d %s", code, body)
	}
	if code, body := do(s, "POST", "/passkey/enroll/begin", `{"token":"made-up"}`, own); code != 401 || !strings.Contains(body, "paddock web enroll") {
		t.Fatalf("a made-up enrolment token: %d %s", code, body)
	}
	tok, err := s.NewEnrollment(1000)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(s, "POST", "/passkey/enroll/begin", `{"token":"`+tok.Reveal()+`"}`, own); code != 200 || !strings.Contains(body, `"user":"alice"`) || !strings.Contains(body, `"residentKey":"required"`) {
		t.Fatalf("an enrolment's options: %d %s", code, body)
	}
	// A finish with garbage uses the token up.
	if code, _ := do(s, "POST", "/passkey/enroll/finish?token="+tok.Reveal(), "{}", own); code != 400 {
		t.Fatalf("a bad enrolment answer: %d", code)
	}
	if code, _ := do(s, "POST", "/passkey/enroll/begin", `{"token":"`+tok.Reveal()+`"}`, own); code != 401 {
		t.Fatalf("a used enrolment token: %d", code)
	}
	for _, p := range []string{"/passkey", "/enroll", "/passkey.js", "/app.css"} {
		if code, _ := do(s, "GET", p, "", nil); code != 200 {
			t.Fatalf("GET %s without a login: %d", p, code)
		}
	}
	if code, body := do(s, "GET", "/", "", nil); code != http.StatusUnauthorized || !strings.Contains(body, "/passkey") {
		t.Fatalf("GET / without a login: %d %s", code, body)
	}
	if _, err := off.NewEnrollment(1000); err == nil {
		t.Fatal("an enrolment with passkeys off")
	}
}
