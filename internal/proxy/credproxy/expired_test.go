package credproxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// TestExpiredRefreshedAndSentAgain: an upstream 401 that says the token
// expired asks OnExpired once and sends the request again with the fresh
// credential, the body whole; any other 401 is relayed as it came.
func TestExpiredRefreshedAndSentAgain(t *testing.T) {
	const fresh = "sk-fake-fresh-oauth-token-0000000000"
	var seen []string
	var bodies []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		seen = append(seen, auth)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(b), "other-401"):
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"Invalid bearer token"}}`)
		case auth != "Bearer "+fresh:
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired. Please obtain a new token or refresh your existing token."}}`)
		default:
			io.WriteString(w, `{"id":"m","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
		}
	})
	var asked atomic.Int32
	h := newHarness(t, credential.KindOAuth, up, func(o *Options) {
		o.OnExpired = func(_ context.Context, used credential.Credential) (credential.Credential, bool) {
			asked.Add(1)
			if used.Secret.Reveal() == fresh {
				return credential.Credential{}, false
			}
			return credential.Credential{Kind: credential.KindOAuth, Secret: secret.New(fresh)}, true
		}
	})
	resp := h.do("POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, h.authed())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || asked.Load() != 1 || len(seen) != 2 || seen[1] != "Bearer "+fresh || bodies[0] != bodies[1] {
		t.Fatalf("status %d, asked %d, upstream saw %v: %s", resp.StatusCode, asked.Load(), len(seen), b)
	}
	// The decision is recorded once the answer is out: wait for it.
	var e []decisionlog.Entry
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if e = h.sink.all(); len(e) > 0 {
			break
		}
	}
	if len(e) != 1 || !strings.Contains(e[0].Reason, "refreshed and sent again") {
		t.Fatalf("the decision: %+v", e)
	}
	// Another 401 passes as it came, body and all; OnExpired is not asked.
	resp = h.do("POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"other-401"}]}`, h.authed())
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "Invalid bearer token") || asked.Load() != 1 {
		t.Fatalf("another 401: %d %s (asked %d)", resp.StatusCode, b, asked.Load())
	}
	if strings.Contains(strings.Join(seen, " "), h.token.Reveal()) {
		t.Fatal("the session token went upstream")
	}
}
