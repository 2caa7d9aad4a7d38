package access

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// FuzzAPIRequest sends any request a member of the group could send on
// the socket to the API behind the guard, as ben. Whatever the method,
// path, query, headers and body: no panic; the Runner is only ever called
// as ben; nothing of ann's session (not shared with him) comes back; and
// it never changes (stays unshared, running).
func FuzzAPIRequest(f *testing.F) {
	for _, s := range [][4]string{
		{"GET", "/v1/sessions", "", ""},
		{"GET", "/v1/sessions?all_users=1", "", ""},
		{"GET", "/v1/sessions/annwork", "X-Paddock-User: ann", ""},
		{"POST", "/v1/sessions/annwork/share", "", `{"user":"ben","role":"operator"}`},
		{"POST", "/v1/sessions/annwork/sleep", "", ""},
		{"POST", "/v1/sessions", "", `{"name":"x","owner":{"uid":2001,"name":"ann"}}`},
		{"POST", "/v1/sessions/annwork/attach", "Upgrade: paddock-exec/1", `{"role":"driver"}`},
		{"GET", "/v1/sessions/id0/logs?n=5", "", ""},
		{"GET", "/v1/audit?user=ann&session=annwork", "", ""},
		{"PUT", "/v1/credential", "", `{"credential":"sk-ant-oat01-x","kind":"oauth"}`},
		{"DELETE", "/v1/sessions/annwork?keep_volume=1", "", ""},
		{"POST", "/v1/sessions/id0/unshare", "", `{"user":"ben"}`},
		{"GET", "/v1/sessions/id/wait?for=waiting&timeout=1ms", "", ""},
		{"GET", "/v1/egress/pending", "", ""},
		{"POST", "/v1/sessions/annwork/egress/approve", "", `{"rule":"docs.example.com","scope":"always"}`},
		{"POST", "/v1/sessions/annwork/set", "", `{"egress":"allowlist","allow":["*.example.com"],"ask":true,"attach":["npm"]}`},
		{"POST", "/v1/sessions/annwork/merge", "", `{"into":"main","squash":true,"identity":{"name":"x","email":"y"}}`},
		{"POST", "/v1/sessions/annwork/message", "", `{"text":"fix it\nplease"}`},
		{"POST", "/v1/sessions/annwork/fetch", "", ""},
		{"GET", "/v1/sessions/annwork/diff?stat=1&no_untracked=1", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, method, target, header, body string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n#") || len(target) > 512 {
			return
		}
		g, in, _, _ := setup(t)
		annS := mustCreate(t, g, ann, "annwork")
		in.mu.Lock()
		in.did = nil
		in.mu.Unlock()
		req, err := http.NewRequest(method, "http://paddock"+target, bytes.NewReader([]byte(body)))
		if err != nil {
			return
		}
		if k, v, ok := strings.Cut(header, ":"); ok && k != "" {
			req.Header[strings.TrimSpace(k)] = []string{strings.TrimSpace(v)}
		}
		req = req.WithContext(people.With(req.Context(), ben))
		rec := httptest.NewRecorder()
		api.Handler(g).ServeHTTP(rec, req)
		for _, d := range in.did {
			if !strings.HasPrefix(d, "ben ") {
				t.Fatalf("the Runner was called as someone else: %q", d)
			}
		}
		if strings.Contains(rec.Body.String(), annS.ID) {
			t.Fatalf("ann's session leaked to ben: %s %s: %s", method, target, rec.Body.String())
		}
		s, _ := in.Session(t.Context(), annS.ID)
		if len(s.Shares) != 0 || s.Owner.Name != "ann" {
			t.Fatalf("ben changed ann's session: %+v", s)
		}
	})
}
